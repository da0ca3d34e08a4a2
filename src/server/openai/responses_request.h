// /v1/responses bodies (OpenAI Responses API, spec 2.4) -> ResponsesRequest, and from there the same
// ChatRequest the chat-completions path renders: one chat template, one tokenizer path, one cache.
//
// Input items become chat messages: `message` items (string or input_text / output_text parts) keep
// their role ("developer" -> system); a `reasoning` item's text becomes the reasoning_content of the
// assistant turn that follows it; `function_call` items join the assistant turn before them as
// tool_calls (arguments kept as the client's string); `function_call_output` becomes a tool message.
// Flat function tools ({type:"function", name, description, parameters, strict}) become chat tools;
// a `namespace` tool's functions are offered to the model as "NAMESPACE.NAME".
//
// Unknown fields are ignored (as in the chat parser); fields this server knows but cannot honour are
// a 400 naming the field: conversation, background:true, truncation other than "disabled",
// context_management, prompt, max_tool_calls, top_logprobs > 0, text.format other than "text",
// tool_choice "required" or naming a function (no grammar engine yet), non-function tools, images
// and files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai/request.h"

namespace splash::openai {

struct ResponsesRequest {
  CommonFields common;                            // model, stream, temperature, top_p, timeout, ...
  std::optional<std::string> instructions;        // a system message before everything, not stored
  std::vector<ChatMessage> input;                 // the input items as chat messages (non-empty)
  std::vector<Tool> tools;                        // chat-shaped, namespaces flattened
  nlohmann::ordered_json tools_json = nlohmann::ordered_json::array();  // as sent, for the response
  ToolChoice tool_choice;
  nlohmann::ordered_json tool_choice_json = "auto";                     // as sent, for the response
  bool parallel_tool_calls = true;
  std::optional<std::string> reasoning_effort;    // reasoning.effort
  std::optional<std::string> reasoning_summary;   // reasoning.summary, echoed (summaries are not written)
  std::optional<int64_t> max_output_tokens;       // > 0; unset = the rest of the context
  bool store = true;
  std::optional<std::string> previous_response_id;
  nlohmann::ordered_json metadata = nlohmann::ordered_json::object();  // <= 16 string values
};

// `body` is the raw request body (UTF-8 JSON, nesting <= 128).
ApiResult<ResponsesRequest> parse_responses_request(std::string_view body);
ApiResult<ResponsesRequest> parse_responses_request(const nlohmann::ordered_json& body);
inline ApiResult<ResponsesRequest> parse_responses_request(const std::string& body) {
  return parse_responses_request(std::string_view(body));
}
inline ApiResult<ResponsesRequest> parse_responses_request(const char* body) {
  return parse_responses_request(std::string_view(body));
}

// The chat request to render: a system message with the instructions (when sent), then `history`
// (the stored conversation of previous_response_id, or nothing), then the request's input.
ChatRequest to_chat_request(const ResponsesRequest& request, const std::vector<ChatMessage>& history);

// The model-facing name of a tool in a namespace ("" for none): "NAMESPACE.NAME".
std::string flat_tool_name(std::string_view ns, std::string_view name);

}  // namespace splash::openai
