// The route layer without sockets or an engine: access checks before the body, the engine-free
// routes, /status and /metrics fields, and the context checks that refuse a request before it would
// reach the engine. Expected values are written out here, not taken from the code under test.
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "server/app/app.h"

namespace splash::app {
namespace {

class FakeWriter : public http::ResponseWriter {
 public:
  void respond(int s, std::vector<http::Header> h, std::string b) override {
    status = s;
    headers = std::move(h);
    body = std::move(b);
    ++responses;
  }
  bool start_stream(int s, std::vector<http::Header> h) override {
    status = s;
    headers = std::move(h);
    return true;
  }
  bool write(std::string_view d) override {
    body += d;
    return true;
  }
  void end() override { ended = true; }
  bool client_gone() const override { return false; }
  void on_disconnect(std::function<void()>) override {}

  std::string header(std::string_view name) const { return std::string(http::find_header(headers, name).value_or("")); }
  nlohmann::json json() const { return nlohmann::json::parse(body); }

  int status = 0, responses = 0;
  std::vector<http::Header> headers;
  std::string body;
  bool ended = false;
};

// A tiny SentencePiece vocabulary: "ab ab" -> "▁ab▁ab" -> [▁a b ▁a b] -> [▁ab ▁ab] = [7, 7].
Tokenizer tiny_tokenizer() {
  TokenizerSpec s;
  s.kind = TokenizerKind::kSentencePiece;
  s.source = "test";
  const std::string sp = "\xE2\x96\x81";
  s.tokens = {"<unk>", "<s>", "</s>", sp, "a", "b", sp + "a", sp + "ab"};
  s.scores = {0, 0, 0, -5, -5, -5, -1, -0.5f};
  s.types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl, TokenType::kNormal,
             TokenType::kNormal,  TokenType::kNormal,  TokenType::kNormal,  TokenType::kNormal};
  s.add_bos = true;
  s.unk_id = 0;
  s.bos_id = 1;
  s.eos_id = 2;
  s.add_space_prefix = true;
  auto t = Tokenizer::build(std::move(s));
  SPLASH_CHECK_MSG(t.ok(), t.error_message());
  return std::move(*t);
}

class AppRoutes : public ::testing::Test {
 protected:
  AppRoutes() : tokenizer_(tiny_tokenizer()) {
    plan_.valid = true;
    plan_.maximum_context_tokens = 8;
    plan_.kv_page_bytes = 36864;
    plan_.attention_layers = 6;
    plan_.kv_heads = 6;
    plan_.head_dimension = 48;
    plan_.hard_budget_bytes = 123456789;
  }

  std::unique_ptr<App> make(const std::string& api_key = "", bool webui = true, bool announce = false) {
    AppConfig c;
    c.options.webui = webui;
    c.options.announce_served_name = announce;
    c.model_id = "stories15M.bin";
    c.aliases = {"org/alias"};
    c.options.api_key = api_key;
    c.options.port = 8123;
    AppDeps d;
    d.tokenizer = &tokenizer_;
    d.plan = &plan_;
    return std::make_unique<App>(c, d);
  }

  static http::Request request(std::string method, std::string path, std::string body = "") {
    http::Request r;
    r.method = std::move(method);
    r.path = path;
    r.target = path;
    r.body = std::move(body);
    r.headers = {{"Host", "127.0.0.1:8123"}};
    r.local_addr = "127.0.0.1";
    return r;
  }

  std::shared_ptr<FakeWriter> call(App& app, const http::Request& r) {
    auto w = std::make_shared<FakeWriter>();
    if (auto refusal = app.pre_body_check(r)) {
      w->respond(refusal->status, refusal->headers, refusal->body);
      return w;
    }
    app.handle(r, w);
    return w;
  }

