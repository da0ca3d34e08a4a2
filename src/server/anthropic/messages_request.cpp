// /v1/messages body -> MessagesRequest (spec 2.3-2.5; shapes from Anthropic's Messages API).
#include "server/anthropic/messages_request.h"

#include "core/result.h"
#include "server/openai/field_reader.h"
#include "server/openai/json_input.h"
#include "server/openai/request_common.h"

namespace splash::anthropic {
namespace {

using ojson = nlohmann::ordered_json;
using openai::ApiResult;
using openai::FieldReader;
using openai::index_path;
using openai::invalid_request;

std::string quote_field(std::string_view path) { return str_cat("'", path, "'"); }

// Block types that carry something other than text: refused by name (a text-only model, no files).
bool is_media_block(std::string_view type) {
  return type == "image" || type == "document" || type == "search_result" || type == "container_upload";
}

ApiResult<std::string> block_type(const FieldReader& br) {
  SPLASH_OAI_TRY(auto type, br.string("type"));
  if (!type) return invalid_request(str_cat(br.name("type"), " is required"));
  if (is_media_block(*type))
    return invalid_request(str_cat(br.name("type"), " '", *type, "' is not supported: this model reads text only"));
  return *type;
}

// Text of a string or an array of text blocks (system, tool_result content).
ApiResult<std::string> text_of(const ojson& v, const std::string& path) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) return invalid_request(str_cat(quote_field(path), " must be a string or an array of text blocks"));
  std::string text;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string p = index_path(path, i);
    if (!v[i].is_object()) return invalid_request(str_cat(quote_field(p), " must be an object"));
    FieldReader br(v[i], p);
    SPLASH_OAI_TRY(auto type, block_type(br));
    if (type != "text") return invalid_request(str_cat(br.name("type"), " '", type, "' is not supported here (only text blocks are)"));
    SPLASH_OAI_TRY(auto t, br.string("text"));
    if (!t) return invalid_request(str_cat(br.name("text"), " is required"));
    if (i > 0) text += '\n';
    text += *t;
  }
  return text;
}

