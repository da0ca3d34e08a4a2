// generate(): the single-sequence loop against a hand-written forward + argmax loop on a tiny random
// model, its stop conditions, seeded sampling, and the real stories15M greedy golden ids.
#include "engine/generate.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "scheduler_test_util.h"
#include "testmodel/test_model.h"
#include "tokenizer/model_tokenizer.h"

namespace splash {
namespace {

class TempDir {
 public:
  explicit TempDir(const std::string& tag)
      : path_((std::filesystem::temp_directory_path() / ("splash_engine_" + tag + "_" + std::to_string(getpid()))).string()) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The model loader shared with the scheduler tests (ModelFiles and Model kept together).
using Loaded = sched_test::LoadedModel;
using sched_test::load_model;

class GenerateTiny : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<TempDir>("tiny");
    auto spec = test_model_preset("tiny-llama");
    ASSERT_TRUE(spec.ok()) << spec.error_message();
    path_ = dir_->path() + "/tiny.gguf";
    Status st = write_test_model(*spec, path_);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  static void TearDownTestSuite() { dir_.reset(); }

  void SetUp() override {
    m_ = load_model(path_);
    ASSERT_TRUE(m_);
    prompt_ = {m_->tokenizer->bos_id()};
    for (int32_t id : m_->tokenizer->encode("the cat sat", false, false)) prompt_.push_back(id);
    ASSERT_GE(prompt_.size(), 2u);
  }

  GenerateOptions greedy(int64_t n) const {
    GenerateOptions o;
    o.max_tokens = n;
    o.sampling.temperature = 0;
    o.kv_format = KvFormat::kF32;
    o.threads = 2;
    return o;
  }

  static inline std::unique_ptr<TempDir> dir_;
  static inline std::string path_;
  std::unique_ptr<Loaded> m_;
  std::vector<int32_t> prompt_;
};

int32_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return static_cast<int32_t>(best);
}

TEST_F(GenerateTiny, GreedyEqualsForwardArgmax) {
  const int64_t n = 24;
  std::string text;
  auto stats = generate(m_->model, *m_->tokenizer, prompt_, greedy(n), [&](std::string_view s) { text += s; });
  ASSERT_TRUE(stats.ok()) << stats.error_message();

  // The same loop by hand: prefill, then argmax and one decode step per token.
  ThreadPool threads(2);
  auto kv = KvPagePool::create(m_->model.kv_cache_config(KvFormat::kF32, 8));
  ASSERT_TRUE(kv.ok());
  SequenceState seq;
  SequenceRun run{&seq, prompt_};
  auto out = m_->model.forward({&run, 1}, *kv, threads);
  ASSERT_TRUE(out.ok()) << out.error_message();
  std::vector<int32_t> expected;
  for (int64_t i = 0; i < n; ++i) {
    int32_t tok = argmax(out->logits_row(0), out->n_vocab);
    if (m_->tokenizer->is_eog(tok)) break;
    expected.push_back(tok);
    SequenceRun step{&seq, {&tok, 1}};
    out = m_->model.forward({&step, 1}, *kv, threads);
    ASSERT_TRUE(out.ok()) << out.error_message();
  }
  release_sequence(*kv, seq);

  EXPECT_EQ(stats->tokens, expected);
  EXPECT_EQ(stats->n_generated, static_cast<int64_t>(expected.size()));
  EXPECT_EQ(stats->n_prompt, static_cast<int64_t>(prompt_.size()));
  if (expected.size() == static_cast<size_t>(n)) EXPECT_EQ(stats->finish, FinishReason::kLength);
  else EXPECT_TRUE(sched_test::ended_at_eos(*stats));
  EXPECT_EQ(text, m_->tokenizer->decode(expected));
  EXPECT_GT(stats->prefill_tok_s, 0);
  EXPECT_GE(stats->ttft_ms, stats->prefill_ms);
}

TEST_F(GenerateTiny, MaxTokensRespected) {
  for (int64_t n : {0, 1, 7}) {
    auto stats = generate(m_->model, *m_->tokenizer, prompt_, greedy(n), nullptr);
    ASSERT_TRUE(stats.ok()) << stats.error_message();
    if (sched_test::ended_at_eos(*stats)) {
      EXPECT_LT(stats->n_generated, n);
    } else {
      EXPECT_EQ(stats->finish, FinishReason::kLength);
      EXPECT_EQ(stats->n_generated, n);
      EXPECT_EQ(stats->n_decode_steps, std::max<int64_t>(n - 1, 0));
    }
  }
}

TEST_F(GenerateTiny, StopStringCutsOutputExactly) {
  std::string full;
  auto base = generate(m_->model, *m_->tokenizer, prompt_, greedy(40), [&](std::string_view s) { full += s; });
  ASSERT_TRUE(base.ok()) << base.error_message();
  ASSERT_GE(full.size(), 12u) << "the tiny model produced too little text: '" << full << "'";
  // A two-byte printable ASCII stop from the second half of the text (the tiny model's random
  // byte-fallback output also holds invalid UTF-8, which a stop string may not be).
  auto printable = [](char c) { return c >= 0x20 && c < 0x7f; };
  size_t at = full.size() / 2;
  while (at + 1 < full.size() && !(printable(full[at]) && printable(full[at + 1]))) ++at;
  ASSERT_LT(at + 1, full.size()) << "no ASCII pair in the second half of '" << full << "'";
  const std::string stop = full.substr(at, 2);
  const std::string expected = full.substr(0, full.find(stop));

  GenerateOptions o = greedy(40);
  o.stop = {stop};
  std::string cut;
  auto stats = generate(m_->model, *m_->tokenizer, prompt_, o, [&](std::string_view s) { cut += s; });
  ASSERT_TRUE(stats.ok()) << stats.error_message();
  EXPECT_TRUE(sched_test::ended_at_stop_string(*stats));
  EXPECT_EQ(cut, expected) << "stop '" << stop << "' in '" << full << "'";
  EXPECT_LT(stats->n_generated, base->n_generated);
}

TEST_F(GenerateTiny, SeededSamplingIsReproducible) {
  auto run = [&](uint64_t seed) {
    GenerateOptions o = greedy(24);
    o.sampling.temperature = 1.0f;
    o.sampling.seed = seed;
    auto s = generate(m_->model, *m_->tokenizer, prompt_, o, nullptr);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return s.ok() ? s->tokens : std::vector<int32_t>{};
  };
  const auto a = run(42), b = run(42), c = run(43);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST_F(GenerateTiny, BadInputsAreErrors) {
  auto empty = generate(m_->model, *m_->tokenizer, {}, greedy(4), nullptr);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error_message().find("empty"), std::string::npos);
  GenerateOptions neg = greedy(-1);
  EXPECT_FALSE(generate(m_->model, *m_->tokenizer, prompt_, neg, nullptr).ok());
  GenerateOptions bad_temp = greedy(4);
  bad_temp.sampling.temperature = -1;
  EXPECT_FALSE(generate(m_->model, *m_->tokenizer, prompt_, bad_temp, nullptr).ok());
  GenerateOptions bad_stop = greedy(4);
  bad_stop.stop = {""};
  EXPECT_FALSE(generate(m_->model, *m_->tokenizer, prompt_, bad_stop, nullptr).ok());
  const std::vector<int32_t> bad_id = {m_->tokenizer->bos_id(), m_->tokenizer->n_vocab() + 5};
  EXPECT_FALSE(generate(m_->model, *m_->tokenizer, bad_id, greedy(4), nullptr).ok());
}

TEST_F(GenerateTiny, StopsAtContextLimit) {
  ModelOptions mo;
  mo.max_context = 64;
  auto small = load_model(path_, mo);
  ASSERT_TRUE(small);
  ASSERT_EQ(small->model.max_context(), 64);
  std::vector<int32_t> long_prompt(64, prompt_[1]);
  long_prompt[0] = prompt_[0];
  auto too_long = generate(small->model, *small->tokenizer, long_prompt, greedy(4), nullptr);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.error_message().find("context limit"), std::string::npos) << too_long.error_message();