  Tokenizer tokenizer_;
  MemoryPlan plan_;
};

TEST_F(AppRoutes, HealthAndReady) {
  auto app = make();
  auto w = call(*app, request("GET", "/health"));
  EXPECT_EQ(w->status, 200);
  EXPECT_EQ(w->json(), nlohmann::json({{"status", "ok"}}));
  w = call(*app, request("GET", "/ready"));
  EXPECT_EQ(w->status, 503);
  EXPECT_EQ(w->json()["status"], "unavailable");
  app->set_ready(true);
  w = call(*app, request("GET", "/ready"));
  EXPECT_EQ(w->status, 200);
  EXPECT_EQ(w->json()["status"], "ready");
}

TEST_F(AppRoutes, Models) {
  auto app = make();
  auto w = call(*app, request("GET", "/v1/models"));
  ASSERT_EQ(w->status, 200);
  nlohmann::json j = w->json();
  ASSERT_EQ(j["data"].size(), 2u);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["data"][0]["id"], "stories15M.bin");
  EXPECT_EQ(j["data"][0]["owned_by"], "splash");
  EXPECT_EQ(j["data"][0]["max_model_len"], 8);
  EXPECT_EQ(j["data"][0]["context_length"], 8);
  EXPECT_FALSE(j["data"][0].contains("root"));
  // No chat template here: the chat page switches to continuation mode on this field (issue 41).
  EXPECT_EQ(j["data"][0]["chat_template"], false);
  EXPECT_EQ(j["data"][1]["id"], "org/alias");
  EXPECT_EQ(j["data"][1]["root"], "stories15M.bin");
  EXPECT_EQ(j["models"], j["data"]);

  w = call(*app, request("GET", "/v1/models/org%2Falias"));
  EXPECT_EQ(w->status, 200);
  EXPECT_EQ(w->json()["id"], "org/alias");
  w = call(*app, request("GET", "/v1/models/nope"));
  EXPECT_EQ(w->status, 404);
  EXPECT_EQ(w->json()["error"]["code"], "model_not_found");
  EXPECT_EQ(w->json()["error"]["type"], "invalid_request_error");
  w = call(*app, request("GET", "/v1/models/bad%zz"));
  EXPECT_EQ(w->status, 400);
}

TEST_F(AppRoutes, Tokenize) {
  auto app = make();
  auto w = call(*app, request("POST", "/tokenize", R"({"content":"ab ab"})"));
  ASSERT_EQ(w->status, 200) << w->body;
  EXPECT_EQ(w->json()["tokens"], nlohmann::json({7, 7}));
  w = call(*app, request("POST", "/tokenize", R"({"content":"ab ab","add_special":true})"));
  EXPECT_EQ(w->json()["tokens"], nlohmann::json({1, 7, 7}));
  w = call(*app, request("POST", "/tokenize", R"({"content":""})"));
  EXPECT_EQ(w->body, R"({"tokens":[]})");
  for (const char* bad : {"{", "[]", R"({"content":5})", R"({"content":"x","add_special":"yes"})"}) {
    w = call(*app, request("POST", "/tokenize", bad));
    EXPECT_EQ(w->status, 400) << bad;
    EXPECT_TRUE(w->json()["error"].contains("message")) << bad;
  }
}

TEST_F(AppRoutes, UnknownPathAndWrongMethod) {
  auto app = make();
  auto w = call(*app, request("GET", "/v2/nothing"));
  EXPECT_EQ(w->status, 404);
  EXPECT_EQ(w->json()["error"]["type"], "invalid_request_error");
  w = call(*app, request("GET", "/v1/chat/completions"));
  EXPECT_EQ(w->status, 405);
  EXPECT_EQ(w->header("Allow"), "POST");
  w = call(*app, request("DELETE", "/health"));
  EXPECT_EQ(w->status, 405);
}

