// Complete (non-stream) bodies and the usage / timings blocks they share with streams.
#include "constrain/mask_worker.h"
#include "server/openai/json_input.h"
#include "server/openai/response.h"

namespace splash::openai {

using ojson = nlohmann::ordered_json;

std::string_view finish_reason(FinishReason end, bool made_tool_calls) {
  switch (end) {
    case FinishReason::kLength:
    case FinishReason::kContext:
      return "length";
    default:
      return made_tool_calls ? "tool_calls" : "stop";
  }
}

std::optional<ApiError> generation_error(FinishReason end, std::string_view engine_message) {
  switch (end) {
    case FinishReason::kTimeout:
      return api_error(make_error(ErrorCode::kTimeout, "the request ran past its timeout"));
    case FinishReason::kError:
      if (engine_message.starts_with(constrain::kMaskTimeoutError)) return api_error(503, "mask_timeout", std::string(engine_message));
      return api_error(make_error(ErrorCode::kEngineFailed, engine_message.empty() ? "the engine failed" : engine_message));
    case FinishReason::kCancelled:
      return api_error(make_error(ErrorCode::kShuttingDown, "the request was cancelled: the server is shutting down"));
    default:
      return std::nullopt;
  }
}

ojson usage_json(const GenerationStats& s, std::optional<int64_t> reasoning_tokens) {
  ojson u = ojson::object();
  u["prompt_tokens"] = s.prompt_tokens;
  u["completion_tokens"] = s.completion_tokens;
  u["total_tokens"] = s.prompt_tokens + s.completion_tokens;
  u["prompt_tokens_details"]["cached_tokens"] = s.cached_tokens;
  if (reasoning_tokens) u["completion_tokens_details"]["reasoning_tokens"] = *reasoning_tokens;
  return u;
}

ojson timings_json(const GenerationStats& s) {
  int64_t prompt_n = s.prompt_tokens - s.cached_tokens;
  if (prompt_n < 0) prompt_n = 0;
  // predicted_ms runs from the first emitted token to the last, so it covers n - 1 tokens.
  int64_t decode_n = s.completion_tokens > 1 ? s.completion_tokens - 1 : 0;
  ojson t = ojson::object();
  t["prompt_n"] = prompt_n;
  t["cache_n"] = s.cached_tokens;
  t["prompt_ms"] = s.prompt_ms;
  t["prompt_per_second"] = s.prompt_ms > 0 ? static_cast<double>(prompt_n) * 1000.0 / s.prompt_ms : 0.0;
  t["predicted_n"] = s.completion_tokens;
  t["predicted_ms"] = s.predicted_ms;
  t["predicted_per_second"] = s.predicted_ms > 0 ? static_cast<double>(decode_n) * 1000.0 / s.predicted_ms : 0.0;
  if (s.load_ms > 0) t["load_ms"] = s.load_ms;
  return t;
}

std::string chat_completion_body(const ResponseMeta& meta, const ChatOutput& output, FinishReason end,
                                 const GenerationStats& stats, const ojson& logprobs) {
  const auto& calls = output.tool_calls();
  ojson message = ojson::object();
  message["role"] = "assistant";
  if (output.content().empty() && !calls.empty()) {
    message["content"] = nullptr;
  } else {
    message["content"] = output.content();
  }
  if (!output.reasoning().empty()) message["reasoning_content"] = output.reasoning();
  if (!calls.empty()) {
    ojson list = ojson::array();
    for (const ToolCall& c : calls) {
      ojson call = ojson::object();
      call["id"] = c.id;
      call["type"] = "function";
      call["function"]["name"] = c.name;
      call["function"]["arguments"] = c.arguments;
      list.push_back(std::move(call));
    }
    message["tool_calls"] = std::move(list);
  }
  ojson choice = ojson::object();
  choice["index"] = 0;
  choice["message"] = std::move(message);
  if (!logprobs.is_null()) choice["logprobs"] = logprobs;
  choice["finish_reason"] = finish_reason(end, !calls.empty());
  ojson body = ojson::object();
  body["id"] = meta.id;
  body["object"] = "chat.completion";
  body["created"] = meta.created;
  body["model"] = meta.model;
  body["choices"] = ojson::array({std::move(choice)});
  body["usage"] = usage_json(stats, output.reasoning_tokens());
  body["timings"] = timings_json(stats);
  return dump_json(body);
}

std::string text_completion_body(const ResponseMeta& meta, std::string_view text, FinishReason end,
                                 const GenerationStats& stats, const ojson& logprobs) {
  ojson choice = ojson::object();
  choice["index"] = 0;
  choice["text"] = std::string(text);
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = finish_reason(end, false);
  ojson body = ojson::object();
  body["id"] = meta.id;
  body["object"] = "text_completion";
  body["created"] = meta.created;
  body["model"] = meta.model;
  body["choices"] = ojson::array({std::move(choice)});
  body["usage"] = usage_json(stats, std::nullopt);
  body["timings"] = timings_json(stats);
  return dump_json(body);
}

std::string error_chunk(const ApiError& error) { return error_body(error); }

}  // namespace splash::openai
