// JSON Schema (draft 2020-12, the parts tools and response_format use) into a grammar whose every
// string is a JSON document that validates against the schema. Where the grammar is narrower than
// the schema it says so in docs/SERVER.md "Structured output" (properties come in the declared
// order (so the schema must be parsed as nlohmann::ordered_json); only declared properties are written when `properties` is given; `oneOf` is matched as
// `anyOf`; numbers with bounds have no exponent; an integer part has at most 19 digits and an
// exponent at most 2, so every number an output holds parses to a finite double). A keyword that would need more than the grammar
// can enforce is an error naming it, never ignored.
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "constrain/grammar.h"
#include "core/result.h"

namespace splash::constrain {

enum class JsonWhitespace : uint8_t {
  kCompact,   // {"a":1,"b":[2,3]}
  kSpaced,    // {"a": 1, "b": [2, 3]}   (Python's json.dumps; what Qwen prints in tool calls)
  kFlexible,  // up to kMaxFlexibleWhitespace whitespace bytes wherever JSON allows them
};
constexpr int32_t kMaxFlexibleWhitespace = 32;

struct JsonSchemaOptions {
  JsonWhitespace whitespace = JsonWhitespace::kCompact;
  int32_t max_depth = 64;  // schema nesting
};

// Adds the schema's rules to `b`; returns the rule of one value of the schema. `schema` must stay
// alive until b.build() (local $refs are resolved against it).
Result<int32_t> add_json_schema(const nlohmann::ordered_json& schema, GrammarBuilder& b, const JsonSchemaOptions& options = {});

// The whole grammar for one document. `{"type":"object"}` is response_format's json_object.
Result<std::shared_ptr<const Grammar>> compile_json_schema(const nlohmann::ordered_json& schema,
                                                           const JsonSchemaOptions& options = {});

// Decimal integers in [lo, hi] (either side may be open) without leading zeros, as an expression.
GrammarBuilder::ExprId integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi, GrammarBuilder& b);

}  // namespace splash::constrain
