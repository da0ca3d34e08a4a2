// The launchers' pure parts: their own flags, /v1/models, each agent's argv and environment, and the
// loopback client against a socket that answers like a server (or does not).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "launch/agent_config.h"
#include "launch/loopback_http.h"

namespace splash::launch {
namespace {

std::optional<std::string> env_of(const AgentLaunch& l, const std::string& name, bool* present = nullptr) {
  for (const auto& [k, v] : l.env)
    if (k == name) {
      if (present) *present = true;
      return v;
    }
  if (present) *present = false;
  return std::nullopt;
}

bool has_arg(const AgentLaunch& l, const std::string& a) {
  return std::find(l.argv.begin(), l.argv.end(), a) != l.argv.end();
}

TEST(AgentArgs, OwnFlagsBeforeDashDashRestToAgent) {
  auto a = parse_agent_args({"exec", "--port", "9001", "--model=m.gguf", "--json", "--", "--port", "7", "--help"}, nullptr);
  ASSERT_TRUE(a.ok()) << a.error_message();
  EXPECT_EQ(a->port, 9001);
  EXPECT_EQ(a->model, "m.gguf");
  EXPECT_EQ(a->agent_args, (std::vector<std::string>{"exec", "--json", "--port", "7", "--help"}));
}

TEST(AgentArgs, PortDefaultsAndErrors) {
  EXPECT_EQ(parse_agent_args({}, nullptr)->port, 8000);
  EXPECT_EQ(parse_agent_args({}, "8123")->port, 8123);
  EXPECT_EQ(parse_agent_args({"--port=9"}, "8123")->port, 9);  // the flag wins
  auto bad = parse_agent_args({"--port", "70000"}, nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error_message().find("--port"), std::string::npos);
  auto bad_env = parse_agent_args({}, "x");
  ASSERT_FALSE(bad_env.ok());
  EXPECT_NE(bad_env.error_message().find("SPLASH_PORT"), std::string::npos);
  EXPECT_FALSE(parse_agent_args({"--model"}, nullptr).ok());
}

TEST(ModelsReply, NeedsSplashOwnerAndIntegerContext) {
  auto ok = parse_models_reply(R"({"object":"list","data":[{"id":"other","owned_by":"x","context_length":5},
      {"id":"qwen","owned_by":"splash","context_length":40960}]})");
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(ok->id, "qwen");
  EXPECT_EQ(ok->context_length, 40960);
  EXPECT_FALSE(parse_models_reply(R"({"data":[{"id":"a","owned_by":"openai","context_length":5}]})").ok());
  auto no_ctx = parse_models_reply(R"({"data":[{"id":"a","owned_by":"splash","context_length":"5"}]})");
  ASSERT_FALSE(no_ctx.ok());
  EXPECT_NE(no_ctx.error_message().find("context_length"), std::string::npos);
  EXPECT_FALSE(parse_models_reply(R"({"data":[{"id":"a","owned_by":"splash"}]})").ok());
  EXPECT_FALSE(parse_models_reply("not json").ok());
}

TEST(AgentLaunch, OutputLimit) {
  EXPECT_EQ(agent_output_limit(262144), 32768);
  EXPECT_EQ(agent_output_limit(40960), 10240);
  EXPECT_EQ(agent_output_limit(2), 1);
}

