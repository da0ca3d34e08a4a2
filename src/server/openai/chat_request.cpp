// /v1/chat/completions body -> ChatRequest (spec 2.4, 2.5).
#include <algorithm>
#include <array>

#include "core/result.h"
#include "server/openai/json_input.h"
#include "server/openai/request_common.h"

namespace splash::openai {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::array<std::string_view, 7> kEfforts = {"none", "minimal", "low", "medium", "high", "xhigh", "max"};

std::string quote_path(std::string_view path) { return str_cat("'", path, "'"); }

// Content: a string, or an array of {type:"text", text} parts joined with "\n" (text-only models;
// Qwen3's template only prints string content).
ApiResult<std::optional<std::string>> parse_content(const FieldReader& r) {
  const ojson* v = r.get("content");
  if (v == nullptr) return std::optional<std::string>();
  if (v->is_string()) return std::optional<std::string>(v->get<std::string>());
  if (!v->is_array()) return invalid_request(str_cat(r.name("content"), " must be a string or an array of content parts"));
  std::string text;
  for (std::size_t j = 0; j < v->size(); ++j) {
    const ojson& part = (*v)[j];
    std::string part_path = index_path(r.path("content"), j);
    if (!part.is_object()) return invalid_request(str_cat(quote_path(part_path), " must be an object"));
    FieldReader pr(part, part_path);
    SPLASH_OAI_TRY(auto type, pr.string("type"));
    if (!type) return invalid_request(str_cat(pr.name("type"), " is required"));
    if (*type == "image_url" || *type == "input_image" || *type == "image") {
      return invalid_request("images are not supported by this model");
    }
    if (*type != "text" && *type != "input_text") {
      return invalid_request(str_cat(pr.name("type"), " '", *type, "' is not supported (only text parts are)"));
    }
    SPLASH_OAI_TRY(auto part_text, pr.string("text"));
    if (!part_text) return invalid_request(str_cat(pr.name("text"), " is required"));
    if (j > 0) text += '\n';
    text += *part_text;
  }
  return std::optional<std::string>(std::move(text));
}

ApiResult<std::vector<HistoryToolCall>> parse_history_tool_calls(const FieldReader& r) {
  std::vector<HistoryToolCall> calls;
  const ojson* v = r.get("tool_calls");
  if (v == nullptr) return calls;
  if (!v->is_array()) return invalid_request(str_cat(r.name("tool_calls"), " must be an array"));
  for (std::size_t k = 0; k < v->size(); ++k) {
    const ojson& call = (*v)[k];
    std::string call_path = index_path(r.path("tool_calls"), k);
    if (!call.is_object()) return invalid_request(str_cat(quote_path(call_path), " must be an object"));
    FieldReader cr(call, call_path);
    HistoryToolCall out;
    SPLASH_OAI_TRY(auto id, cr.string("id"));
    out.id = id.value_or("");
    SPLASH_OAI_TRY(auto type, cr.string("type"));
    if (type && *type != "function") return invalid_request(str_cat(cr.name("type"), " must be \"function\""));
    const ojson* fn = cr.get("function");
    if (fn == nullptr || !fn->is_object()) return invalid_request(str_cat(cr.name("function"), " must be an object"));
    FieldReader fr(*fn, cr.path("function"));
    SPLASH_OAI_TRY(auto name, fr.string("name"));
    if (!name) return invalid_request(str_cat(fr.name("name"), " is required"));
    out.name = *name;
    const ojson* args = fr.get("arguments");
    if (args == nullptr) {
      out.arguments = ojson::object();
    } else if (args->is_object()) {
      out.arguments = *args;
    } else if (args->is_string()) {
      out.arguments = *args;
      auto parsed = parse_json(args->get_ref<const std::string&>(), fr.name("arguments"));
      if (parsed.ok() && parsed->is_object()) out.arguments_object = std::move(parsed).value();
    } else {
      return invalid_request(str_cat(fr.name("arguments"), " must be a string or an object"));
    }
    calls.push_back(std::move(out));
  }
  return calls;
}

ApiResult<std::vector<ChatMessage>> parse_messages(const FieldReader& top) {
  const ojson* v = top.get("messages");
  if (v == nullptr) return invalid_request("'messages' is required");
  if (!v->is_array() || v->empty()) return invalid_request("'messages' must be a non-empty array");
  std::vector<ChatMessage> messages;
  messages.reserve(v->size());
  for (std::size_t i = 0; i < v->size(); ++i) {
    const ojson& m = (*v)[i];
    std::string path = index_path("messages", i);
    if (!m.is_object()) return invalid_request(str_cat(quote_path(path), " must be an object"));
    FieldReader r(m, path);
    ChatMessage msg;
    SPLASH_OAI_TRY(auto role, r.string("role"));
    if (!role) return invalid_request(str_cat(r.name("role"), " is required"));
    // "developer" is OpenAI's newer name for the system role.
    msg.role = *role == "developer" ? "system" : *role;
    if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool") {
      return invalid_request(str_cat(r.name("role"), " must be one of system, user, assistant, tool; got '", *role, "'"));
    }
    SPLASH_OAI_TRY(msg.content, parse_content(r));
    SPLASH_OAI_TRY(msg.name, r.string("name"));
    if (msg.role == "assistant") {
      SPLASH_OAI_TRY(msg.reasoning_content, r.string("reasoning_content"));
      SPLASH_OAI_TRY(msg.tool_calls, parse_history_tool_calls(r));
    } else if (!msg.content) {
      return invalid_request(str_cat(r.name("content"), " is required for role '", msg.role, "'"));
    }
    if (msg.role == "tool") {
      SPLASH_OAI_TRY(msg.tool_call_id, r.string("tool_call_id"));
    }
    messages.push_back(std::move(msg));
  }
  return messages;
}

