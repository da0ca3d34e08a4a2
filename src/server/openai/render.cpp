#include "server/openai/render.h"

namespace splash::openai {
namespace {

using ojson = nlohmann::ordered_json;

// `objects`: arguments given as a string holding an object go in as that object.
ojson message_context(const ChatMessage& m, bool objects) {
  ojson out = ojson::object();
  out["role"] = m.role;
  // Templates test and concatenate content as a string (Qwen3: `'</think>' in message.content`);
  // a null content (assistant turns that only call tools) becomes "".
  out["content"] = m.content.value_or("");
  if (m.reasoning_content) out["reasoning_content"] = *m.reasoning_content;
  if (!m.tool_calls.empty()) {
    ojson calls = ojson::array();
    for (const HistoryToolCall& c : m.tool_calls) {
      ojson call = ojson::object();
      if (!c.id.empty()) call["id"] = c.id;
      call["type"] = "function";
      call["function"]["name"] = c.name;
      call["function"]["arguments"] = objects && c.arguments_object ? *c.arguments_object : c.arguments;
      calls.push_back(std::move(call));
    }
    out["tool_calls"] = std::move(calls);
  }
  if (m.tool_call_id) out["tool_call_id"] = *m.tool_call_id;
  if (m.name) out["name"] = *m.name;
  return out;
}

std::optional<std::string> effort_fallback(const std::string& effort) {
  if (effort == "high" || effort == "max") return std::string("xhigh");
  if (effort == "minimal") return std::string("low");
  return std::nullopt;
}

bool has_string_object_arguments(const ChatRequest& request) {
  for (const ChatMessage& m : request.messages) {
    for (const HistoryToolCall& c : m.tool_calls) {
      if (c.arguments_object) return true;
    }
  }
  return false;
}

// One attempt at the arguments' form, with the effort fallback.
Result<std::string> render_with_effort(const ChatTemplate& tmpl, const ChatRequest& request,
                                       const TemplateExtras& extras, bool objects) {
  std::optional<std::string> effort = request.reasoning_effort ? request.reasoning_effort : extras.default_reasoning_effort;
  auto first = tmpl.render(chat_template_context(request, extras, effort, objects), extras.render_options);
  if (first.ok() || !effort) return first;
  // An effort set through chat_template_kwargs is the client's explicit choice: no fallback.
  if (request.chat_template_kwargs.contains("reasoning_effort")) return first;
  std::optional<std::string> fallback = effort_fallback(*effort);
  if (!fallback) return first;
  auto second = tmpl.render(chat_template_context(request, extras, fallback, objects), extras.render_options);
  if (second.ok()) return second;
  return first;
}

}  // namespace

nlohmann::ordered_json chat_template_context(const ChatRequest& request, const TemplateExtras& extras,
                                             const std::optional<std::string>& effort, bool objects) {
  ojson ctx = ojson::object();
  ojson messages = ojson::array();
  for (const ChatMessage& m : request.messages) messages.push_back(message_context(m, objects));
  ctx["messages"] = std::move(messages);
  if (!request.tools.empty()) {
    ojson tools = ojson::array();
    for (const Tool& t : request.tools) tools.push_back(t.definition);
    ctx["tools"] = std::move(tools);
  }
  ctx["add_generation_prompt"] = extras.add_generation_prompt;
  ctx["bos_token"] = extras.bos_token;
  ctx["eos_token"] = extras.eos_token;
  ctx["enable_thinking"] = !(effort && *effort == "none");
  if (effort) ctx["reasoning_effort"] = *effort;
  if (request.preserve_thinking) ctx["preserve_thinking"] = *request.preserve_thinking;
  for (const auto& [key, value] : request.chat_template_kwargs.items()) ctx[key] = value;
  return ctx;
}

Result<std::string> render_chat(const ChatTemplate& tmpl, const ChatRequest& request, const TemplateExtras& extras) {
  auto as_given = render_with_effort(tmpl, request, extras, /*objects=*/false);
  if (as_given.ok() || !has_string_object_arguments(request)) return as_given;
  auto objects = render_with_effort(tmpl, request, extras, /*objects=*/true);
  return objects.ok() ? objects : as_given;
}

bool prompt_opens_reasoning(std::string_view prompt) {
  auto open = prompt.rfind("<think>");
  if (open == std::string_view::npos) return false;
  return prompt.find("</think>", open) == std::string_view::npos;
}

}  // namespace splash::openai
