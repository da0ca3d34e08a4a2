// `splash serve` flag checks (spec 1.2): each accepts the documented syntax and names the flag when
// it refuses.
#include "server/app/serve_options.h"

#include "gtest/gtest.h"

namespace splash::app {
namespace {

TEST(AppOptions, Port) {
  EXPECT_EQ(*parse_port("8000"), 8000);
  EXPECT_EQ(*parse_port("1"), 1);
  EXPECT_EQ(*parse_port("65535"), 65535);
  for (const char* bad : {"0", "65536", "", "80a", "-1", "123456", " 80"}) {
    auto p = parse_port(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.error_message().find("--port"), std::string::npos);
  }
  EXPECT_NE(parse_port("x", "SPLASH_PORT").error_message().find("SPLASH_PORT"), std::string::npos);
}

TEST(AppOptions, ApiKey) {
  EXPECT_TRUE(check_api_key("sk-abc_123").ok());
  for (const char* bad : {"", "has space", "tab\there", "caf\xc3\xa9", "nl\n"}) {
    Status st = check_api_key(bad);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.error_message().find("--api-key"), std::string::npos);
  }
  // A key from the environment is named by its variable.
  EXPECT_EQ(check_api_key("", "SPLASH_API_KEY").error_message(), "SPLASH_API_KEY: the key is empty");
}

TEST(AppOptions, AllowedOrigin) {
  for (const char* ok : {"*", "http://localhost:3000", "https://app.example.com", "http://[::1]:8080", "http://10.0.0.2"})
    EXPECT_TRUE(check_allowed_origin(ok).ok()) << ok;
  for (const char* bad : {"localhost:3000", "http://*.example.com", "https://a.com/path", "ftp://a.com", "http://",
                          "http://a.com:99999", "**", "http://user@a.com"}) {
    Status st = check_allowed_origin(bad);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.error_message().find("--allowed-origin"), std::string::npos);
  }
}

TEST(AppOptions, ServedModelName) {
  for (const char* ok : {"qwen3", "org/model-1.5B", "a.b_c-d"}) EXPECT_TRUE(check_served_model_name(ok).ok()) << ok;
  for (const char* bad : {"", "a b", "a%20", "a?b", "a#b", "a\\b", "/lead", "trail/", "a//b", ".", "a/../b", "x/./y",
                          "ctl\x01"}) {
    Status st = check_served_model_name(bad);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.error_message().find("--served-model-name"), std::string::npos);
  }
}

TEST(AppOptions, AnnounceServedNameNeedsAnAlias) {
  EXPECT_TRUE(check_announce_served_name(false, {}).ok());
  EXPECT_TRUE(check_announce_served_name(true, {"alias"}).ok());
  Status st = check_announce_served_name(true, {});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error_message(), "--announce-served-name needs --served-model-name");
}

TEST(AppOptions, DecodeShare) {
  EXPECT_EQ(*parse_decode_share("0"), 0.0);
  EXPECT_EQ(*parse_decode_share("0.5"), 0.5);
  EXPECT_EQ(*parse_decode_share("2"), 2.0);
  for (const char* bad : {"", "-0.1", "inf", "nan", "1e400", "x", "0.5x"}) {
    auto r = parse_decode_share(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error_message().find("--decode-share"), std::string::npos) << r.error_message();
  }
}

TEST(AppOptions, MaxImagePixels) {
  EXPECT_EQ(*parse_max_image_pixels("4194304"), 4194304);
  EXPECT_EQ(*parse_max_image_pixels("1"), 1);
  for (const char* bad : {"", "0", "-1", "1.5", "4M", "99999999999999999999"}) {
    auto r = parse_max_image_pixels(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error_message().find("--max-image-pixels"), std::string::npos) << r.error_message();
  }
}

