// The OpenAI routes' WireWriters for the generation seam (server/gen/generation.h): chat.completion
// and text_completion bodies, their chunk streams ending in `data: [DONE]`, and errors in OpenAI's
// shape (spec 2.6, 2.7).
#pragma once

#include <memory>

#include "server/gen/generation.h"
#include "server/openai/response.h"

namespace splash::openai {

// /v1/chat/completions. `output` must be the same options the request's OutputRules carry.
std::unique_ptr<gen::WireWriter> chat_wire(ResponseMeta meta, ChatOutputOptions output, StreamOptions options,
                                           bool stream);
// /v1/completions.
std::unique_ptr<gen::WireWriter> completion_wire(ResponseMeta meta, StreamOptions options, bool stream);

}  // namespace splash::openai
