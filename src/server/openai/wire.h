// The OpenAI routes' WireWriters for the generation seam (server/gen/generation.h): chat.completion
// and text_completion bodies, their chunk streams ending in `data: [DONE]`, and errors in OpenAI's
// shape (spec 2.6, 2.7). Log-probabilities (logprobs.h) are rendered here from the seam's events.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/gen/generation.h"
#include "server/openai/logprobs.h"
#include "server/openai/response.h"

namespace splash::openai {

// /v1/chat/completions. `output` must be the same options the request's OutputRules carry. `piece`
// set: the request asked for logprobs (GenerationRequest::logprobs >= 0); it names the tokens.
std::unique_ptr<gen::WireWriter> chat_wire(ResponseMeta meta, ChatOutputOptions output, StreamOptions options,
                                           bool stream, TokenPiece piece = {});

// Completions `echo`: the prompt as the client sent it (or the decoded ids) and its ids.
struct CompletionEcho {
  std::string text;
  std::vector<int32_t> ids;
};

// /v1/completions. `piece` as for chat. With `echo` the prompt goes out before the completion (in a
// stream, as the first chunk); with logprobs too its tokens are listed first, the first unscored,
// from WireWriter::prompt_scored (the request must set GenerationRequest::prompt_logprobs when the
// prompt has more than one token).
std::unique_ptr<gen::WireWriter> completion_wire(ResponseMeta meta, StreamOptions options, bool stream,
                                                 TokenPiece piece = {}, std::optional<CompletionEcho> echo = {});

}  // namespace splash::openai
