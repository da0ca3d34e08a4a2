// ChatRequest -> prompt text through the model's chat template (spec 2.3).
//
// The template sees: `messages` (role, content as a string, reasoning_content, tool_calls with
// their arguments as the client sent them, tool_call_id, name), `tools` (the client's function tools, key order kept),
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
// `objects`: tool-call arguments sent as a string holding a JSON object go in as that object.
nlohmann::ordered_json chat_template_context(const ChatRequest& request, const TemplateExtras& extras,
                                             const std::optional<std::string>& effort, bool objects = false);

// Renders the prompt. Tool-call arguments go in as the client sent them (Hugging Face's
// apply_chat_template passes messages unchanged; Qwen3's template prints a string verbatim, so the
// prompt holds the bytes the client saw and an agent's next turn re-renders its history exactly).
// A template that fails on such a string (one that iterates the arguments with |items) is rendered
// once more with the strings parsed into objects. A template that rejects the effort
// (raise_exception) is tried once more with the spec's fallback (high/max -> xhigh, minimal -> low).
// The error of the first attempt is returned when the retries fail too.
Result<std::string> render_chat(const ChatTemplate& tmpl, const ChatRequest& request, const TemplateExtras& extras);

// True when the prompt leaves a `<think>` block open (templates that start the model's answer inside
// its reasoning, as Qwen3.5+ templates do with thinking on): the output then begins with reasoning
// and ReasoningSplitter must start inside it.
bool prompt_opens_reasoning(std::string_view prompt);

}  // namespace splash::openai
