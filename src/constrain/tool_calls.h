// The tool-call syntax of a chat template as a grammar, so a forced call (tool_choice "required" or a
// named function; Messages' tool_choice any / tool) names an offered tool and carries arguments that
// validate against its parameters schema.
//   kJson (Qwen3, Hermes):  <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   kXml (Qwen3.5 and later): <tool_call>\n<function=f>\n<parameter=p>\nvalue\n</parameter>\n</function>\n</tool_call>
// Several calls are separated by "\n" when parallel calls are allowed.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "constrain/grammar.h"
#include "core/result.h"

namespace splash::constrain {

enum class ToolCallFormat : uint8_t { kJson, kXml };

// Every call, in both formats, opens with this.
inline constexpr std::string_view kToolCallOpener = "<tool_call>";

struct ToolSpec {
  std::string name;
  nlohmann::ordered_json parameters;  // a JSON Schema for the arguments object; null = any object
};

// Adds the rules for one or more calls (`parallel`) of the given tools; returns the rule.
Result<int32_t> add_tool_calls(const std::vector<ToolSpec>& tools, ToolCallFormat format, bool parallel, GrammarBuilder& b);

}  // namespace splash::constrain
