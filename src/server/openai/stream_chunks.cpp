// Stream chunk payloads (spec 2.6).
#include <utility>

#include "server/openai/json_input.h"
#include "server/openai/logprobs.h"
#include "server/openai/response.h"

namespace splash::openai {

using ojson = nlohmann::ordered_json;

namespace {

ojson progress_json(const PromptProgress& p) {
  ojson j = ojson::object();
  j["total"] = p.total;
  j["cache"] = p.cache;
  j["processed"] = p.processed;
  j["time_ms"] = p.time_ms;
  return j;
}

ojson usage_chunk(const ResponseMeta& meta, std::string_view object, const ojson& usage) {
  ojson c = ojson::object();
  c["id"] = meta.id;
  c["object"] = object;
  c["created"] = meta.created;
  c["model"] = meta.model;
  c["choices"] = ojson::array();
  c["usage"] = usage;
  return c;
}

}  // namespace

// --- chat -----------------------------------------------------------------------------------------

ChatStream::ChatStream(ResponseMeta meta, ChatOutputOptions output, StreamOptions options)
    : meta_(std::move(meta)), options_(options), output_(std::move(output)) {}

ojson ChatStream::chunk_json(ojson delta, const ojson& finish) const {
  ojson choice = ojson::object();
  choice["index"] = 0;
  choice["delta"] = std::move(delta);
  choice["finish_reason"] = finish;
  ojson c = ojson::object();
  c["id"] = meta_.id;
  c["object"] = "chat.completion.chunk";
  c["created"] = meta_.created;
  c["model"] = meta_.model;
  c["choices"] = ojson::array({std::move(choice)});
  return c;
}

std::string ChatStream::chunk(ojson delta, const ojson& finish) const {
  return dump_json(chunk_json(std::move(delta), finish));
}

std::string ChatStream::start() const {
  ojson delta = ojson::object();
  delta["role"] = "assistant";
  delta["content"] = "";
  return chunk(std::move(delta), nullptr);
}

std::optional<std::string> ChatStream::progress(const PromptProgress& p) const {
  if (!options_.return_progress) return std::nullopt;
  ojson c = chunk_json(ojson::object(), nullptr);
  c["prompt_progress"] = progress_json(p);
  return dump_json(c);
}

std::string ChatStream::keepalive() const { return chunk(ojson::object(), nullptr); }

void ChatStream::hold_logprobs(const ojson& entries) {
  if (entries.is_array())
    for (const ojson& e : entries) pending_logprobs_.push_back(e);
}

void ChatStream::attach_logprobs(ojson& chunk) {
  if (pending_logprobs_.empty()) return;
  // OpenAI's key order: index, delta, logprobs, finish_reason.
  ojson& choice = chunk["choices"][0];
  ojson finish = std::move(choice["finish_reason"]);
  choice.erase("finish_reason");
  choice["logprobs"] = chat_logprobs(std::exchange(pending_logprobs_, ojson::array()));
  choice["finish_reason"] = std::move(finish);
}

std::vector<std::string> ChatStream::chunks(const std::vector<OutputPart>& parts, const ojson& logprobs) {
  hold_logprobs(logprobs);
  std::vector<std::string> out;
  for (const OutputPart& p : parts) {
    ojson delta = ojson::object();
    switch (p.kind) {
      case OutputPart::Kind::kReasoning:
        delta["reasoning_content"] = p.text;
        break;
      case OutputPart::Kind::kContent:
        delta["content"] = p.text;
        break;
      case OutputPart::Kind::kToolCall: {
        ojson call = ojson::object();
        call["index"] = p.call.index;
        if (!p.call.id.empty()) {
          call["id"] = p.call.id;
          call["type"] = "function";
          call["function"]["name"] = p.call.name;
        }
        call["function"]["arguments"] = p.call.arguments;
        delta["tool_calls"] = ojson::array({std::move(call)});
        break;
      }
    }
    ojson c = chunk_json(std::move(delta), nullptr);
    attach_logprobs(c);
    out.push_back(dump_json(c));
  }
  return out;
}

std::vector<std::string> ChatStream::text(std::string_view piece, int64_t n_tokens, const ojson& logprobs) {
  return chunks(output_.feed(piece, n_tokens), logprobs);
}

std::vector<std::string> ChatStream::finish(FinishReason end, const GenerationStats& stats) {
  std::vector<std::string> out = chunks(output_.finish());
  for (std::string& c : end_chunks(end, stats, !output_.tool_calls().empty(), output_.reasoning_tokens()))
    out.push_back(std::move(c));
  return out;
}

std::vector<std::string> ChatStream::end_chunks(FinishReason end, const GenerationStats& stats, bool made_tool_calls,
                                                int64_t reasoning_tokens, const ojson& logprobs) {
  hold_logprobs(logprobs);
  std::vector<std::string> out;
  ojson last = chunk_json(ojson::object(), finish_reason(end, made_tool_calls));
  attach_logprobs(last);
  last["timings"] = timings_json(stats);
  out.push_back(dump_json(last));
  if (options_.include_usage) {
    out.push_back(dump_json(usage_chunk(meta_, "chat.completion.chunk", usage_json(stats, reasoning_tokens))));
  }
  return out;
}

// --- completions ----------------------------------------------------------------------------------

CompletionStream::CompletionStream(ResponseMeta meta, StreamOptions options)
    : meta_(std::move(meta)), options_(options) {}

ojson CompletionStream::chunk_json(std::string_view text, const ojson& finish, const ojson& logprobs) const {
  ojson choice = ojson::object();
  choice["index"] = 0;
  choice["text"] = std::string(text);
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = finish;
  ojson c = ojson::object();
  c["id"] = meta_.id;
  c["object"] = "text_completion";
  c["created"] = meta_.created;
  c["model"] = meta_.model;
  c["choices"] = ojson::array({std::move(choice)});
  return c;
}

std::string CompletionStream::chunk(std::string_view text, const ojson& finish) const {
  return dump_json(chunk_json(text, finish));
}

std::optional<std::string> CompletionStream::progress(const PromptProgress& p) const {
  if (!options_.return_progress) return std::nullopt;
  ojson c = chunk_json("", nullptr);
  c["prompt_progress"] = progress_json(p);
  return dump_json(c);
}

std::string CompletionStream::keepalive() const { return chunk("", nullptr); }

std::optional<std::string> CompletionStream::text(std::string_view piece, const ojson& logprobs) {
  if (piece.empty() && logprobs.is_null()) return std::nullopt;
  return dump_json(chunk_json(piece, nullptr, logprobs));
}

std::vector<std::string> CompletionStream::finish(FinishReason end, const GenerationStats& stats) {
  std::vector<std::string> out;
  ojson last = chunk_json("", finish_reason(end, false));
  last["timings"] = timings_json(stats);
  out.push_back(dump_json(last));
  if (options_.include_usage) out.push_back(dump_json(usage_chunk(meta_, "text_completion", usage_json(stats, std::nullopt))));
  return out;
}

}  // namespace splash::openai
