#include "launch/agent_config.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace splash::launch {

namespace {

// A TOML basic string: codex parses each -c value as TOML, and an id with a quote or a backslash
// must not end the string early.
std::string toml_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

constexpr int64_t kClaudeMinCompactWindow = 100000;

AgentLaunch claude_launch(const ServedModel& m, const ServerAddress& server) {
  AgentLaunch l;
  // --disallowedTools takes several values; the `=` form ends the list so a prompt after it stays a
  // prompt. There is no web search behind a local server.
  l.argv = {"claude", "--disallowedTools=WebSearch"};
  const std::string ctx = std::to_string(m.context_length);
  l.env = {
      {"ANTHROPIC_BASE_URL", loopback_url(server.port)},
      // Bearer token: Claude Code uses it without the interactive "use this API key?" question that
      // ANTHROPIC_API_KEY raises, and a keyless server ignores it (a placeholder keeps Claude Code
      // from asking for a login).
      {"ANTHROPIC_AUTH_TOKEN", server.api_key.empty() ? std::string("splash") : server.api_key},
      {"ANTHROPIC_API_KEY", std::nullopt},
      {"ANTHROPIC_MODEL", m.id},
      {"ANTHROPIC_DEFAULT_OPUS_MODEL", m.id},
      {"ANTHROPIC_DEFAULT_SONNET_MODEL", m.id},
      {"ANTHROPIC_DEFAULT_HAIKU_MODEL", m.id},
      {"ANTHROPIC_SMALL_FAST_MODEL", m.id},  // the older name of the background model
      {"CLAUDE_CODE_SUBAGENT_MODEL", m.id},
      // The window of a model Claude Code does not know; auto-compaction is clamped to it.
      {"CLAUDE_CODE_MAX_CONTEXT_TOKENS", ctx},
      {"CLAUDE_CODE_MAX_OUTPUT_TOKENS", std::to_string(agent_output_limit(m.context_length))},
      {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"},
      {"DISABLE_TELEMETRY", "1"},
      {"DISABLE_ERROR_REPORTING", "1"},
      {"DISABLE_AUTOUPDATER", "1"},
      {"DISABLE_UPDATES", "1"},
  };
  // Claude Code reads a compaction window under 100K as 100K (and warns), which would let a
  // smaller server context overflow before compacting; the clamp above covers that case.
  if (m.context_length >= kClaudeMinCompactWindow) l.env.emplace_back("CLAUDE_CODE_AUTO_COMPACT_WINDOW", ctx);
  return l;
}

AgentLaunch codex_launch(const ServedModel& m, const ServerAddress& server) {
  AgentLaunch l;
  l.argv = {"codex"};
  auto set = [&](const std::string& key, const std::string& toml_value) {
    l.argv.push_back("-c");
    l.argv.push_back(key + "=" + toml_value);
  };
  set("model_provider", toml_string("splash"));
  set("model_providers.splash.name", toml_string("Splash"));
  set("model_providers.splash.base_url", toml_string(loopback_url(server.port) + "/v1"));
  set("model_providers.splash.wire_api", toml_string("responses"));
  // Codex refuses to start when env_key names an unset variable, so only a keyed server names it.
  if (!server.api_key.empty()) set("model_providers.splash.env_key", toml_string("SPLASH_API_KEY"));
  set("model", toml_string(m.id));
  set("model_context_window", std::to_string(m.context_length));
  set("model_auto_compact_token_limit", std::to_string(m.context_length * 9 / 10));
  set("web_search", toml_string("disabled"));
  set("check_for_update_on_startup", "false");
  set("analytics.enabled", "false");
  if (!server.api_key.empty()) l.env.emplace_back("SPLASH_API_KEY", server.api_key);
  return l;
}

AgentLaunch opencode_launch(const ServedModel& m, const ServerAddress& server) {
  nlohmann::json options = {{"baseURL", loopback_url(server.port) + "/v1"}};
  options["apiKey"] = server.api_key.empty() ? "splash" : "{env:SPLASH_API_KEY}";
  nlohmann::json model = {
      {"name", m.id},
      {"limit", {{"context", m.context_length}, {"output", agent_output_limit(m.context_length)}}},
  };
  const std::string ref = "splash/" + m.id;
  nlohmann::json config = {
      {"$schema", "https://opencode.ai/config.json"},
      {"provider",
       {{"splash",
         {{"npm", "@ai-sdk/openai-compatible"}, {"name", "Splash"}, {"options", options}, {"models", {{m.id, model}}}}}}},
      {"model", ref},
      {"small_model", ref},
      // Every built-in agent on the local model, not a hosted default.
      {"agent", {{"build", {{"model", ref}}}, {"plan", {{"model", ref}}}, {"general", {{"model", ref}}}}},
      {"autoupdate", false},
      {"share", "disabled"},
  };
  AgentLaunch l;
  l.argv = {"opencode"};
  l.env.emplace_back("OPENCODE_CONFIG_CONTENT", config.dump());
  if (!server.api_key.empty()) l.env.emplace_back("SPLASH_API_KEY", server.api_key);
  return l;
}

}  // namespace

const char* agent_program(Agent agent) {
  switch (agent) {
    case Agent::kClaude: return "claude";
    case Agent::kCodex: return "codex";
    case Agent::kOpencode: return "opencode";
  }
  return "";
}

const char* agent_title(Agent agent) {
  switch (agent) {
    case Agent::kClaude: return "Claude Code";
    case Agent::kCodex: return "Codex CLI";
    case Agent::kOpencode: return "opencode";
  }
  return "";
}

const char* agent_install_command(Agent agent) {
  switch (agent) {
    case Agent::kClaude: return "npm install -g @anthropic-ai/claude-code";
    case Agent::kCodex: return "npm install -g @openai/codex";
    case Agent::kOpencode: return "npm install -g opencode-ai";
  }
  return "";
}

std::string loopback_url(uint16_t port) { return str_cat("http://127.0.0.1:", port); }

int64_t agent_output_limit(int64_t context_length) {
  return std::max<int64_t>(1, std::min<int64_t>(32768, context_length / 4));
}

namespace {
Result<uint16_t> parse_port_text(const std::string& text, const char* what) {
  char* end = nullptr;
  errno = 0;
  const long v = text.empty() ? 0 : std::strtol(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0' || v < 1 || v > 65535)
    return make_error(what, ": '", text, "' is not a port number (1-65535)");
  return static_cast<uint16_t>(v);
}
}  // namespace

Result<AgentArgs> parse_agent_args(const std::vector<std::string>& args, const char* splash_port_env) {
  AgentArgs out;
  if (splash_port_env && *splash_port_env) {
    auto p = parse_port_text(splash_port_env, "SPLASH_PORT");
    if (!p.ok()) return p.error();
    out.port = *p;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      out.agent_args.insert(out.agent_args.end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    const bool is_port = a == "--port" || a.rfind("--port=", 0) == 0;
    const bool is_model = a == "--model" || a.rfind("--model=", 0) == 0;
    if (!is_port && !is_model) {
      out.agent_args.push_back(a);
      continue;
    }
    const char* flag = is_port ? "--port" : "--model";
    std::string value;
    if (size_t eq = a.find('='); eq != std::string::npos) {
      value = a.substr(eq + 1);
    } else {
      if (i + 1 >= args.size()) return make_error(flag, " needs a value");
      value = args[++i];
    }
    if (is_port) {
      auto p = parse_port_text(value, "--port");
      if (!p.ok()) return p.error();
      out.port = *p;
    } else {
      if (value.empty()) return make_error("--model: the model is empty");
      out.model = value;
    }
  }
  return out;
}

Result<ServedModel> parse_models_reply(std::string_view body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return make_error("GET /v1/models did not answer a JSON object");
  auto data = j.find("data");
  if (data == j.end() || !data->is_array()) return make_error("GET /v1/models has no 'data' list");
  for (const nlohmann::json& e : *data) {
    if (!e.is_object()) continue;
    auto owner = e.find("owned_by");
    if (owner == e.end() || *owner != "splash") continue;
    auto id = e.find("id");
    if (id == e.end() || !id->is_string() || id->get_ref<const std::string&>().empty())
      return make_error("GET /v1/models lists a Splash model without an 'id'");
    auto ctx = e.find("context_length");
    if (ctx == e.end() || !ctx->is_number_integer() || ctx->get<int64_t>() <= 0)
      return make_error("GET /v1/models: model '", id->get_ref<const std::string&>(),
                        "' has no integer 'context_length' (a Splash server older than this launcher?)");
    return ServedModel{id->get<std::string>(), ctx->get<int64_t>()};
  }
  return make_error("GET /v1/models lists no model owned by \"splash\": the server on this port is not Splash");
}

AgentLaunch agent_launch(Agent agent, const ServedModel& model, const ServerAddress& server,
                         const std::vector<std::string>& user_args) {
  AgentLaunch l;
  switch (agent) {
    case Agent::kClaude: l = claude_launch(model, server); break;
    case Agent::kCodex: l = codex_launch(model, server); break;
    case Agent::kOpencode: l = opencode_launch(model, server); break;
  }
  l.argv.insert(l.argv.end(), user_args.begin(), user_args.end());
  return l;
}

}  // namespace splash::launch
