// Server-sent events framing (text/event-stream) for the streamed OpenAI responses.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "server/http/message.h"

namespace splash::http {

// "data: <json>\n\n". The payload is expected on one line (compact JSON); should it hold line
// breaks, each line gets its own "data: " prefix so the event cannot be split or forged.
std::string sse_event(std::string_view json);
// The same for a JSON value, serialized by nlohmann (compact; invalid UTF-8 replaced, never thrown).
// (A separate name: an overload would make sse_event(std::string) ambiguous.)
std::string sse_json_event(const nlohmann::json& value);
// "data: [DONE]\n\n": the OpenAI end-of-stream marker.
std::string sse_done();
// ": <text>\n\n": a comment line clients ignore, sent as a keep-alive. Line breaks in text are
// replaced by spaces.
std::string sse_comment(std::string_view text = "keep-alive");
// Content-Type: text/event-stream, Cache-Control: no-cache, X-Accel-Buffering: no.
std::vector<Header> sse_headers();

}  // namespace splash::http