TEST_F(AppRoutes, HostOriginAndKeyChecks) {
  auto app = make("secret");
  http::Request r = request("GET", "/v1/models");
  r.headers = {{"Host", "evil.example:8123"}};
  auto w = call(*app, r);
  EXPECT_EQ(w->status, 403);
  EXPECT_EQ(w->json()["error"]["code"], "forbidden");
  EXPECT_NE(w->json()["error"]["message"].get<std::string>().find("--allowed-host"), std::string::npos);

  w = call(*app, request("GET", "/v1/models"));
  EXPECT_EQ(w->status, 401);
  EXPECT_EQ(w->header("WWW-Authenticate").rfind("Bearer", 0), 0u);
  EXPECT_EQ(w->json()["error"]["code"], "authentication_error");

  r = request("GET", "/v1/models");
  r.headers.push_back({"Authorization", "Bearer wrong"});
  EXPECT_EQ(call(*app, r)->status, 401);
  r = request("GET", "/v1/models");
  r.headers.push_back({"Authorization", "bearer secret"});
  EXPECT_EQ(call(*app, r)->status, 200);
  r = request("GET", "/v1/models");
  r.headers.push_back({"x-api-key", "secret"});
  EXPECT_EQ(call(*app, r)->status, 200);
  EXPECT_EQ(call(*app, request("GET", "/health"))->status, 200);  // public

  r = request("GET", "/health");
  r.headers.push_back({"Origin", "https://attacker.example"});
  w = call(*app, r);
  EXPECT_EQ(w->status, 403);
}

TEST_F(AppRoutes, ContextChecksBeforeTheEngine) {
  auto app = make();
  // 8-token context: a prompt of 8 ids cannot leave room for one generated token.
  auto w = call(*app, request("POST", "/v1/completions", R"({"prompt":[7,7,7,7,7,7,7,7],"max_tokens":1})"));
  EXPECT_EQ(w->status, 400) << w->body;
  EXPECT_EQ(w->json()["error"]["code"], "context_length_exceeded");
  EXPECT_NE(w->json()["error"]["message"].get<std::string>().find("8 tokens"), std::string::npos) << w->body;
  // 2 + 7 > 8.
  w = call(*app, request("POST", "/v1/completions", R"({"prompt":[7,7],"max_tokens":7})"));
  EXPECT_EQ(w->status, 400);
  EXPECT_EQ(w->json()["error"]["code"], "context_length_exceeded");
  EXPECT_NE(w->json()["error"]["message"].get<std::string>().find("at most 6"), std::string::npos) << w->body;
  // Unknown model.
  w = call(*app, request("POST", "/v1/completions", R"({"model":"gpt-4","prompt":"ab"})"));
  EXPECT_EQ(w->status, 404);
  EXPECT_EQ(w->json()["error"]["code"], "model_not_found");
  // Malformed JSON.
  w = call(*app, request("POST", "/v1/completions", R"({"prompt":)"));
  EXPECT_EQ(w->status, 400);
  // No chat template on this model.
  w = call(*app, request("POST", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"hi"}]})"));
  EXPECT_EQ(w->status, 400);
  EXPECT_NE(w->body.find("chat template"), std::string::npos);
}

// A prompt far past the context is refused by a tokenizer that stops at the context.
TEST_F(AppRoutes, LongPromptIsRefusedAtTheContext) {
  auto app = make();
  const std::string text(1 << 20, 'a');
  auto w = call(*app, request("POST", "/v1/completions", nlohmann::json({{"prompt", text}}).dump()));
  EXPECT_EQ(w->status, 400) << w->body;
  EXPECT_EQ(w->json()["error"]["code"], "context_length_exceeded");
  EXPECT_NE(w->json()["error"]["message"].get<std::string>().find("the prompt is at least 8 tokens but this "
                                                                  "server's context is 8 tokens"),
            std::string::npos)
      << w->body;
}