// One Anthropic message -> one or more chat messages, appended to `out`.
ApiResult<openai::Ok> convert_message(const ojson& m, const std::string& path, std::vector<openai::ChatMessage>& out) {
  if (!m.is_object()) return invalid_request(str_cat(quote_field(path), " must be an object"));
  FieldReader mr(m, path);
  SPLASH_OAI_TRY(auto role, mr.string("role"));
  if (!role) return invalid_request(str_cat(mr.name("role"), " is required"));
  // "system" inside messages is not in Anthropic's published API, but Claude Code (2.1.x) sends its
  // environment notes that way; it becomes a system turn (text only) where it stands.
  if (*role != "user" && *role != "assistant" && *role != "system")
    return invalid_request(
        str_cat(mr.name("role"), " must be \"user\", \"assistant\" or \"system\", got \"", *role, "\""));
  const ojson* content = mr.get("content");
  if (content == nullptr) return invalid_request(str_cat(mr.name("content"), " is required"));
  if (content->is_string()) {
    openai::ChatMessage cm;
    cm.role = *role;
    cm.content = content->get<std::string>();
    out.push_back(std::move(cm));
    return openai::Ok{};
  }
  if (!content->is_array()) return invalid_request(str_cat(mr.name("content"), " must be a string or an array of content blocks"));

  std::optional<openai::ChatMessage> open;  // the user / assistant message being filled
  auto current = [&]() -> openai::ChatMessage& {
    if (!open) {
      open.emplace();
      open->role = *role;
    }
    return *open;
  };
  auto append = [](std::optional<std::string>& to, const std::string& text) {
    if (to) *to += "\n" + text;
    else to = text;
  };
  for (std::size_t i = 0; i < content->size(); ++i) {
    const std::string p = index_path(mr.path("content"), i);
    const ojson& b = (*content)[i];
    if (!b.is_object()) return invalid_request(str_cat(quote_field(p), " must be an object"));
    FieldReader br(b, p);
    SPLASH_OAI_TRY(auto type, block_type(br));
    if (type == "text") {
      SPLASH_OAI_TRY(auto t, br.string("text"));
      if (!t) return invalid_request(str_cat(br.name("text"), " is required"));
      append(current().content, *t);
    } else if (type == "tool_result" && *role == "user") {
      SPLASH_OAI_TRY(auto id, br.string("tool_use_id"));
      if (!id) return invalid_request(str_cat(br.name("tool_use_id"), " is required"));
      std::string text;
      if (const ojson* c = br.get("content")) {
        SPLASH_OAI_TRY(text, text_of(*c, br.path("content")));
      }
      SPLASH_OAI_TRY(auto is_error, br.boolean("is_error"));
      if (is_error.value_or(false)) text = "Error: " + text;
      if (open) {  // text before the result stays before it
        out.push_back(std::move(*open));
        open.reset();
      }
      openai::ChatMessage tm;
      tm.role = "tool";
      tm.content = std::move(text);
      tm.tool_call_id = *id;
      out.push_back(std::move(tm));
    } else if (type == "tool_use" && *role == "assistant") {
      SPLASH_OAI_TRY(auto id, br.string("id"));
      SPLASH_OAI_TRY(auto name, br.string("name"));
      if (!name) return invalid_request(str_cat(br.name("name"), " is required"));
      const ojson* input = br.get("input");
      if (input != nullptr && !input->is_object()) return invalid_request(str_cat(br.name("input"), " must be an object"));
      openai::HistoryToolCall call;
      call.id = id.value_or("");
      call.name = *name;
      call.arguments = input ? *input : ojson::object();
      current().tool_calls.push_back(std::move(call));
    } else if (type == "thinking" && *role == "assistant") {
      SPLASH_OAI_TRY(auto t, br.string("thinking"));
      if (!t) return invalid_request(str_cat(br.name("thinking"), " is required"));
      append(current().reasoning_content, *t);
    } else if (type == "redacted_thinking" && *role == "assistant") {
      continue;  // opaque by design (see the header)
    } else {
      return invalid_request(str_cat(br.name("type"), " '", type, "' is not supported in a",
                                     *role == "assistant" ? "n " : " ", *role, " message"));
    }
  }
  if (open) out.push_back(std::move(*open));
  // An empty block list still makes a turn (the template sees an empty message).
  if (content->empty()) {
    openai::ChatMessage cm;
    cm.role = *role;
    cm.content = "";
    out.push_back(std::move(cm));
  }
  return openai::Ok{};
}

ApiResult<std::vector<openai::Tool>> parse_tools(const FieldReader& r) {
  std::vector<openai::Tool> tools;
  const ojson* v = r.get("tools");
  if (v == nullptr) return tools;
  if (!v->is_array()) return invalid_request(str_cat(r.name("tools"), " must be an array"));
  for (std::size_t i = 0; i < v->size(); ++i) {
    const std::string p = index_path(r.path("tools"), i);
    if (!(*v)[i].is_object()) return invalid_request(str_cat(quote_field(p), " must be an object"));
    FieldReader tr((*v)[i], p);
    SPLASH_OAI_TRY(auto type, tr.string("type"));
    if (type && *type != "custom")
      return invalid_request(str_cat(tr.name("type"), " '", *type, "' is not supported: only client tools (name, description, input_schema) are"));
    SPLASH_OAI_TRY(auto name, tr.string("name"));
    if (!name || name->empty()) return invalid_request(str_cat(tr.name("name"), " is required"));
    SPLASH_OAI_TRY(auto description, tr.string("description"));
    const ojson* schema = tr.get("input_schema");
    if (schema == nullptr || !schema->is_object()) return invalid_request(str_cat(tr.name("input_schema"), " must be an object"));
    ojson fn = ojson::object();
    fn["name"] = *name;
    if (description) fn["description"] = *description;
    fn["parameters"] = *schema;
    openai::Tool t;
    t.name = *name;
    t.definition = ojson::object();
    t.definition["type"] = "function";
    t.definition["function"] = std::move(fn);
    tools.push_back(std::move(t));
  }
  return tools;
}

