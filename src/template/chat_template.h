// Chat rendering: a model's own Jinja chat template applied to an OpenAI-style conversation.
//
// The context is passed through to the template unchanged (no per-model rewriting): `messages`
// (role, content as a string or a list of parts, reasoning_content, tool_calls
// [{type, function{name, arguments (object or JSON string)}}], tool_call_id, name), `tools`,
// `add_generation_prompt`, `enable_thinking`, `bos_token`, `eos_token`, and any extra
// chat_template_kwargs at the top level. Output matches @huggingface/jinja byte for byte.
//
// Parse once per model; render() is const and thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "template/jinja.h"

namespace splash {

class ChatTemplate {
 public:
  // Fails (naming the construct and line) for templates using anything the engine lacks.
  static Result<ChatTemplate> parse(std::string source);

  // Prefer the ordered_json overload: it keeps the key order of tool schemas as the client sent
  // them, which `tojson` prints. nlohmann::json has already sorted keys alphabetically.
  Result<std::string> render(const nlohmann::ordered_json& context,
                             const JinjaRenderOptions& options = {}) const;
  Result<std::string> render(const nlohmann::json& context, const JinjaRenderOptions& options = {}) const;

  const std::string& source() const { return template_.source(); }

 private:
  explicit ChatTemplate(JinjaTemplate t) : template_(std::move(t)) {}
  JinjaTemplate template_;
};

}  // namespace splash