  long_prompt.resize(60);
  auto stats = generate(small->model, *small->tokenizer, long_prompt, greedy(100), nullptr);
  ASSERT_TRUE(stats.ok()) << stats.error_message();
  if (!sched_test::ended_at_eos(*stats)) {
    EXPECT_EQ(stats->finish, FinishReason::kContext);
    // Positions 60..63 hold the first four sampled tokens; the fifth is sampled from position 63.
    EXPECT_EQ(stats->n_generated, 5);
  }
}

// --- stories15M (skipped when the demo model is absent) -------------------------------------------

std::string demo_dir() {
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.cache/splash/demo";
}

std::vector<int32_t> read_ids(const std::string& path) {
  std::ifstream f(path);
  std::vector<int32_t> ids;
  std::string item;
  while (std::getline(f, item, ',')) ids.push_back(std::stoi(item));
  return ids;
}

TEST(GenerateStories15M, GreedyFromBosMatchesGolden) {
  const std::string path = demo_dir() + "/stories15M.bin";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  auto m = load_model(path);
  ASSERT_TRUE(m);
  GenerateOptions o;
  o.max_tokens = 50;
  o.sampling.temperature = 0;
  o.kv_format = KvFormat::kF32;
  o.threads = 2;
  std::string text;
  const std::vector<int32_t> bos = {m->tokenizer->bos_id()};
  auto stats = generate(m->model, *m->tokenizer, bos, o, [&](std::string_view s) { text += s; });
  ASSERT_TRUE(stats.ok()) << stats.error_message();
  const std::vector<int32_t> golden =
      read_ids(std::string(SPLASH_SOURCE_DIR) + "/tests/reference/golden/stories15M_greedy200.ids");
  ASSERT_GE(golden.size(), 50u);
  EXPECT_EQ(stats->tokens, std::vector<int32_t>(golden.begin(), golden.begin() + 50));
  EXPECT_EQ(text.rfind("Once upon a time, there was a little girl named Lily.", 0), 0u) << text;
}

