// ChatRequest -> prompt text through the model's chat template (spec 2.3).
//
// The template sees: `messages` (role, content as a string, reasoning_content, tool_calls with
// arguments as objects, tool_call_id, name), `tools` (the client's function tools, key order kept),
// `add_generation_prompt`, `bos_token`, `eos_token`, `enable_thinking` (false iff the effort is
// "none"), `reasoning_effort` (when known), `preserve_thinking` (when sent), and then every
// chat_template_kwargs entry on top (they outrank all of the above).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "server/openai/request.h"
#include "template/chat_template.h"

namespace splash::openai {

struct TemplateExtras {
  std::string bos_token;                             // the model's special token strings
  std::string eos_token;
  bool add_generation_prompt = true;
  std::optional<std::string> default_reasoning_effort;  // the server's default when the request sends none
  JinjaRenderOptions render_options;                 // fixed clock for strftime_now in tests
};

// The template context, as described above, for an effort of `effort` (nullopt: none known).
nlohmann::ordered_json chat_template_context(const ChatRequest& request, const TemplateExtras& extras,
                                             const std::optional<std::string>& effort);

// Renders the prompt. A template that rejects the effort (raise_exception) is tried once more with
// the spec's fallback (high/max -> xhigh, minimal -> low); the error of the first attempt is
// returned when that fails too.
Result<std::string> render_chat(const ChatTemplate& tmpl, const ChatRequest& request, const TemplateExtras& extras);

// True when the prompt leaves a `<think>` block open (templates that start the model's answer inside
// its reasoning, as Qwen3.5+ templates do with thinking on): the output then begins with reasoning
// and ReasoningSplitter must start inside it.
bool prompt_opens_reasoning(std::string_view prompt);

}  // namespace splash::openai