// --max-request-size auto follows the context and is checked before the body (Content-Length).
TEST_F(AppRoutes, RequestSizeLimitFromTheContext) {
  EXPECT_EQ(auto_max_request_bytes(8), kAutoRequestBytesMin);
  EXPECT_EQ(auto_max_request_bytes(131072), uint64_t{8} << 20);
  EXPECT_EQ(auto_max_request_bytes(262144), uint64_t{16} << 20);
  EXPECT_EQ(auto_max_request_bytes(int64_t{1} << 40), kAutoRequestBytesMax);
  auto app = make();
  EXPECT_EQ(app->max_request_bytes(), kAutoRequestBytesMin);
  http::Request r = request("POST", "/v1/completions");
  r.headers.push_back({"Content-Length", std::to_string(100 << 20)});
  auto w = call(*app, r);
  EXPECT_EQ(w->status, 413);
  EXPECT_EQ(w->json()["error"]["code"], "request_too_large");
  EXPECT_NE(w->body.find("--max-request-size auto: 64 bytes per token of the 8-token context"), std::string::npos)
      << w->body;
  r.headers.back().value = std::to_string(kAutoRequestBytesMin);
  http::Request head_only = r;
  EXPECT_FALSE(app->pre_body_check(head_only).has_value());  // at the limit: read
  auto s = call(*app, request("GET", "/status"))->json();
  EXPECT_EQ(s["http"]["max_request_bytes"], kAutoRequestBytesMin);
  EXPECT_EQ(s["http"]["max_request_size"], "auto");

  AppConfig c;
  c.options.max_request_bytes = 1000;
  AppDeps d;
  d.tokenizer = &tokenizer_;
  d.plan = &plan_;
  App flag(c, d);
  r.headers.back().value = "1001";
  w = call(flag, r);
  EXPECT_EQ(w->status, 413);
  EXPECT_NE(w->body.find("exceeds the limit of 1000 bytes (--max-request-size)"), std::string::npos) << w->body;
  EXPECT_EQ(call(flag, request("GET", "/status"))->json()["http"]["max_request_size"], "flag");
}

// One rule: the page under every name it is served from, its assets, /health and /ready are public.
TEST_F(AppRoutes, PublicRoutesAreThePageAndHealth) {
  auto app = make("secret");
  for (const char* p : {"/", "/index.html", "/assets/index.html", "/assets/app.js", "/favicon.ico", "/health"})
    EXPECT_EQ(call(*app, request("GET", p))->status, 200) << p;
  EXPECT_EQ(call(*app, request("GET", "/favicon.ico"))->header("Content-Type"), "image/svg+xml");
  for (const char* p : {"/v1/models", "/status", "/metrics", "/nope", "/index.htm"})
    EXPECT_EQ(call(*app, request("GET", p))->status, 401) << p;
}

// A client can make the server refuse it as often as it likes: the log stays small.
TEST_F(AppRoutes, OriginRefusalsLogLittle) {
  auto app = make();
  http::Request r = request("GET", "/health");
  r.headers.push_back({"Origin", "http://" + std::string(60000, 'x') + ".example"});
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 200; ++i) EXPECT_EQ(call(*app, r)->status, 403);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_LT(log.size(), 1000u) << "200 refusals of a 60 KB Origin wrote " << log.size() << " bytes";
  EXPECT_NE(log.find("Refused · Origin http://xxx"), std::string::npos) << log;
  EXPECT_NE(log.find("...(+"), std::string::npos) << log;
}

