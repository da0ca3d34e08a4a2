// The `logprobs` objects of OpenAI responses, from the engine's per-token data (sampling/logprobs.h:
// the model's raw distribution).
//
// Chat (choices[].logprobs, and the same per stream chunk):
//   {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}],
//    "refusal": null}
// Every generated token is listed, reasoning and tool-call tokens included, so the entries' bytes
// concatenate to the model's raw output (the reasoning / content / tool-call split is a text parse
// that does not cut tokens). Completions (choices[].logprobs):
//   {"tokens": [...], "token_logprobs": [...], "top_logprobs": [{token: logprob}, ...], "text_offset": [...]}
// with echo's first prompt token at null / null. text_offset counts characters (code points) into
// the concatenation of the listed tokens (the returned text, except where the tokenizer added text
// the client did not send, e.g. a BOS token).
//
// A token's text is what it decodes to alone; a token that ends inside a UTF-8 character shows
// U+FFFD in "token" (its "bytes" are exact). -inf (a token the logits rule out) is reported as
// -9999.0, as OpenAI does, since JSON has no infinity.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "sampling/logprobs.h"

namespace splash::openai {

// The bytes token `id` decodes to on its own (Tokenizer::token_to_piece).
using TokenPiece = std::function<std::string(int32_t id)>;

constexpr double kLogprobFloor = -9999.0;
double logprob_value(float logprob);  // -inf -> kLogprobFloor

// Chat: one `content` entry per token.
nlohmann::ordered_json chat_logprob_entries(std::span<const TokenLogprob> tokens, const TokenPiece& piece);
// {"content": entries, "refusal": null}
nlohmann::ordered_json chat_logprobs(nlohmann::ordered_json entries);

// Completions: accumulates the four parallel lists; take() hands out what was added since the last
// take() (a stream chunk's share) while text_offset keeps counting from the start.
class CompletionLogprobs {
 public:
  explicit CompletionLogprobs(TokenPiece piece);
  // Echo's first prompt token: no context to predict it, so null logprob and null top_logprobs.
  void add_unscored(int32_t id);
  void add(std::span<const TokenLogprob> tokens);
  bool empty() const { return tokens_.empty(); }
  nlohmann::ordered_json take();

 private:
  void add_token(int32_t id);
  TokenPiece piece_;
  nlohmann::ordered_json tokens_, token_logprobs_, top_logprobs_, text_offset_;
  int64_t offset_ = 0;
};

}  // namespace splash::openai
