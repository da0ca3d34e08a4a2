// `splash claude|codex|opencode` (spec 10): what a coding agent is started with so that it talks to
// the Splash server on loopback: its argv and the environment changes. Pure functions of the served
// model's id and context, the port and the API key; the CLI (src/cli/agents.cpp) finds the server,
// reads /v1/models through parse_models_reply() and execs the result.
//
//   auto served = parse_models_reply(status, body);           // GET /v1/models
//   AgentLaunch l = agent_launch(Agent::kCodex, *served, {.port = 8000}, {"exec", "hi"});
//   // l.argv = {"codex", "-c", "model_provider=\"splash\"", ..., "exec", "hi"}
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace splash::launch {

enum class Agent : uint8_t { kClaude, kCodex, kOpencode };

// "claude", "codex", "opencode": the subcommand and the program looked up on PATH.
const char* agent_program(Agent agent);
// The product's name for messages ("Claude Code", "Codex CLI", "opencode").
const char* agent_title(Agent agent);
// How to install it: "npm install -g @anthropic-ai/claude-code" ...
const char* agent_install_command(Agent agent);

// The subcommand's own flags, recognised anywhere before a `--`: --port P (1..65535; default
// SPLASH_PORT, else 8000) and --model M (start `splash serve --model M` when no server is ready).
// Everything else, and everything after `--`, is the agent's, in order (its own --help and --port
// included: `splash codex -- --port 1`).
struct AgentArgs {
  uint16_t port = 8000;
  std::string model;  // empty: use the running server only
  std::vector<std::string> agent_args;
};
// `splash_port_env` is SPLASH_PORT's value (nullptr or empty when unset). Errors name the flag.
Result<AgentArgs> parse_agent_args(const std::vector<std::string>& args, const char* splash_port_env);

// The model a server serves, as GET /v1/models reports it.
struct ServedModel {
  std::string id;
  int64_t context_length = 0;  // the server's effective context (tokens), > 0
};

// GET /v1/models' reply: the first entry with owned_by "splash" and an integer context_length > 0.
// Errors say what is missing (another server on the port, an old Splash).
Result<ServedModel> parse_models_reply(std::string_view body);

struct ServerAddress {
  uint16_t port = 8000;
  std::string api_key;  // SPLASH_API_KEY; empty when the server has none
};

struct AgentLaunch {
  std::vector<std::string> argv;  // argv[0] is the program name, looked up on PATH
  // Variables to set (a value) or remove from the inherited environment (nullopt).
  std::vector<std::pair<std::string, std::optional<std::string>>> env;
};

// Output tokens an agent may ask for in one reply: min(32768, context / 4) (spec 10), at least 1.
int64_t agent_output_limit(int64_t context_length);

// The agent's argv and environment; `user_args` (what followed the subcommand's own flags) come last
// and so win over ours where the agent takes the last value.
//   claude:   ANTHROPIC_BASE_URL, a Bearer token (ANTHROPIC_AUTH_TOKEN; ANTHROPIC_API_KEY removed so
//             it does not override it), every model variable = the served model, context window
//             (and auto-compact window from 100K, Claude Code's minimum) = the server's context,
//             output limit, telemetry, error reports and update checks off;
//             --disallowedTools=WebSearch (the default permission mode stays).
//   codex:    -c overrides: provider "splash" (base_url .../v1, wire_api "responses", env_key
//             SPLASH_API_KEY when a key is set), model, context window, auto-compact at 90 %, web
//             search disabled, update check and analytics off.
//   opencode: OPENCODE_CONFIG_CONTENT holding an @ai-sdk/openai-compatible provider "splash" with the
//             model's context and output limits; model and small_model point at it.
AgentLaunch agent_launch(Agent agent, const ServedModel& model, const ServerAddress& server,
                         const std::vector<std::string>& user_args);

// "http://127.0.0.1:<port>".
std::string loopback_url(uint16_t port);

}  // namespace splash::launch