ApiResult<std::vector<Tool>> parse_tools(const FieldReader& top) {
  std::vector<Tool> tools;
  const ojson* v = top.get("tools");
  if (v == nullptr) return tools;
  if (!v->is_array()) return invalid_request("'tools' must be an array");
  for (std::size_t i = 0; i < v->size(); ++i) {
    const ojson& t = (*v)[i];
    std::string path = index_path("tools", i);
    if (!t.is_object()) return invalid_request(str_cat(quote_path(path), " must be an object"));
    FieldReader r(t, path);
    SPLASH_OAI_TRY(auto type, r.string("type"));
    if (!type) return invalid_request(str_cat(r.name("type"), " is required"));
    if (*type != "function") {
      return invalid_request(str_cat(r.name("type"), " '", *type, "' is not supported (only function tools are)"));
    }
    const ojson* fn = r.get("function");
    if (fn == nullptr || !fn->is_object()) return invalid_request(str_cat(r.name("function"), " must be an object"));
    FieldReader fr(*fn, r.path("function"));
    SPLASH_OAI_TRY(auto name, fr.string("name"));
    if (!name || name->empty()) return invalid_request(str_cat(fr.name("name"), " must be a non-empty string"));
    SPLASH_OAI_TRY(auto description, fr.string("description"));
    (void)description;
    const ojson* params = fr.get("parameters");
    if (params != nullptr && !params->is_object()) {
      return invalid_request(str_cat(fr.name("parameters"), " must be a JSON schema object"));
    }
    SPLASH_OAI_TRY(auto strict, fr.boolean("strict"));
    (void)strict;  // accepted; calls are not validated against the schema (spec 2.5)
    for (const Tool& earlier : tools) {
      if (earlier.name == *name) return invalid_request(str_cat(fr.name("name"), " '", *name, "' is declared twice"));
    }
    tools.push_back(Tool{*name, t});
  }
  return tools;
}

