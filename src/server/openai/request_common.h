// Parsing shared by the chat and completion request parsers. Internal to server/openai.
#pragma once

#include "server/openai/field_reader.h"
#include "server/openai/request.h"

namespace splash::openai {

// model, stream, stream_options, return_progress, timeout, stop, ignore_eos, priority, sampling,
// and the refusals both endpoints share (n != 1, logit_bias).
ApiResult<CommonFields> parse_common_fields(const FieldReader& r);
// tool_choice given as a string ("auto", "none", "required"); `object_hint` names the object form
// in the error ("a function object" for chat, "an object" for Responses).
ApiResult<ToolChoice> parse_tool_choice_string(const std::string& s, const std::vector<Tool>& tools,
                                               std::string_view object_hint);
// response_format (text, json_object, json_schema), grammar, regex (constraint_request.cpp).
ApiResult<std::optional<OutputConstraint>> parse_output_constraint(const FieldReader& r);

}  // namespace splash::openai
