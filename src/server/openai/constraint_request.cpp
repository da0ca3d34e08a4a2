// Structured output fields (issue 39): response_format {type: text | json_object | json_schema},
// and the llama.cpp-style `grammar` (GBNF) and `regex` strings. Only the shape is checked here; the
// schema or grammar itself is compiled by the caller (constrain::ConstraintCompiler), whose errors
// name what cannot be enforced.
#include "core/result.h"
#include "server/openai/request_common.h"

namespace splash::openai {

ApiResult<std::optional<OutputConstraint>> parse_output_constraint(const FieldReader& r) {
  using ojson = nlohmann::ordered_json;
  std::optional<OutputConstraint> out;
  auto take = [&](OutputConstraint c) -> ApiResult<Ok> {
    if (out) {
      return invalid_request(str_cat("'", c.field.substr(0, c.field.find('.')), "' and '",
                                     out->field.substr(0, out->field.find('.')), "' cannot be combined: send one"));
    }
    out = std::move(c);
    return Ok{};
  };
  if (const ojson* rf = r.get("response_format")) {
    if (!rf->is_object()) return invalid_request("'response_format' must be an object");
    FieldReader f(*rf, "response_format");
    SPLASH_OAI_TRY(auto type, f.string("type"));
    if (!type) return invalid_request("'response_format.type' is required");
    if (*type == "json_object") {
      SPLASH_OAI_TRY(auto ok, take({OutputConstraint::Kind::kJsonSchema, R"({"type":"object"})", "response_format"}));
      (void)ok;
    } else if (*type == "json_schema") {
      const ojson* js = f.get("json_schema");
      if (js == nullptr || !js->is_object()) return invalid_request("'response_format.json_schema' must be an object");
      FieldReader j(*js, "response_format.json_schema");
      SPLASH_OAI_TRY(auto name, j.string("name"));
      (void)name;
      SPLASH_OAI_TRY(auto strict, j.boolean("strict"));  // the schema is always enforced
      (void)strict;
      const ojson* schema = j.get("schema");
      if (schema == nullptr) return invalid_request("'response_format.json_schema.schema' is required");
      if (!schema->is_object() && !schema->is_boolean()) {
        return invalid_request("'response_format.json_schema.schema' must be an object");
      }
      SPLASH_OAI_TRY(auto ok, take({OutputConstraint::Kind::kJsonSchema, schema->dump(), "response_format.json_schema.schema"}));
      (void)ok;
    } else if (*type != "text") {
      return invalid_request("'response_format.type' must be one of text, json_object, json_schema");
    }
  }
  for (auto [key, kind] : {std::pair{"grammar", OutputConstraint::Kind::kGbnf}, std::pair{"regex", OutputConstraint::Kind::kRegex}}) {
    SPLASH_OAI_TRY(auto text, r.string(key));
    if (!text) continue;
    if (text->empty()) return invalid_request(str_cat("'", key, "' must not be empty"));
    SPLASH_OAI_TRY(auto ok, take({kind, *text, key}));
    (void)ok;
  }
  return out;
}

}  // namespace splash::openai