// --- the `splash run` binary ------------------------------------------------------------------------

struct Proc {
  int code = -1;
  std::string out, err;
};

Proc run_splash(const std::string& args) {
  TempDir dir("cli");
  const std::string out = dir.path() + "/out", err = dir.path() + "/err";
  const std::string cmd = std::string(SPLASH_BINARY_DIR) + "/splash " + args + " >" + out + " 2>" + err;
  Proc p;
  const int rc = std::system(cmd.c_str());
  p.code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  auto slurp = [](const std::string& f) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  p.out = slurp(out);
  p.err = slurp(err);
  return p;
}

TEST(SplashRunCli, BadFlagsExit2AndMissingModelExits1) {
  if (!std::filesystem::exists(std::string(SPLASH_BINARY_DIR) + "/splash")) GTEST_SKIP() << "splash not built";
  Proc neg = run_splash("run --model /nonexistent.gguf -n -3");
  EXPECT_EQ(neg.code, 2) << neg.err;
  EXPECT_NE(neg.err.find("-n"), std::string::npos) << neg.err;
  Proc kv = run_splash("run --model /nonexistent.gguf --kv-format q4");
  EXPECT_EQ(kv.code, 2) << kv.err;
  EXPECT_NE(kv.err.find("kv-format"), std::string::npos) << kv.err;
  Proc temp = run_splash("run --model /nonexistent.gguf --temp -1");
  EXPECT_EQ(temp.code, 2) << temp.err;
  Proc missing = run_splash("run --model /nonexistent.gguf -n 4");
  EXPECT_EQ(missing.code, 1) << missing.err;
  EXPECT_NE(missing.err.find("/nonexistent.gguf"), std::string::npos) << missing.err;
}

TEST(SplashRunCli, Stories15MStreamsTextAndStats) {
  const std::string path = demo_dir() + "/stories15M.bin";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  if (!std::filesystem::exists(std::string(SPLASH_BINARY_DIR) + "/splash")) GTEST_SKIP() << "splash not built";
  Proc p = run_splash("run --model " + path + " -n 20 --temp 0 --threads 2");
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_EQ(p.out.rfind("Once upon a time", 0), 0u) << p.out;
  EXPECT_NE(p.err.find("prompt tokens 1 · TTFT "), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("decode "), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("(20 tokens)"), std::string::npos) << p.err;
}

TEST(SplashBenchCli, DepthFillsTheCacheBeforeEachTestAndNamesIt) {
  const std::string path = demo_dir() + "/stories15M.bin";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  if (!std::filesystem::exists(std::string(SPLASH_BINARY_DIR) + "/splash")) GTEST_SKIP() << "splash not built";
  Proc neg = run_splash("bench --model " + path + " -d -1");
  EXPECT_EQ(neg.code, 2) << neg.err;
  EXPECT_NE(neg.err.find("-d -1 is negative"), std::string::npos) << neg.err;
  // stories15M holds 256 positions: 250 of depth leave no room for a tg8 (a one-token prompt + 8).
  Proc deep = run_splash("bench --model " + path + " -p 0 -n 8 -d 250 -r 1");
  EXPECT_EQ(deep.code, 2) << deep.err;
  EXPECT_NE(deep.err.find("(250 of depth)"), std::string::npos) << deep.err;

  Proc p = run_splash("bench --model " + path + " -p 16 -n 8 -d 100 -r 1 --threads 2 --json");
  ASSERT_EQ(p.code, 0) << p.err;
  const auto rows = nlohmann::json::parse(p.out);
  ASSERT_EQ(rows.size(), 2u) << p.out;
  EXPECT_EQ(rows[0]["test"], "pp16 @ d100");
  EXPECT_EQ(rows[1]["test"], "tg8 @ d100");
  for (const auto& r : rows) EXPECT_EQ(r["n_depth"], 100);
  // Decode reads the KV of depth + (8 + 1) / 2 positions on average, on top of the weights.
  Proc flat = run_splash("bench --model " + path + " -p 0 -n 8 -r 1 --threads 2 --json");
  ASSERT_EQ(flat.code, 0) << flat.err;
  const auto flat_rows = nlohmann::json::parse(flat.out);
  ASSERT_EQ(flat_rows.size(), 1u);
  EXPECT_EQ(flat_rows[0]["test"], "tg8");
  // Decode rows name the tuned prefetch distances (empty where no product was big enough to time,
  // as here, or no layout is tuned); prefill rows do not.
  ASSERT_TRUE(flat_rows[0].contains("decode_prefetch")) << flat.out;
  EXPECT_TRUE(flat_rows[0]["decode_prefetch"].is_string()) << flat.out;
  EXPECT_FALSE(rows[0].contains("decode_prefetch")) << p.out;
  const double kv_extra = rows[1]["decode_bytes_per_token"].get<double>() -
                          flat_rows[0]["decode_bytes_per_token"].get<double>();
  EXPECT_GT(kv_extra, 0.0);  // the depth's KV counted in what a step reads
}

}  // namespace
}  // namespace splash