ApiResult<ToolChoice> parse_tool_choice(const FieldReader& top, const std::vector<Tool>& tools) {
  ToolChoice choice;
  const ojson* v = top.get("tool_choice");
  if (v == nullptr) return choice;
  if (v->is_string()) return parse_tool_choice_string(v->get_ref<const std::string&>(), tools, "a function object");
  if (!v->is_object()) return invalid_request("'tool_choice' must be a string or an object");
  FieldReader r(*v, "tool_choice");
  const ojson* fn = r.get("function");
  SPLASH_OAI_TRY(auto name, fn != nullptr && fn->is_object() ? FieldReader(*fn, "tool_choice.function").string("name")
                                                             : ApiResult<std::optional<std::string>>(std::nullopt));
  if (!name) return invalid_request("'tool_choice.function.name' is required");
  bool known = std::any_of(tools.begin(), tools.end(), [&](const Tool& t) { return t.name == *name; });
  if (!known) return invalid_request(str_cat("'tool_choice.function.name' '", *name, "' is not one of 'tools'"));
  choice.mode = ToolChoice::Mode::kFunction;
  choice.function = *name;
  return choice;
}

}  // namespace

bool is_reasoning_effort(std::string_view effort) {
  return std::find(kEfforts.begin(), kEfforts.end(), effort) != kEfforts.end();
}

ApiResult<ChatRequest> parse_chat_request(const nlohmann::ordered_json& body) {
  if (!body.is_object()) return invalid_request("request body must be a JSON object");
  FieldReader r(body, "");
  ChatRequest req;
  SPLASH_OAI_TRY(req.common, parse_common_fields(r));
  SPLASH_OAI_TRY(req.messages, parse_messages(r));
  SPLASH_OAI_TRY(req.tools, parse_tools(r));
  SPLASH_OAI_TRY(req.tool_choice, parse_tool_choice(r, req.tools));
  SPLASH_OAI_TRY(auto parallel, r.boolean("parallel_tool_calls"));
  req.parallel_tool_calls = parallel.value_or(true);
  SPLASH_OAI_TRY(req.reasoning_effort, r.string("reasoning_effort"));
  if (req.reasoning_effort && !is_reasoning_effort(*req.reasoning_effort)) {
    return invalid_request("'reasoning_effort' must be one of none, minimal, low, medium, high, xhigh, max");
  }
  if (const ojson* kw = r.get("chat_template_kwargs")) {
    if (!kw->is_object()) return invalid_request("'chat_template_kwargs' must be an object");
    for (const char* reserved : {"messages", "tools"}) {
      if (kw->contains(reserved)) {
        return invalid_request(str_cat("'chat_template_kwargs.", reserved, "' cannot be set; send '", reserved, "' itself"));
      }
    }
    req.chat_template_kwargs = *kw;
  }
  SPLASH_OAI_TRY(req.preserve_thinking, r.boolean("preserve_thinking"));
  SPLASH_OAI_TRY(auto max_completion, r.integer("max_completion_tokens"));
  SPLASH_OAI_TRY(auto max_tokens, r.integer("max_tokens"));
  if (max_completion && *max_completion <= 0) return invalid_request("'max_completion_tokens' must be greater than 0");
  if (max_tokens && *max_tokens <= 0) return invalid_request("'max_tokens' must be greater than 0");
  req.max_tokens = max_completion ? max_completion : max_tokens;
  SPLASH_OAI_TRY(auto logprobs, r.boolean("logprobs"));
  SPLASH_OAI_TRY(auto top_logprobs, r.integer("top_logprobs"));
  if (top_logprobs && (*top_logprobs < 0 || *top_logprobs > 20))
    return invalid_request("'top_logprobs' must be an integer from 0 to 20");
  if (top_logprobs && *top_logprobs > 0 && !logprobs.value_or(false))
    return invalid_request("'top_logprobs' needs 'logprobs': true");
  if (logprobs.value_or(false)) req.common.logprobs = static_cast<int>(top_logprobs.value_or(0));
  if (!req.common.stop.empty() && req.tools_callable()) {
    // Spec 2.4: a stop string could cut a tool call in half.
    return invalid_request("'stop' cannot be combined with callable 'tools'");
  }
  return req;
}

ApiResult<ChatRequest> parse_chat_request(std::string_view body) {
  SPLASH_OAI_TRY(auto json, parse_json(body));
  return parse_chat_request(json);
}

}  // namespace splash::openai