TEST(AgentLaunch, ClaudeEnvironment) {
  ServedModel m{"qwen3", 40960};
  AgentLaunch l = agent_launch(Agent::kClaude, m, {8123, "k1"}, {"-p", "hello"});
  EXPECT_EQ(l.argv, (std::vector<std::string>{"claude", "--disallowedTools=WebSearch", "-p", "hello"}));
  EXPECT_EQ(env_of(l, "ANTHROPIC_BASE_URL"), "http://127.0.0.1:8123");
  EXPECT_EQ(env_of(l, "ANTHROPIC_AUTH_TOKEN"), "k1");
  bool present = false;
  EXPECT_EQ(env_of(l, "ANTHROPIC_API_KEY", &present), std::nullopt);
  EXPECT_TRUE(present) << "an inherited ANTHROPIC_API_KEY must be removed";
  for (const char* v : {"ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_OPUS_MODEL", "ANTHROPIC_DEFAULT_SONNET_MODEL",
                        "ANTHROPIC_DEFAULT_HAIKU_MODEL", "ANTHROPIC_SMALL_FAST_MODEL", "CLAUDE_CODE_SUBAGENT_MODEL"})
    EXPECT_EQ(env_of(l, v), "qwen3") << v;
  EXPECT_EQ(env_of(l, "CLAUDE_CODE_MAX_CONTEXT_TOKENS"), "40960");
  bool compact = true;
  env_of(l, "CLAUDE_CODE_AUTO_COMPACT_WINDOW", &compact);
  EXPECT_FALSE(compact) << "under 100K Claude Code would raise it to 100K";
  EXPECT_EQ(env_of(agent_launch(Agent::kClaude, {"q", 131072}, {8123, ""}, {}), "CLAUDE_CODE_AUTO_COMPACT_WINDOW"), "131072");
  EXPECT_EQ(env_of(l, "CLAUDE_CODE_MAX_OUTPUT_TOKENS"), "10240");
  for (const char* v : {"DISABLE_TELEMETRY", "DISABLE_AUTOUPDATER", "DISABLE_ERROR_REPORTING",
                        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"})
    EXPECT_EQ(env_of(l, v), "1") << v;
  // A keyless server still gets a token, so Claude Code does not ask for a login.
  AgentLaunch keyless = agent_launch(Agent::kClaude, m, {8000, ""}, {});
  EXPECT_EQ(env_of(keyless, "ANTHROPIC_AUTH_TOKEN"), "splash");
}

TEST(AgentLaunch, CodexOverrides) {
  ServedModel m{"my \"model\"", 10000};
  AgentLaunch l = agent_launch(Agent::kCodex, m, {9000, "sec"}, {"exec", "hi"});
  ASSERT_GE(l.argv.size(), 3u);
  EXPECT_EQ(l.argv.front(), "codex");
  EXPECT_EQ((std::vector<std::string>(l.argv.end() - 2, l.argv.end())), (std::vector<std::string>{"exec", "hi"}));
  for (const char* kv : {"model_provider=\"splash\"", "model_providers.splash.base_url=\"http://127.0.0.1:9000/v1\"",
                         "model_providers.splash.wire_api=\"responses\"", "model_providers.splash.env_key=\"SPLASH_API_KEY\"",
                         "model=\"my \\\"model\\\"\"", "model_context_window=10000", "model_auto_compact_token_limit=9000",
                         "web_search=\"disabled\"", "check_for_update_on_startup=false", "analytics.enabled=false"})
    EXPECT_TRUE(has_arg(l, kv)) << kv;
  // Every override is a `-c KEY=VALUE` pair.
  for (size_t i = 1; i + 2 < l.argv.size(); i += 2) EXPECT_EQ(l.argv[i], "-c") << i;
  EXPECT_EQ(env_of(l, "SPLASH_API_KEY"), "sec");
  AgentLaunch keyless = agent_launch(Agent::kCodex, m, {9000, ""}, {});
  for (const std::string& a : keyless.argv) EXPECT_EQ(a.find("env_key"), std::string::npos) << a;
}

TEST(AgentLaunch, OpencodeInlineProvider) {
  ServedModel m{"qwen", 200000};
  AgentLaunch l = agent_launch(Agent::kOpencode, m, {8001, "k"}, {"run", "x"});
  EXPECT_EQ(l.argv, (std::vector<std::string>{"opencode", "run", "x"}));
  auto text = env_of(l, "OPENCODE_CONFIG_CONTENT");
  ASSERT_TRUE(text);
  auto c = nlohmann::json::parse(*text);
  const auto& p = c["provider"]["splash"];
  EXPECT_EQ(p["npm"], "@ai-sdk/openai-compatible");
  EXPECT_EQ(p["options"]["baseURL"], "http://127.0.0.1:8001/v1");
  EXPECT_EQ(p["options"]["apiKey"], "{env:SPLASH_API_KEY}");
  EXPECT_EQ(p["models"]["qwen"]["limit"]["context"], 200000);
  EXPECT_EQ(p["models"]["qwen"]["limit"]["output"], 32768);
  EXPECT_EQ(c["model"], "splash/qwen");
  EXPECT_EQ(c["small_model"], "splash/qwen");
  for (const char* agent : {"build", "plan", "general"}) EXPECT_EQ(c["agent"][agent]["model"], "splash/qwen") << agent;
  EXPECT_EQ(env_of(l, "SPLASH_API_KEY"), "k");
}

TEST(FindProgram, SearchesPathForExecutableFiles) {
  auto dir = std::filesystem::temp_directory_path() / ("splash_find_program_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "a" / "tool");  // a directory of that name does not count
  std::filesystem::create_directories(dir / "b");
  std::ofstream(dir / "b" / "tool") << "#!/bin/sh\n";
  std::filesystem::permissions(dir / "b" / "tool", std::filesystem::perms::owner_all);
  std::ofstream(dir / "b" / "plain") << "x";
  const std::string path = (dir / "a").string() + ":" + (dir / "b").string();
  EXPECT_EQ(find_program("tool", path), (dir / "b" / "tool").string());
  EXPECT_EQ(find_program("plain", path), "");
  EXPECT_EQ(find_program("missing", path), "");
  std::filesystem::remove_all(dir);
}

// A one-shot listener on a free loopback port that answers `reply` (or nothing) to one request.
struct OneShot {
  int fd = -1;
  uint16_t port = 0;
  std::string request;
  std::thread t;
  explicit OneShot(std::string reply, bool answer = true) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd, 4);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    if (!answer) return;  // connections wait in the backlog, like a server still loading
    t = std::thread([this, reply] {
      int c = ::accept(fd, nullptr, nullptr);
      char buf[4096];
      ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n > 0) request.assign(buf, static_cast<size_t>(n));
      ::send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
      ::close(c);
    });
  }
  ~OneShot() {
    if (t.joinable()) t.join();
    ::close(fd);
  }
};