TEST_F(AppRoutes, ChatPageUnlessNoWebui) {
  std::ifstream in(std::string(SPLASH_SOURCE_DIR) + "/web/index.html", std::ios::binary);
  ASSERT_TRUE(in) << "web/index.html";
  const std::string index((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto app = make("secret");
  auto w = call(*app, request("GET", "/"));  // public even with a key
  ASSERT_EQ(w->status, 200);
  EXPECT_EQ(w->body, index);
  EXPECT_EQ(w->header("Content-Type").rfind("text/html", 0), 0u);
  const std::string etag = w->header("ETag");
  ASSERT_FALSE(etag.empty());
  http::Request again = request("GET", "/");
  again.headers.push_back({"If-None-Match", etag});
  w = call(*app, again);
  EXPECT_EQ(w->status, 304);
  EXPECT_TRUE(w->body.empty());
  EXPECT_EQ(call(*app, request("GET", "/assets/app.js"))->status, 200);
  EXPECT_EQ(call(*app, request("GET", "/assets/nope.js"))->status, 404);

  auto bare = make("", /*webui=*/false);
  w = call(*bare, request("GET", "/"));
  EXPECT_EQ(w->status, 404);
  EXPECT_EQ(w->json()["error"]["type"], "invalid_request_error");
}

// Spec 2.3: responses report the real id, the first alias only under --announce-served-name; both
// names are accepted and /v1/models lists the real one first, the alias with `root`.
TEST_F(AppRoutes, ReportedModelIdFollowsAnnounceServedName) {
  for (bool announce : {false, true}) {
    auto app = make("", true, announce);
    const std::string want = announce ? "org/alias" : "stories15M.bin";
    EXPECT_EQ(app->config().reported_id(), want);
    auto w = call(*app, request("GET", "/status"));
    EXPECT_EQ(w->json()["instance"]["model"], want) << announce;
    w = call(*app, request("GET", "/v1/models"));
    EXPECT_EQ(w->json()["data"][0]["id"], "stories15M.bin");
    EXPECT_EQ(w->json()["data"][1]["root"], "stories15M.bin");
    w = call(*app, request("GET", "/v1/models/nope"));
    EXPECT_NE(w->json()["error"]["message"].get<std::string>().find("(serving '" + want + "')"), std::string::npos)
        << w->body;
    for (const char* id : {"stories15M.bin", "org%2Falias"})
      EXPECT_EQ(call(*app, request("GET", std::string("/v1/models/") + id))->status, 200) << id;
  }
}

TEST_F(AppRoutes, StatusAndMetrics) {
  auto app = make();
  app->set_ready(true);
  call(*app, request("GET", "/health"));
  auto w = call(*app, request("GET", "/status"));
  ASSERT_EQ(w->status, 200);
  nlohmann::json s = w->json();
  EXPECT_EQ(s["schema_version"], 6);
  EXPECT_EQ(s["ready"], true);
  EXPECT_EQ(s["maximum_context_tokens"], 8);
  EXPECT_EQ(s["instance"]["model"], "stories15M.bin");
  EXPECT_EQ(s["instance"]["port"], 8123);
  EXPECT_EQ(s["http"]["requests"], 2);  // /health and this one
  EXPECT_EQ(s["memory_plan"]["valid"], true);
  EXPECT_EQ(s["memory_plan"]["model"]["kv_page_bytes"], 36864);
  EXPECT_EQ(s["memory_plan"]["model"]["kv_page_tokens"], 32);
  EXPECT_EQ(s["memory_plan"]["model"]["head_dimension"], 48);
  EXPECT_EQ(s["memory_plan"]["budget"]["hard_budget_bytes"], 123456789);
  EXPECT_TRUE(s["memory_plan"]["budget"].contains("deficit_bytes"));
  EXPECT_EQ(s["ane_ffn"]["state"], "unavailable");
  EXPECT_EQ(s["scheduler"]["decode_share"], 0.5);
  EXPECT_EQ(s["vision"]["max_image_pixels"], 4194304);
  EXPECT_EQ(s["sleep_inhibitor"]["enabled"], true);
  EXPECT_EQ(s["sleep_inhibitor"]["held"], false);
  for (const char* k : {"kv", "scheduler", "requests", "metrics"}) EXPECT_TRUE(s.contains(k)) << k;
  EXPECT_TRUE(s["metrics"]["ttft_ms"].contains("p95"));
  EXPECT_TRUE(s["scheduler"]["decode_batches_by_width"].contains("b4"));

  w = call(*app, request("GET", "/metrics"));
  ASSERT_EQ(w->status, 200);
  EXPECT_EQ(w->header("Content-Type").rfind("text/plain; version=0.0.4", 0), 0u);
  EXPECT_NE(w->body.find("\nsplash_ready 1\n"), std::string::npos) << w->body;
  EXPECT_NE(w->body.find("# TYPE splash_requests_total counter\n"), std::string::npos);
  EXPECT_NE(w->body.find("splash_ttft_ms{quantile=\"0.95\"} 0\n"), std::string::npos);
  EXPECT_NE(w->body.find("splash_maximum_context_tokens 8\n"), std::string::npos);
}

}  // namespace
}  // namespace splash::app
