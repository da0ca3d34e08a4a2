// The /v1/responses WireWriter for the generation seam (server/gen/generation.h): ResponseEvents
// rendered as named SSE events (`event: response.output_text.delta` + `data: {...}`, no [DONE]) or
// as one Response body, and the finished response put in the store (when the request said store).
// A keep-alive is an SSE comment. Errors before the engine runs are OpenAI error bodies; a failure
// after it ran is response.failed (stream) or the error body (non-stream).
#pragma once

#include <memory>
#include <vector>

#include "server/gen/generation.h"
#include "server/openai/response_store.h"
#include "server/openai/responses_output.h"

namespace splash::openai {

// `conversation`: what the store keeps for previous_response_id (the history and this request's
// input); the output is appended as an assistant turn. `store`: nullptr when the request said
// store:false.
std::unique_ptr<gen::WireWriter> responses_wire(ResponseSettings settings, bool stream,
                                                std::shared_ptr<ResponseStore> store,
                                                std::vector<ChatMessage> conversation);

}  // namespace splash::openai
