// Response bodies and SSE chunk payloads of /v1/chat/completions and /v1/completions (spec 2.6).
// Functions return JSON text; the caller frames stream chunks as SSE (http::sse_event) and ends a
// stream with http::sse_done().
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/finish_reason.h"
#include "server/openai/api_error.h"
#include "server/openai/chat_output.h"

namespace splash::openai {

// The engine's kDone figures (spec 2.6 timings).
struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;       // prompt tokens taken from the prefix cache
  int64_t completion_tokens = 0;
  double prompt_ms = 0;            // start -> first emission
  double predicted_ms = 0;         // first emission -> end
  double load_ms = 0;              // waited for the weights to load again after an idle release
};

struct PromptProgress {
  int64_t total = 0, cache = 0, processed = 0;
  double time_ms = 0;
};

struct ResponseMeta {
  std::string id;                  // "chatcmpl-..." / "cmpl-..." (IdGenerator)
  int64_t created = 0;             // unix seconds
  std::string model;               // the name the response reports
};

// "stop", "length" (token limit or context limit), or "tool_calls" (stopped after making calls).
// Only meaningful for kStop / kLength / kContext.
std::string_view finish_reason(FinishReason end, bool made_tool_calls);
// The error for endings that are not an answer: kTimeout -> 504 request_timeout, kError -> 500
// engine_failed (with the engine's message) or, for a message starting with
// constrain::kMaskTimeoutError (a structured-output mask that came too late), 503 mask_timeout;
// kCancelled -> 503 server_shutdown; nullopt otherwise.
std::optional<ApiError> generation_error(FinishReason end, std::string_view engine_message);

// usage {prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details{cached_tokens}
// [, completion_tokens_details{reasoning_tokens}]}.
nlohmann::ordered_json usage_json(const GenerationStats& stats, std::optional<int64_t> reasoning_tokens);
// timings {prompt_n (uncached), cache_n, prompt_ms, prompt_per_second, predicted_n, predicted_ms,
// predicted_per_second[, load_ms]}; the decode rate leaves out the first token, whose time is in
// prompt_ms; load_ms (only when the request waited for an idle-released model to load) is before both.
nlohmann::ordered_json timings_json(const GenerationStats& stats);

// --- complete bodies ------------------------------------------------------------------------------

// chat.completion from a finished ChatOutput (finish() already called). content is null when the
// answer is only tool calls; reasoning_content and tool_calls appear when non-empty.
// `logprobs` (server/openai/logprobs.h) goes into the choice when the request asked for it; null
// leaves chat without the key and completions with "logprobs": null.
std::string chat_completion_body(const ResponseMeta& meta, const ChatOutput& output, FinishReason end,
                                 const GenerationStats& stats, const nlohmann::ordered_json& logprobs = nullptr);
std::string text_completion_body(const ResponseMeta& meta, std::string_view text, FinishReason end,
                                 const GenerationStats& stats, const nlohmann::ordered_json& logprobs = nullptr);

// --- streams --------------------------------------------------------------------------------------

struct StreamOptions {
  bool include_usage = false;
  bool return_progress = false;
};

// chat.completion.chunk payloads for one streamed chat request.
class ChatStream {
 public:
  ChatStream(ResponseMeta meta, ChatOutputOptions output, StreamOptions options);

  // delta {role:"assistant", content:""}; send first.
  std::string start() const;
  // An empty-delta chunk with prompt_progress; nullopt unless return_progress was asked.
  std::optional<std::string> progress(const PromptProgress& p) const;
  // An empty-delta chunk (keep-alive once the stream has started).
  std::string keepalive() const;
  // Delta chunks for one model text piece (zero or more: text may be held back). `logprobs`: the
  // chat_logprob_entries of the piece's tokens; they ride on the next chunk that goes out (this
  // piece's first, or a later one while text is held back, at the latest the finish chunk).
  std::vector<std::string> text(std::string_view piece, int64_t n_tokens = 0,
                                const nlohmann::ordered_json& logprobs = nullptr);
  // Held-back deltas, the chunk with finish_reason and timings, then the usage chunk (choices [])
  // when include_usage. For kCancelled / kTimeout / kError use generation_error + error_chunk.
  std::vector<std::string> finish(FinishReason end, const GenerationStats& stats);

  const ChatOutput& output() const { return output_; }

  // The same chunks for output parsed elsewhere (the generation seam owns the ChatOutput): one delta
  // chunk per part, and the closing chunks (finish_reason + timings, then usage when asked).
  // `logprobs` (chat_logprob_entries) ride on the next chunk that goes out, as with text().
  std::vector<std::string> chunks(const std::vector<OutputPart>& parts,
                                  const nlohmann::ordered_json& logprobs = nullptr);
  std::vector<std::string> end_chunks(FinishReason end, const GenerationStats& stats, bool made_tool_calls,
                                      int64_t reasoning_tokens, const nlohmann::ordered_json& logprobs = nullptr);

 private:
  nlohmann::ordered_json chunk_json(nlohmann::ordered_json delta, const nlohmann::ordered_json& finish) const;
  std::string chunk(nlohmann::ordered_json delta, const nlohmann::ordered_json& finish) const;
  void hold_logprobs(const nlohmann::ordered_json& entries);
  void attach_logprobs(nlohmann::ordered_json& chunk);

  ResponseMeta meta_;
  StreamOptions options_;
  ChatOutput output_;
  nlohmann::ordered_json pending_logprobs_ = nlohmann::ordered_json::array();  // entries not sent yet
};

// text_completion chunk payloads for one streamed /v1/completions request.
class CompletionStream {
 public:
  CompletionStream(ResponseMeta meta, StreamOptions options);
  std::optional<std::string> progress(const PromptProgress& p) const;  // empty-text chunk
  std::string keepalive() const;
  // nullopt for an empty piece without logprobs; `logprobs` (CompletionLogprobs::take) goes into the chunk.
  std::optional<std::string> text(std::string_view piece, const nlohmann::ordered_json& logprobs = nullptr);
  std::vector<std::string> finish(FinishReason end, const GenerationStats& stats);

 private:
  nlohmann::ordered_json chunk_json(std::string_view text, const nlohmann::ordered_json& finish,
                                    const nlohmann::ordered_json& logprobs = nullptr) const;
  std::string chunk(std::string_view text, const nlohmann::ordered_json& finish) const;
  ResponseMeta meta_;
  StreamOptions options_;
};

// An error after the stream started: {"error":{...}} as one more data event (the status line is
// already sent), then the caller ends with [DONE].
std::string error_chunk(const ApiError& error);

}  // namespace splash::openai
