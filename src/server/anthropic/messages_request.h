// Anthropic Messages request bodies (POST /v1/messages and /v1/messages/count_tokens, spec 2.3-2.5)
// -> a validated MessagesRequest. The conversation becomes an openai::ChatRequest so it renders
// through the same chat-template path as Chat Completions (render_chat):
//   system (string or text blocks)        -> a system message
//   user text blocks                      -> user messages (consecutive blocks joined with "\n")
//   user tool_result blocks               -> tool messages (tool_call_id = tool_use_id; is_error
//                                            results are rendered as "Error: <content>")
//   assistant text / thinking / tool_use  -> content / reasoning_content / tool_calls (input as an object)
//   redacted_thinking blocks              -> skipped (opaque; Splash never writes them)
//   tools {name, description, input_schema} -> function tools (parameters = input_schema)
//   thinking enabled|adaptive             -> reasoning_effort output_config.effort (default "high");
//   thinking absent|disabled              -> reasoning_effort "none" (the template's enable_thinking false)
// Refused with a 400 naming the field: a missing model / max_tokens / messages, a final assistant
// message (prefill), images, documents and other non-text blocks, server tools (a tool with a `type`
// other than "custom"), output_config.format, tool_choice any/tool together with thinking, stop
// sequences together with callable tools, mcp_servers, container. Fields not listed in
// docs/SERVER.md are ignored (Anthropic clients send many); cache_control anywhere is accepted and
// ignored (the prefix cache is automatic). A JSON null counts as "not sent".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai/api_error.h"
#include "server/openai/request.h"

namespace splash::anthropic {

struct ToolChoice {
  enum class Mode : uint8_t { kAuto, kAny, kTool, kNone };
  Mode mode = Mode::kAuto;
  std::string name;                        // kTool
  bool disable_parallel_tool_use = false;
};

struct MessagesRequest {
  std::string model;                       // required for Messages (spec 2.3)
  std::optional<int64_t> max_tokens;       // required by /v1/messages (> 0), optional for count_tokens
  openai::ChatRequest chat;                // messages, tools, reasoning_effort, sampling, stop, stream
  ToolChoice tool_choice;
  bool thinking = false;                   // thinking enabled or adaptive
};

// `count_tokens`: /v1/messages/count_tokens (max_tokens not required, stream fields irrelevant).
openai::ApiResult<MessagesRequest> parse_messages_request(std::string_view body, bool count_tokens);

}  // namespace splash::anthropic
