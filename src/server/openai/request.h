// OpenAI request bodies -> validated structs (spec 2.4). Every rule of the spec is checked here and
// answered with a 400 naming the field ("'temperature' must be a number"); fields this server does
// not know are ignored (OpenAI clients send many), fields it knows but cannot honour (n > 1,
// logit_bias, images, suffix) are refused, never silently dropped. A JSON
// null counts as "not sent" for every optional field.
//
// What is left to the caller (it needs the served model or the tokenizer): `model` against the
// served names (404 model_not_found), and max_tokens against the context window (400
// context_length_exceeded).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "sampling/sampling_params.h"
#include "server/openai/api_error.h"

namespace splash::openai {

// Sampling fields with the API's defaults (spec 2.4), which differ from SamplingParams' neutral
// ones: an OpenAI client that sends nothing gets top_p 0.95 and top_k 20.
struct SamplingFields {
  float temperature = 1.0f;         // [0, 2]; 0 < t < 0.01 is raised to 0.01 (0 stays greedy)
  float top_p = 0.95f;              // [0, 1]
  int32_t top_k = 20;               // 0 or -1 = off (stored as 0)
  float min_p = 0.0f;               // [0, 1]
  float presence_penalty = 0.0f;    // [-2, 2]
  float frequency_penalty = 0.0f;   // [-2, 2]
  float repetition_penalty = 1.0f;  // > 0
  std::optional<uint64_t> seed;     // unset: the sampler draws one
};

SamplingParams to_sampling_params(const SamplingFields& fields);

constexpr double kNoDeadlineTimeout = 1e9;  // seconds, about 31.7 years

// Structured output (issue 39): the output must match a JSON Schema, a GBNF grammar or a regex.
struct OutputConstraint {
  enum class Kind : uint8_t { kJsonSchema, kGbnf, kRegex };
  Kind kind = Kind::kJsonSchema;
  std::string text;   // the schema as JSON text (key order kept), or the grammar / regex
  std::string field;  // where it came from, for errors: "response_format.json_schema.schema", "grammar", "regex"
};

// Fields shared by /v1/chat/completions and /v1/completions.
struct CommonFields {
  std::optional<std::string> model;   // the caller checks it against the served names
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  bool return_progress = false;       // prompt_progress chunks while the prompt is processed
  // > 0; the request's deadline (504 request_timeout). kNoDeadlineTimeout or more is parsed as no
  // deadline: the steady clock counts nanoseconds in 64 bits, so 1e10 s would wrap to the past.
  std::optional<double> timeout_s;
  std::vector<std::string> stop;      // at most 4, none empty
  bool ignore_eos = false;
  std::string priority = "normal";    // foreground | normal | background
  bool cache_prompt = true;           // false: this request's KV is not written to the prefix cache
  // Log-probabilities of the generated tokens, with this many alternatives each; nullopt = none.
  // Chat: `logprobs: true` and `top_logprobs` (0-20); completions: `logprobs` (0-5).
  std::optional<int> logprobs;
  SamplingFields sampling;
  // response_format json_object / json_schema, `grammar` (GBNF) or `regex`; at most one.
  std::optional<OutputConstraint> constraint;
};

// One function tool as the client declared it.
struct Tool {
  std::string name;
  nlohmann::ordered_json definition;  // the whole {"type":"function","function":{...}}, key order kept
};

struct ToolChoice {
  // kRequired: at least one call of any offered tool; kFunction: a call of `function`. Both are
  // enforced by a grammar over the template's tool-call syntax.
  enum class Mode : uint8_t { kAuto, kNone, kRequired, kFunction };
  Mode mode = Mode::kAuto;
  std::string function;
};

// A tool call in an assistant message of the history.
struct HistoryToolCall {
  std::string id;
  std::string name;
  // The arguments exactly as the client sent them: a string (OpenAI's wire form) stays that string,
  // so a template that prints strings verbatim (Qwen3's) renders the bytes the client saw, as
  // Hugging Face's apply_chat_template does; an object stays an object; absent is {}.
  nlohmann::ordered_json arguments;
  // A string holding a JSON object, parsed: only for templates that cannot take a string (they
  // iterate the arguments with |items, as Qwen3.5's XML tool calls do); see render_chat.
  std::optional<nlohmann::ordered_json> arguments_object;
};

struct ChatMessage {
  std::string role;                              // system | user | assistant | tool ("developer" -> system)
  std::optional<std::string> content;            // text parts joined with "\n"; nullopt when null/absent
  std::optional<std::string> reasoning_content;  // assistant history
  std::vector<HistoryToolCall> tool_calls;       // assistant history
  std::optional<std::string> tool_call_id;       // tool results
  std::optional<std::string> name;
};

struct ChatRequest {
  CommonFields common;
  std::vector<ChatMessage> messages;             // non-empty
  std::vector<Tool> tools;
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;
  std::optional<std::string> reasoning_effort;   // none minimal low medium high xhigh max
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  std::optional<bool> preserve_thinking;
  std::optional<int64_t> max_tokens;             // max_completion_tokens, else max_tokens; > 0; unset = rest of the context

  // Tool calls are parsed out of the output only when tools were offered and not barred.
  bool tools_callable() const { return !tools.empty() && tool_choice.mode != ToolChoice::Mode::kNone; }
};

struct CompletionRequest {
  CommonFields common;
  std::variant<std::string, std::vector<int32_t>> prompt;  // text, or token ids (non-empty)
  int64_t max_tokens = 16;  // > 0 (OpenAI's default for completions); 0 only with echo (score the prompt)
  // The prompt comes back before the completion (its logprobs too, with `logprobs`; the first
  // token's is null): lm-evaluation-harness's loglikelihood requests send echo + max_tokens 0.
  bool echo = false;
};

// `body` is the raw request body (UTF-8 JSON, nesting <= 128).
ApiResult<ChatRequest> parse_chat_request(std::string_view body);
ApiResult<CompletionRequest> parse_completion_request(std::string_view body);

// The same, for a body already parsed by parse_json (e.g. by a router that peeked at "model").
ApiResult<ChatRequest> parse_chat_request(const nlohmann::ordered_json& body);
ApiResult<CompletionRequest> parse_completion_request(const nlohmann::ordered_json& body);
// A std::string or a literal converts to both string_view and ordered_json: these pick the text one.
inline ApiResult<ChatRequest> parse_chat_request(const std::string& body) { return parse_chat_request(std::string_view(body)); }
inline ApiResult<ChatRequest> parse_chat_request(const char* body) { return parse_chat_request(std::string_view(body)); }
inline ApiResult<CompletionRequest> parse_completion_request(const std::string& body) {
  return parse_completion_request(std::string_view(body));
}
inline ApiResult<CompletionRequest> parse_completion_request(const char* body) {
  return parse_completion_request(std::string_view(body));
}

// Is `effort` one of the spec's reasoning_effort values?
bool is_reasoning_effort(std::string_view effort);

}  // namespace splash::openai
