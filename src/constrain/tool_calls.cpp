#include "constrain/tool_calls.h"

#include <set>

#include "constrain/json_schema.h"

namespace splash::constrain {

namespace {

using json = nlohmann::ordered_json;

json object_schema(const json& parameters) {
  if (parameters.is_null()) return json{{"type", "object"}};
  return parameters;
}

// One XML call: each declared parameter in order (required ones must appear); a string value is
// written raw up to "\n</parameter>", any other value as JSON of its schema.
Result<GrammarBuilder::ExprId> xml_call(const ToolSpec& tool, GrammarBuilder& b) {
  const json schema = object_schema(tool.parameters);
  std::vector<GrammarBuilder::ExprId> parts{b.literal("<tool_call>\n<function=" + tool.name + ">\n")};
  std::set<std::string> required;
  if (schema.contains("required") && schema["required"].is_array()) {
    for (const auto& r : schema["required"]) {
      if (r.is_string()) required.insert(r.get<std::string>());
    }
  }
  if (schema.contains("properties") && schema["properties"].is_object()) {
    for (auto it = schema["properties"].begin(); it != schema["properties"].end(); ++it) {
      const json& p = it.value();
      GrammarBuilder::ExprId value;
      if (p.is_object() && p.contains("type") && p["type"] == "string") {
        // Raw text: an enum's values, else anything up to the closing tag.
        for (auto k = p.begin(); k != p.end(); ++k) {
          if (k.key() != "type" && k.key() != "description" && k.key() != "title" && k.key() != "enum") {
            return make_error("tool '", tool.name, "' parameter '", it.key(), "': '", k.key(),
                              "' on a string cannot be enforced in this template's XML tool calls");
          }
        }
        if (p.contains("enum") && p["enum"].is_array()) {
          std::vector<GrammarBuilder::ExprId> values;
          for (const auto& v : p["enum"]) {
            if (!v.is_string()) return make_error("tool '", tool.name, "' parameter '", it.key(), "': enum values must be strings");
            values.push_back(b.literal(v.get<std::string>() + "\n</parameter>\n"));
          }
          value = b.alt(std::move(values));
        } else {
          value = b.until("\n</parameter>\n");
        }
      } else {
        JsonSchemaOptions o;
        o.whitespace = JsonWhitespace::kSpaced;
        auto rule = add_json_schema(p, b, o);
        if (!rule) return make_error("tool '", tool.name, "' parameter '", it.key(), "': ", rule.error().message);
        value = b.seq({b.ref(*rule), b.literal("\n</parameter>\n")});
      }
      auto block = b.seq({b.literal("<parameter=" + it.key() + ">\n"), value});
      parts.push_back(required.count(it.key()) ? block : b.optional(block));
    }
  }
  parts.push_back(b.literal("</function>\n</tool_call>"));
  return b.seq(std::move(parts));
}

Result<GrammarBuilder::ExprId> json_call(const ToolSpec& tool, GrammarBuilder& b) {
  JsonSchemaOptions o;
  o.whitespace = JsonWhitespace::kSpaced;
  auto args = add_json_schema(object_schema(tool.parameters), b, o);
  if (!args) return make_error("tool '", tool.name, "': ", args.error().message);
  return b.seq({b.literal("<tool_call>\n{\"name\": " + json(tool.name).dump() + ", \"arguments\": "), b.ref(*args),
                b.literal("}\n</tool_call>")});
}

}  // namespace

Result<int32_t> add_tool_calls(const std::vector<ToolSpec>& tools, ToolCallFormat format, bool parallel, GrammarBuilder& b) {
  if (tools.empty()) return make_error("no tools to call");
  std::vector<GrammarBuilder::ExprId> options;
  for (const ToolSpec& t : tools) {
    auto call = format == ToolCallFormat::kXml ? xml_call(t, b) : json_call(t, b);
    if (!call) return call.error();
    options.push_back(*call);
  }
  const int32_t one = b.declare_rule("tool_call");
  b.define_rule(one, b.alt(std::move(options)));
  const int32_t calls = b.declare_rule("tool_calls");
  b.define_rule(calls, parallel ? b.seq({b.ref(one), b.star(b.seq({b.literal("\n"), b.ref(one)}))}) : b.ref(one));
  return calls;
}

}  // namespace splash::constrain