ApiResult<ToolChoice> parse_tool_choice(const FieldReader& r, const std::vector<openai::Tool>& tools) {
  ToolChoice c;
  const ojson* v = r.get("tool_choice");
  if (v == nullptr) return c;
  if (!v->is_object()) return invalid_request(str_cat(r.name("tool_choice"), " must be an object"));
  FieldReader cr(*v, r.path("tool_choice"));
  SPLASH_OAI_TRY(auto type, cr.string("type"));
  if (!type) return invalid_request(str_cat(cr.name("type"), " is required"));
  if (*type == "auto") c.mode = ToolChoice::Mode::kAuto;
  else if (*type == "any") c.mode = ToolChoice::Mode::kAny;
  else if (*type == "none") c.mode = ToolChoice::Mode::kNone;
  else if (*type == "tool") c.mode = ToolChoice::Mode::kTool;
  else return invalid_request(str_cat(cr.name("type"), " must be one of auto, any, tool, none"));
  if (c.mode == ToolChoice::Mode::kTool) {
    SPLASH_OAI_TRY(auto name, cr.string("name"));
    if (!name) return invalid_request(str_cat(cr.name("name"), " is required when the type is \"tool\""));
    bool known = false;
    for (const openai::Tool& t : tools) known = known || t.name == *name;
    if (!known) return invalid_request(str_cat(cr.name("name"), " '", *name, "' is not one of the request's tools"));
    c.name = *name;
  }
  if ((c.mode == ToolChoice::Mode::kAny || c.mode == ToolChoice::Mode::kTool) && tools.empty())
    return invalid_request(str_cat(cr.name("type"), " '", *type, "' needs 'tools'"));
  SPLASH_OAI_TRY(auto no_parallel, cr.boolean("disable_parallel_tool_use"));
  c.disable_parallel_tool_use = no_parallel.value_or(false);
  return c;
}

ApiResult<std::vector<std::string>> parse_stop_sequences(const FieldReader& r) {
  std::vector<std::string> stop;
  const ojson* v = r.get("stop_sequences");
  if (v == nullptr) return stop;
  if (!v->is_array()) return invalid_request(str_cat(r.name("stop_sequences"), " must be an array of strings"));
  if (v->size() > 4) return invalid_request(str_cat(r.name("stop_sequences"), " may hold at most 4 strings, got ", v->size()));
  for (std::size_t i = 0; i < v->size(); ++i) {
    const ojson& s = (*v)[i];
    if (!s.is_string() || s.get_ref<const std::string&>().empty())
      return invalid_request(str_cat(quote_field(index_path(r.path("stop_sequences"), i)), " must be a non-empty string"));
    stop.push_back(s.get<std::string>());
  }
  return stop;
}

// thinking and output_config -> whether the model reasons, and at which effort.
ApiResult<openai::Ok> parse_thinking(const FieldReader& r, MessagesRequest& out) {
  std::string effort = "high";
  if (const ojson* oc = r.get("output_config")) {
    if (!oc->is_object()) return invalid_request(str_cat(r.name("output_config"), " must be an object"));
    FieldReader ocr(*oc, r.path("output_config"));
    if (ocr.get("format") != nullptr)
      return invalid_request(str_cat(ocr.name("format"), " is not supported: this build has no grammar engine for structured output"));
    SPLASH_OAI_TRY(auto e, ocr.string("effort"));
    if (e) {
      if (!openai::is_reasoning_effort(*e) || *e == "none")
        return invalid_request(str_cat(ocr.name("effort"), " must be one of minimal, low, medium, high, xhigh, max"));
      effort = *e;
    }
  }
  if (const ojson* t = r.get("thinking")) {
    if (!t->is_object()) return invalid_request(str_cat(r.name("thinking"), " must be an object"));
    FieldReader tr(*t, r.path("thinking"));
    SPLASH_OAI_TRY(auto type, tr.string("type"));
    if (!type) return invalid_request(str_cat(tr.name("type"), " is required"));
    if (*type == "enabled" || *type == "adaptive") out.thinking = true;
    else if (*type != "disabled") return invalid_request(str_cat(tr.name("type"), " must be enabled, adaptive or disabled"));
    // budget_tokens is accepted and not enforced (spec 2.3).
  }
  out.chat.reasoning_effort = out.thinking ? effort : std::string("none");
  return openai::Ok{};
}

}  // namespace