TEST(LoopbackGet, ReadsStatusAndBodyAndSendsTheKey) {
  OneShot s("HTTP/1.1 401 Unauthorized\r\nContent-Length: 5\r\n\r\nnope!");
  GetResult r = loopback_get(s.port, "/v1/models", "key9", std::chrono::milliseconds(3000));
  s.t.join();
  ASSERT_TRUE(r.reply) << r.error;
  EXPECT_EQ(r.reply->status, 401);
  EXPECT_EQ(r.reply->body, "nope!");
  EXPECT_NE(s.request.find("GET /v1/models HTTP/1.1\r\n"), std::string::npos);
  EXPECT_NE(s.request.find("Authorization: Bearer key9\r\n"), std::string::npos);
}

TEST(LoopbackGet, RefusedAndTimeout) {
  uint16_t closed_port;
  {
    OneShot s("", /*answer=*/false);
    closed_port = s.port;
    GetResult r = loopback_get(s.port, "/ready", "", std::chrono::milliseconds(300));
    EXPECT_FALSE(r.reply);
    EXPECT_EQ(r.failure, GetFailure::kTimeout);
  }
  GetResult r = loopback_get(closed_port, "/ready", "", std::chrono::milliseconds(300));
  EXPECT_FALSE(r.reply);
  EXPECT_EQ(r.failure, GetFailure::kRefused);
}

}  // namespace
}  // namespace splash::launch
