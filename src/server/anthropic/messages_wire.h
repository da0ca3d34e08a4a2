// The Messages API's side of the generation seam (server/gen/generation.h): the message body, its
// event stream, and errors in Anthropic's shape (spec 2.6, 2.7).
//
// Body: {id:"msg_...", type:"message", role:"assistant", model, content:[blocks], stop_reason,
// stop_sequence, usage}. Blocks in output order: thinking {thinking, signature}, text {text},
// tool_use {id:"toolu_...", name, input (an object)}. stop_reason: end_turn, max_tokens,
// stop_sequence (with stop_sequence set), tool_use, model_context_window_exceeded. usage:
// input_tokens (prompt tokens not read from the prefix cache), cache_read_input_tokens (read from
// it), cache_creation_input_tokens (0: the cache is automatic, nothing is billed as written),
// output_tokens.
//
// Stream (`event: <type>` + `data: <json>`): message_start (usage: the whole prompt as input_tokens,
// since the cached share is known only later) -> per block content_block_start, content_block_delta
// (text_delta / thinking_delta / input_json_delta, and signature_delta before a thinking block
// stops), content_block_stop -> message_delta (stop_reason, stop_sequence, the final usage) ->
// message_stop. ping: keep-alive after 2 s of silence, and prompt progress ({"type":"ping",
// "prompt_progress":{...}}) when return_progress is set. An error after the stream started is an
// `error` event, then the stream ends.
//
// A tool_use block's input is sent whole when the call is complete, as one input_json_delta: input
// text that is not a JSON object (a call cut by max_tokens) becomes {}.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/gen/generation.h"
#include "server/http/message.h"
#include "server/openai/api_error.h"

namespace splash::anthropic {

struct MessageMeta {
  std::string id;              // "msg_..."
  std::string model;           // the name the response reports
  int64_t prompt_tokens = 0;   // for message_start
  std::vector<std::string> stop_sequences;  // the request's, to name the one that matched
  bool return_progress = false;
};

std::unique_ptr<gen::WireWriter> messages_wire(MessageMeta meta, bool stream);

// Anthropic's error type for a status (and our code): 400 invalid_request_error, 401
// authentication_error, 403 permission_error, 404 not_found_error, 413 request_too_large, 429
// rate_limit_error, 504 timeout_error, 529 overloaded_error, other 5xx api_error.
std::string_view error_type(int status, std::string_view code);
// The status on /v1/messages*: 503 runtime_busy and frontend_overloaded become 529 (Anthropic's
// "overloaded"); everything else keeps its status.
int error_status(const openai::ApiError& e);
// {"type":"error","error":{"type":...,"message":...}} with the status above; 503 and 529 carry
// Retry-After: 1.
http::SimpleResponse error_response(const openai::ApiError& e);
// An OpenAI-shaped error response made by shared code (access checks, the router) in Anthropic's
// shape; anything else (a success, a body already in Anthropic's shape) unchanged.
http::SimpleResponse to_anthropic(http::SimpleResponse r);

// The signature a thinking block carries: a checksum of its text (the text itself is shown, so there
// is nothing to encrypt). Accepted back without verification.
std::string thinking_signature(std::string_view thinking);

}  // namespace splash::anthropic