ApiResult<MessagesRequest> parse_messages_request(std::string_view body, bool count_tokens) {
  SPLASH_OAI_TRY(ojson j, openai::parse_json(body));
  if (!j.is_object()) return invalid_request("the request body must be a JSON object");
  FieldReader r(j, "");
  MessagesRequest out;
  // stream, return_progress, timeout, priority, cache_prompt, temperature, top_p, top_k, seed ...
  SPLASH_OAI_TRY(out.chat.common, openai::parse_common_fields(r));
  if (!out.chat.common.model || out.chat.common.model->empty()) return invalid_request("'model' is required");
  out.model = *out.chat.common.model;
  if (count_tokens) out.chat.common.stream = false;
  SPLASH_OAI_TRY(out.max_tokens, r.integer("max_tokens"));
  if (!out.max_tokens && !count_tokens) return invalid_request("'max_tokens' is required");
  if (out.max_tokens && *out.max_tokens < 1)
    return invalid_request(str_cat("'max_tokens' must be >= 1, got ", *out.max_tokens));
  out.chat.max_tokens = out.max_tokens;
  if (r.get("mcp_servers") != nullptr) return invalid_request("'mcp_servers' is not supported");
  if (r.get("container") != nullptr) return invalid_request("'container' is not supported");
  if (const ojson* md = r.get("metadata"); md != nullptr && !md->is_object())
    return invalid_request("'metadata' must be an object");

  if (const ojson* system = r.get("system")) {
    SPLASH_OAI_TRY(auto text, text_of(*system, "system"));
    openai::ChatMessage sm;
    sm.role = "system";
    sm.content = std::move(text);
    out.chat.messages.push_back(std::move(sm));
  }
  const ojson* messages = r.get("messages");
  if (messages == nullptr || !messages->is_array() || messages->empty())
    return invalid_request("'messages' must be a non-empty array");
  for (std::size_t i = 0; i < messages->size(); ++i) {
    SPLASH_OAI_TRY(auto ok, convert_message((*messages)[i], index_path("messages", i), out.chat.messages));
    (void)ok;
  }
  const ojson& last = messages->back();
  if (last.is_object() && last.value("role", "") == "assistant")
    return invalid_request(str_cat("'", index_path("messages", messages->size() - 1),
                                   "' is an assistant message: continuing a prefilled answer is not supported; end with a user message"));

  SPLASH_OAI_TRY(out.chat.tools, parse_tools(r));
  SPLASH_OAI_TRY(out.tool_choice, parse_tool_choice(r, out.chat.tools));
  if (out.tool_choice.mode == ToolChoice::Mode::kNone) out.chat.tool_choice.mode = openai::ToolChoice::Mode::kNone;
  out.chat.parallel_tool_calls = !out.tool_choice.disable_parallel_tool_use;
  SPLASH_OAI_TRY(auto stop, parse_stop_sequences(r));
  for (std::string& s : stop) out.chat.common.stop.push_back(std::move(s));
  if (out.chat.common.stop.size() > 4) return invalid_request("'stop_sequences' may hold at most 4 strings");
  if (!out.chat.common.stop.empty() && out.chat.tools_callable())
    return invalid_request("'stop_sequences' cannot be combined with callable 'tools' (a stop sequence could cut a tool call in half)");
  SPLASH_OAI_TRY(auto ok, parse_thinking(r, out));
  (void)ok;
  const bool forced = out.tool_choice.mode == ToolChoice::Mode::kAny || out.tool_choice.mode == ToolChoice::Mode::kTool;
  if (forced && out.thinking)
    return invalid_request("'tool_choice' any/tool cannot be combined with 'thinking' enabled (a forced tool call skips the reasoning)");
  return out;
}

}  // namespace splash::anthropic