TEST(AppOptions, Duration) {
  EXPECT_EQ(parse_duration("90")->count(), 90000);
  EXPECT_EQ(parse_duration("1.5m")->count(), 90000);
  EXPECT_EQ(parse_duration("2h")->count(), 7200000);
  EXPECT_EQ(parse_duration("0.25s")->count(), 250);
  EXPECT_EQ(parse_duration("1e9")->count(), int64_t{1000000000000});
  // 1e10 s would overflow the nanosecond deadline (arrival + timeout) and expire at once.
  for (const char* bad : {"0", "-5", "", "s", "inf", "nan", "5d", "1e400", "1e10", "3e8h"}) {
    auto d = parse_duration(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_NE(d.error_message().find("--request-timeout"), std::string::npos);
  }
}

TEST(AppOptions, IdleRelease) {
  EXPECT_FALSE(parse_idle_release("off")->has_value());
  EXPECT_FALSE(parse_idle_release("OFF")->has_value());
  EXPECT_EQ(parse_idle_release("10m")->value_or(std::chrono::milliseconds(0)).count(), 600000);
  EXPECT_EQ(parse_idle_release("2s")->value_or(std::chrono::milliseconds(0)).count(), 2000);
  for (const char* bad : {"0", "never", "", "-1m"}) {
    auto d = parse_idle_release(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_NE(d.error_message().find("--idle-release"), std::string::npos) << d.error_message();
    EXPECT_NE(d.error_message().find("or off"), std::string::npos) << d.error_message();
  }
  EXPECT_NE(parse_duration("x", "--drafter-watch").error_message().find("--drafter-watch"), std::string::npos);
}

TEST(AppOptions, MaxRequestSize) {
  EXPECT_FALSE(parse_max_request_size("auto")->has_value());
  EXPECT_FALSE(parse_max_request_size("AUTO")->has_value());
  EXPECT_EQ(parse_max_request_size("64K")->value_or(0), 65536u);
  EXPECT_EQ(parse_max_request_size("128M")->value_or(0), uint64_t{128} << 20);
  for (const char* bad : {"0", "-1", "lots", ""}) {
    auto r = parse_max_request_size(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error_message().find("--max-request-size"), std::string::npos) << r.error_message();
  }
  EXPECT_EQ(auto_max_request_rule(), "auto: 64 bytes per context token, 8M..128M");
}

TEST(AppOptions, CacheFlags) {
  EXPECT_FALSE(parse_max_cache_disk("auto")->has_value());
  EXPECT_EQ(**parse_max_cache_disk("0"), 0u);
  EXPECT_EQ(**parse_max_cache_disk("64M"), uint64_t{64} << 20);
  EXPECT_EQ(**parse_max_cache_disk("16GiB"), uint64_t{16} << 30);
  auto bad = parse_max_cache_disk("lots");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error_message().find("--max-cache-disk"), std::string::npos);
  EXPECT_TRUE(check_cache_flags(0, false, false).ok());
  EXPECT_TRUE(check_cache_flags(uint64_t{1} << 30, true, true).ok());
  EXPECT_TRUE(check_cache_flags(std::nullopt, true, false).ok());  // auto: the start-up decides
  auto p = check_cache_flags(0, true, false);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error_message().find("--persistent-cache needs --max-cache-disk"), std::string::npos);
  auto d = check_cache_flags(uint64_t{1} << 30, false, true);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error_message().find("--cache-dir needs --persistent-cache"), std::string::npos);
}

TEST(AppOptions, MaxMemoryAndContext) {
  EXPECT_FALSE(parse_max_memory("auto")->has_value());
  EXPECT_EQ(**parse_max_memory("28G"), uint64_t{28} << 30);
  EXPECT_EQ(**parse_max_memory("28GiB"), uint64_t{28} << 30);
  EXPECT_EQ(**parse_max_memory("512m"), uint64_t{512} << 20);
  auto zero = parse_max_memory("0");
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.error_message().find("--max-memory"), std::string::npos);
  EXPECT_FALSE(parse_max_memory("lots").ok());

  EXPECT_FALSE(parse_max_context("auto")->has_value());
  EXPECT_EQ(**parse_max_context("100K"), 102400);
  EXPECT_EQ(**parse_max_context("256K"), 262144);
  EXPECT_EQ(**parse_max_context("1"), 1);
  for (const char* bad : {"257K", "0", "262145", "1.5K", "10M", "x"}) {
    auto c = parse_max_context(bad);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.error_message().find("--max-context"), std::string::npos) << c.error_message();
  }
}

TEST(AppOptions, KvFormatAndEffort) {
  EXPECT_EQ(*parse_kv_format("int8"), KvFormat::kInt8);
  EXPECT_EQ(*parse_kv_format("bf16"), KvFormat::kBF16);
  EXPECT_EQ(*parse_kv_format("f32"), KvFormat::kF32);
  EXPECT_NE(parse_kv_format("q4").error_message().find("--kv-format"), std::string::npos);
  for (const char* e : {"none", "minimal", "low", "medium", "high", "xhigh", "max"})
    EXPECT_TRUE(check_reasoning_effort(e).ok()) << e;
  EXPECT_NE(check_reasoning_effort("extreme").error_message().find("--default-reasoning-effort"), std::string::npos);
}

}  // namespace
}  // namespace splash::app
