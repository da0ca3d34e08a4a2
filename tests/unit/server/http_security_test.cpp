// Spec 2.2 access rules: Host allow-list, Origin/CORS, API key; and the SSE framing.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/http/security.h"
#include "server/http/sse.h"

namespace splash::http {
namespace {

Request make_request(std::string method, std::string path, std::vector<Header> headers) {
  Request r;
  r.method = std::move(method);
  r.path = std::move(path);
  r.target = r.path;
  r.headers = std::move(headers);
  return r;
}

// --- Host --------------------------------------------------------------------------------------

struct HostCase {
  const char* host_header;
  const char* local_addr;
  bool allowed;
};

TEST(HttpSecurity, HostAllowList) {
  HostPolicy policy;
  policy.bind_host = "0.0.0.0";
  policy.allowed_hosts = {"splash.lan", "Box.Example:9000", "::2"};
  const HostCase cases[] = {
      {"localhost", "", true},
      {"localhost:8000", "", true},
      {"LOCALHOST:8000", "", true},
      {"127.0.0.1:8000", "", true},
      {"[::1]:8000", "", true},
      {"[::1]", "", true},
      {"0.0.0.0:8000", "", true},           // the bind address
      {"192.168.1.20:8000", "192.168.1.20", true},  // the address the connection arrived on
      {"192.168.1.20:8000", "10.0.0.5", false},
      {"splash.lan:8000", "", true},        // --allowed-host
      {"SPLASH.LAN", "", true},
      {"box.example", "", true},            // a port on --allowed-host is ignored
      {"[::2]:80", "", true},               // bare IPv6 in --allowed-host
      {"evil.example:8000", "", false},     // DNS rebinding
      {"localhost.evil.example", "", false},
      {"127.0.0.1.nip.io", "", false},
      {"", "", false},
      {"localhost:", "", false},            // empty port
      {"localhost:99999", "", false},
      {"localhost:80x", "", false},
      {"[::1", "", false},
      {"local host", "", false},
      {"user@localhost", "", false},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(host_allowed(c.host_header, policy, c.local_addr), c.allowed)
        << "Host: '" << c.host_header << "' local " << c.local_addr;
  }
}

TEST(HttpSecurity, HostBindAddressCounts) {
  HostPolicy policy;
  policy.bind_host = "10.1.2.3";
  EXPECT_TRUE(host_allowed("10.1.2.3:8000", policy));
  EXPECT_FALSE(host_allowed("10.1.2.4:8000", policy));
  EXPECT_NE(host_refused_message("evil.example:8000").find("--allowed-host evil.example"), std::string::npos);
  // No Host at all (HTTP/1.0 may leave it out): said so, not "--allowed-host " with an empty name.
  const std::string none = host_refused_message("");
  EXPECT_NE(none.find("no Host header"), std::string::npos) << none;
  EXPECT_EQ(none.find("--allowed-host"), std::string::npos) << none;
  const std::string bad = host_refused_message("a b");
  EXPECT_NE(bad.find("is not a host name"), std::string::npos) << bad;
  EXPECT_EQ(bad.find("--allowed-host"), std::string::npos) << bad;
}

TEST(HttpSecurity, ParseHostPort) {
  auto hp = parse_host_port("[::1]:8080");
  ASSERT_TRUE(hp.has_value());
  EXPECT_EQ(hp->host, "::1");
  EXPECT_EQ(hp->port.value_or(0), 8080);
  hp = parse_host_port("Example.COM");
  ASSERT_TRUE(hp.has_value());
  EXPECT_EQ(hp->host, "example.com");
  EXPECT_FALSE(hp->port.has_value());
  EXPECT_FALSE(parse_host_port("a:0").has_value());
  EXPECT_FALSE(parse_host_port("[zz]:1").has_value());
}

// --- Origin ------------------------------------------------------------------------------------

struct OriginCase {
  std::optional<std::string> origin;
  const char* host;
  std::vector<std::string> allowed;
  OriginVerdict verdict;
};

TEST(HttpSecurity, OriginDecisions) {
  const std::vector<OriginCase> cases = {
      {std::nullopt, "localhost:8000", {}, OriginVerdict::kNoOrigin},
      {"http://localhost:8000", "localhost:8000", {}, OriginVerdict::kSameOrigin},
      {"http://LOCALHOST:8000", "localhost:8000", {}, OriginVerdict::kSameOrigin},
      {"http://localhost", "localhost:80", {}, OriginVerdict::kSameOrigin},  // default port
      {"http://localhost:80", "localhost", {}, OriginVerdict::kSameOrigin},
      {"http://[::1]:8000", "[::1]:8000", {}, OriginVerdict::kSameOrigin},
      {"http://localhost:3000", "localhost:8000", {}, OriginVerdict::kRefused},  // other port
      {"https://localhost:8000", "localhost:8000", {}, OriginVerdict::kRefused},  // other scheme
      {"http://127.0.0.1:8000", "localhost:8000", {}, OriginVerdict::kRefused},  // other host
      {"http://localhost:8000/", "localhost:8000", {}, OriginVerdict::kRefused},  // not an origin
      {"http://evil.example", "localhost:8000", {}, OriginVerdict::kRefused},
      {"http://evil.example", "localhost:8000", {"http://evil.example"}, OriginVerdict::kListed},
      {"http://evil.example:81", "localhost:8000", {"http://evil.example"}, OriginVerdict::kRefused},
      {"https://app.example", "localhost:8000", {"http://x.example", "https://app.example"}, OriginVerdict::kListed},
      {"http://anything.example", "localhost:8000", {"*"}, OriginVerdict::kListed},
      {"null", "localhost:8000", {}, OriginVerdict::kRefused},
      {"null", "localhost:8000", {"http://evil.example"}, OriginVerdict::kRefused},
      {"null", "localhost:8000", {"*"}, OriginVerdict::kListed},
  };
  for (const auto& c : cases) {
    OriginPolicy policy{c.allowed};
    std::optional<std::string_view> origin;
    if (c.origin) origin = *c.origin;
    CorsDecision d = check_origin(origin, c.host, policy);
    EXPECT_EQ(static_cast<int>(d.verdict), static_cast<int>(c.verdict))
        << "Origin " << c.origin.value_or("(none)") << " Host " << c.host;
    if (d.verdict == OriginVerdict::kSameOrigin || d.verdict == OriginVerdict::kListed) {
      EXPECT_EQ(find_header(d.headers, "Access-Control-Allow-Origin").value_or(""), *c.origin);
      EXPECT_EQ(find_header(d.headers, "Vary").value_or(""), "Origin");
      EXPECT_EQ(find_header(d.headers, "Access-Control-Expose-Headers").value_or(""),
                "Retry-After, WWW-Authenticate");
    } else {
      EXPECT_TRUE(d.headers.empty());
    }
  }
}

TEST(HttpSecurity, Preflight) {
  Request r = make_request("OPTIONS", "/v1/chat/completions",
                           {{"Host", "localhost:8000"},
                            {"Origin", "http://app.example"},
                            {"Access-Control-Request-Method", "POST"},
                            {"Access-Control-Request-Headers", "authorization, content-type"}});
  EXPECT_TRUE(is_preflight(r));
  OriginPolicy policy{{"http://app.example"}};
  CorsDecision d = check_origin(r.header("Origin"), *r.header("Host"), policy);
  SimpleResponse resp = preflight_response(r, d);
  EXPECT_EQ(resp.status, 204);
  EXPECT_EQ(find_header(resp.headers, "Access-Control-Allow-Origin").value_or(""), "http://app.example");
  EXPECT_EQ(find_header(resp.headers, "Access-Control-Allow-Methods").value_or(""), "GET, HEAD, POST, DELETE, OPTIONS");
  EXPECT_EQ(find_header(resp.headers, "Access-Control-Allow-Headers").value_or(""), "authorization, content-type");
  EXPECT_EQ(find_header(resp.headers, "Access-Control-Max-Age").value_or(""), "600");

  CorsDecision refused = check_origin(r.header("Origin"), *r.header("Host"), OriginPolicy{});
  SimpleResponse no = preflight_response(r, refused);
  EXPECT_EQ(no.status, 403);
  EXPECT_NE(no.body.find("--allowed-origin http://app.example"), std::string::npos);
  EXPECT_NE(no.body.find("\"forbidden\""), std::string::npos);

  Request plain = make_request("OPTIONS", "/", {{"Host", "a"}});
  EXPECT_FALSE(is_preflight(plain));
}

// --- API key -----------------------------------------------------------------------------------

TEST(HttpSecurity, PublicPaths) {
  EXPECT_TRUE(is_public_path("GET", "/"));
  EXPECT_TRUE(is_public_path("GET", "/health"));
  EXPECT_TRUE(is_public_path("GET", "/ready"));
  EXPECT_TRUE(is_public_path("GET", "/favicon.ico"));
  EXPECT_TRUE(is_public_path("GET", "/index.html"));  // the page under its other name (was behind the key)
  EXPECT_TRUE(is_public_path("GET", "/assets/app.js"));
  EXPECT_TRUE(is_public_path("OPTIONS", "/v1/chat/completions"));
  EXPECT_FALSE(is_public_path("POST", "/v1/chat/completions"));
  EXPECT_FALSE(is_public_path("GET", "/v1/models"));
  EXPECT_FALSE(is_public_path("GET", "/status"));
  EXPECT_FALSE(is_public_path("GET", "/metrics"));
  EXPECT_FALSE(is_public_path("GET", "/assets/"));
  EXPECT_FALSE(is_public_path("GET", "/assets/../status"));
  EXPECT_FALSE(is_public_path("GET", "/assets/%2e%2e/status"));
  EXPECT_FALSE(is_public_path("GET", "/healthz"));
  EXPECT_FALSE(is_public_path("GET", "//health"));
}

// The public page paths are exactly the ones the router serves the page from.
TEST(HttpSecurity, WebPagePathsArePublic) {
  for (const char* p : {"/", "/index.html", "/favicon.ico", "/assets/index.html", "/assets/app.js"}) {
    EXPECT_TRUE(is_web_page_path(p)) << p;
    EXPECT_TRUE(is_public_path("GET", p)) << p;
  }
  for (const char* p : {"/index.htm", "/assets", "/assets/", "/status", "/v1/models"}) EXPECT_FALSE(is_web_page_path(p)) << p;
}

// --- logging refusals ----------------------------------------------------------------------------

TEST(HttpSecurity, LogExcerptIsBounded) {
  EXPECT_EQ(log_excerpt("http://a.example"), "http://a.example");
  EXPECT_EQ(log_excerpt("a\nb\x01\xff"), "a?b??");
  const std::string huge(60000, 'x');
  const std::string e = log_excerpt("http://" + huge);
  EXPECT_EQ(e, "http://" + std::string(193, 'x') + "...(+59807 bytes)");
  EXPECT_LT(e.size(), 240u);
}

TEST(HttpSecurity, RefusalLogPrintsAtMostOneLineASecond) {
  RefusalLog log(std::chrono::seconds(1));
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(log.line("refused A", t0).has_value());
  int printed = 0;
  for (int i = 1; i <= 200; ++i)
    if (log.line("refused B", t0 + std::chrono::milliseconds(i)).has_value()) ++printed;
  EXPECT_EQ(printed, 0);
  auto next = log.line("refused C", t0 + std::chrono::milliseconds(1500));
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(*next, "refused C (200 more refusals since the last line, not logged)");
  EXPECT_EQ(log.line("refused D", t0 + std::chrono::milliseconds(2600)), std::optional<std::string>("refused D"));
}

struct AuthCase {
  std::vector<Header> headers;
  AuthVerdict verdict;
};

TEST(HttpSecurity, ApiKeyRules) {
  const std::string key = "sk-local-123";
  const std::vector<AuthCase> cases = {
      {{}, AuthVerdict::kMissing},
      {{{"Authorization", "Bearer sk-local-123"}}, AuthVerdict::kOk},
      {{{"authorization", "bearer sk-local-123"}}, AuthVerdict::kOk},  // scheme case-insensitive
      {{{"Authorization", "BEARER   sk-local-123  "}}, AuthVerdict::kOk},
      {{{"x-api-key", "sk-local-123"}}, AuthVerdict::kOk},
      {{{"X-Api-Key", "sk-local-123"}}, AuthVerdict::kOk},
      {{{"Authorization", "Bearer sk-local-124"}}, AuthVerdict::kInvalid},
      {{{"Authorization", "Bearer sk-local-12"}}, AuthVerdict::kInvalid},   // prefix
      {{{"Authorization", "Bearer sk-local-1234"}}, AuthVerdict::kInvalid},  // longer
      {{{"Authorization", "Bearer SK-LOCAL-123"}}, AuthVerdict::kInvalid},   // the key is case-sensitive
      {{{"Authorization", "Bearer "}}, AuthVerdict::kMissing},
      {{{"Authorization", "Basic c2stbG9jYWwtMTIz"}}, AuthVerdict::kMissing},  // not a key scheme
      {{{"Authorization", "Bearersk-local-123"}}, AuthVerdict::kMissing},
      {{{"x-api-key", ""}}, AuthVerdict::kInvalid},
      {{{"Authorization", "Bearer sk-local-123"}, {"x-api-key", "sk-local-123"}}, AuthVerdict::kOk},
      {{{"Authorization", "Bearer sk-local-123"}, {"x-api-key", "wrong"}}, AuthVerdict::kInvalid},
      {{{"Authorization", "Bearer wrong"}, {"x-api-key", "sk-local-123"}}, AuthVerdict::kInvalid},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    Request r = make_request("POST", "/v1/chat/completions", cases[i].headers);
    EXPECT_EQ(static_cast<int>(check_api_key(r, key)), static_cast<int>(cases[i].verdict)) << "case " << i;
  }
  // Auth off: any request passes.
  EXPECT_EQ(check_api_key(make_request("POST", "/v1/models", {}), ""), AuthVerdict::kOk);
}

TEST(HttpSecurity, ConstantTimeEquals) {
  EXPECT_TRUE(constant_time_equals("abc", "abc"));
  EXPECT_FALSE(constant_time_equals("abd", "abc"));
  EXPECT_FALSE(constant_time_equals("ab", "abc"));
  EXPECT_FALSE(constant_time_equals("abcabc", "abc"));  // wrapping indexes must not make this equal
  EXPECT_FALSE(constant_time_equals("", "abc"));
  EXPECT_FALSE(constant_time_equals("", ""));  // no key is never a match
  EXPECT_FALSE(constant_time_equals(std::string("abc\0", 4), "abc"));
}

TEST(HttpSecurity, AuthRefusal) {
  SimpleResponse missing = auth_refusal(AuthVerdict::kMissing);
  EXPECT_EQ(missing.status, 401);
  EXPECT_EQ(find_header(missing.headers, "WWW-Authenticate").value_or(""), "Bearer");
  auto j = nlohmann::json::parse(missing.body);
  EXPECT_EQ(j["error"]["code"], "authentication_error");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_NE(auth_refusal(AuthVerdict::kInvalid).body.find("invalid API key"), std::string::npos);
}

// --- SSE ---------------------------------------------------------------------------------------

TEST(HttpSse, Framing) {
  EXPECT_EQ(sse_event(R"({"a":1})"), "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse_event("x\ny\r\nz"), "data: x\ndata: y\ndata: z\n\n");  // no forged events
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
  EXPECT_EQ(sse_comment(), ": keep-alive\n\n");
  EXPECT_EQ(sse_comment("a\nb"), ": a b\n\n");
  nlohmann::json j = {{"text", "line1\nline2 \"q\""}};
  EXPECT_EQ(sse_json_event(j), "data: {\"text\":\"line1\\nline2 \\\"q\\\"\"}\n\n");
  EXPECT_EQ(sse_json_event(nlohmann::json("bad \xff")), "data: \"bad \xef\xbf\xbd\"\n\n");
  EXPECT_EQ(find_header(sse_headers(), "content-type").value_or(""), "text/event-stream");
}

}  // namespace
}  // namespace splash::http
