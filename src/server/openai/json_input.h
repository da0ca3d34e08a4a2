// Parsing of untrusted JSON request bodies: nesting limited (spec 2.1: at most 128 levels), key order
// kept (tool schemas reach the chat template's `tojson` as the client wrote them), duplicate keys
// resolved as "last one wins" in linear time, and never an exception.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/openai/api_error.h"

namespace splash::openai {

inline constexpr int kMaxJsonDepth = 128;

// 400 "invalid JSON in request body: ..." or "JSON nesting deeper than 128 levels" on failure.
// `what` names the input in messages ("request body", "'messages[1].tool_calls[0].function.arguments'").
ApiResult<nlohmann::ordered_json> parse_json(std::string_view text, std::string_view what = "request body",
                                             int max_depth = kMaxJsonDepth);

// Serializes generated JSON; invalid UTF-8 (which the engine should never emit) is replaced with
// U+FFFD instead of throwing.
std::string dump_json(const nlohmann::ordered_json& value);

}  // namespace splash::openai
