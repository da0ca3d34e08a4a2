// Structured output for the OpenAI routes: an OutputConstraint (response_format, grammar, regex) ->
// a matcher the engine masks every token with (constrain/). Compile errors are 400s that name the
// field and what cannot be enforced.
#include "server/app/app.h"

namespace splash::app {

bool is_strict(const openai::Tool& t) {
  const auto& fn = t.definition.contains("function") ? t.definition["function"] : t.definition;
  return fn.is_object() && fn.contains("strict") && fn["strict"].is_boolean() && fn["strict"].get<bool>();
}

std::unique_ptr<constrain::ConstraintCompiler> make_constraint_compiler(const Tokenizer& tokenizer, int64_t n_vocab) {
  const Tokenizer* tok = &tokenizer;
  const int64_t width = std::max<int64_t>(n_vocab, tokenizer.n_vocab());
  return std::make_unique<constrain::ConstraintCompiler>([tok, width] {
    // Special tokens have no bytes a grammar could match; ids past the tokenizer's (padding rows of
    // the output matrix) neither.
    std::vector<std::string> bytes(static_cast<size_t>(width));
    for (int32_t id = 0; id < tok->n_vocab(); ++id) {
      if (!tok->is_special(id)) bytes[static_cast<size_t>(id)] = tok->token_to_piece(id);
    }
    return constrain::Vocabulary(std::move(bytes), tok->eog_ids());
  });
}

openai::ApiResult<std::shared_ptr<constrain::Matcher>> App::constraint_matcher(const openai::OutputConstraint& c,
                                                                               bool in_reasoning) {
  constrain::ConstraintSpec spec;
  using Kind = openai::OutputConstraint::Kind;
  spec.kind = c.kind == Kind::kJsonSchema ? constrain::ConstraintSpec::Kind::kJsonSchema
              : c.kind == Kind::kGbnf     ? constrain::ConstraintSpec::Kind::kGbnf
                                          : constrain::ConstraintSpec::Kind::kRegex;
  spec.text = c.text;
  spec.reasoning = in_reasoning ? constrain::ConstraintSpec::Reasoning::kInside : constrain::ConstraintSpec::Reasoning::kNone;
  auto m = constraints_->matcher(spec);
  if (!m.ok()) return openai::invalid_request(str_cat("'", c.field, "': ", m.error_message()));
  return *m;
}

openai::ApiResult<std::shared_ptr<constrain::Matcher>> App::tool_call_matcher(const openai::ChatRequest& chat,
                                                                              const std::optional<std::string>& only,
                                                                              bool in_reasoning, bool after_text) {
  const std::string_view source = deps_.chat_template ? deps_.chat_template->source() : std::string_view();
  if (source.find(constrain::kToolCallOpener) == std::string_view::npos) {
    if (after_text) {
      return openai::invalid_request(
          "'tools': 'strict': true cannot be enforced: this model's chat template writes no <tool_call>");
    }
    return openai::invalid_request("'tool_choice' cannot force a tool call: this model's chat template writes no <tool_call>");
  }
  constrain::ConstraintSpec spec;
  spec.kind = constrain::ConstraintSpec::Kind::kToolCalls;
  spec.tool_format = source.find("<function=") != std::string_view::npos ? constrain::ToolCallFormat::kXml
                                                                         : constrain::ToolCallFormat::kJson;
  spec.parallel_calls = chat.parallel_tool_calls && !only;
  spec.calls_after_text = after_text;
  spec.reasoning = in_reasoning ? constrain::ConstraintSpec::Reasoning::kInside : constrain::ConstraintSpec::Reasoning::kNone;
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const openai::Tool& t : chat.tools) {
    if (only && t.name != *only) continue;
    const auto& fn = t.definition.contains("function") ? t.definition["function"] : t.definition;
    const bool enforced = !after_text || is_strict(t);
    list.push_back({{"name", t.name}, {"parameters", enforced ? fn.value("parameters", nlohmann::ordered_json()) : nlohmann::ordered_json()}});
  }
  spec.text = list.dump();
  auto m = constraints_->matcher(spec);
  if (!m.ok()) return openai::invalid_request(str_cat("'tools': ", m.error_message()));
  return *m;
}

}  // namespace splash::app
