// /v1/responses body -> ResponsesRequest -> ChatRequest (spec 2.4, 2.5).
#include "server/openai/responses_request.h"

#include <algorithm>

#include "core/result.h"
#include "server/openai/json_input.h"
#include "server/openai/request_common.h"

namespace splash::openai {
namespace {

using ojson = nlohmann::ordered_json;

std::string rsp_quoted(std::string_view path) { return str_cat("'", path, "'"); }

// Text of a content array (or string): input_text / output_text parts joined without separator, as
// the Responses API concatenates parts of one message. Images and files are refused.
ApiResult<std::string> rsp_text_parts(const ojson& v, const std::string& path) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) return invalid_request(str_cat(rsp_quoted(path), " must be a string or an array of content parts"));
  std::string text;
  for (std::size_t j = 0; j < v.size(); ++j) {
    const ojson& part = v[j];
    std::string part_path = index_path(path, j);
    if (!part.is_object()) return invalid_request(str_cat(rsp_quoted(part_path), " must be an object"));
    FieldReader pr(part, part_path);
    SPLASH_OAI_TRY(auto type, pr.string("type"));
    if (!type) return invalid_request(str_cat(pr.name("type"), " is required"));
    if (*type == "input_image") return invalid_request(str_cat(pr.name("type"), ": images are not supported by this model"));
    if (*type == "input_file") return invalid_request(str_cat(pr.name("type"), ": files are not supported"));
    if (*type != "input_text" && *type != "output_text" && *type != "text") {
      return invalid_request(str_cat(pr.name("type"), " '", *type, "' is not supported (input_text and output_text are)"));
    }
    SPLASH_OAI_TRY(auto part_text, pr.string("text"));
    if (!part_text) return invalid_request(str_cat(pr.name("text"), " is required"));
    text += *part_text;
  }
  return text;
}

// Reasoning item text: its reasoning_text content when given, else its summaries joined by blank lines.
ApiResult<std::string> rsp_reasoning_text(const FieldReader& r) {
  std::string text;
  for (const char* key : {"content", "summary"}) {
    const ojson* v = r.get(key);
    if (v == nullptr) continue;
    if (!v->is_array()) return invalid_request(str_cat(r.name(key), " must be an array"));
    for (std::size_t j = 0; j < v->size(); ++j) {
      std::string part_path = index_path(r.path(key), j);
      if (!(*v)[j].is_object()) return invalid_request(str_cat(rsp_quoted(part_path), " must be an object"));
      SPLASH_OAI_TRY(auto part_text, FieldReader((*v)[j], part_path).string("text"));
      if (!part_text) return invalid_request(str_cat(rsp_quoted(part_path + ".text"), " is required"));
      if (!text.empty()) text += "\n\n";
      text += *part_text;
    }
    if (!text.empty()) break;  // content outranks the summary
  }
  return text;
}

// Converts the items in order; see the header for the rules.
class ItemConverter {
 public:
  std::vector<ChatMessage> messages;

  ApiResult<Ok> item(const ojson& item, const std::string& path) {
    if (!item.is_object()) return invalid_request(str_cat(rsp_quoted(path), " must be an object"));
    FieldReader r(item, path);
    SPLASH_OAI_TRY(auto type, r.string("type"));
    // EasyInputMessage: {role, content} without a type.
    const std::string t = type.value_or("message");
    if (t == "message") return message(r);
    if (t == "reasoning") {
      SPLASH_OAI_TRY(std::string text, rsp_reasoning_text(r));
      if (!pending_reasoning_.empty() && !text.empty()) pending_reasoning_ += "\n\n";
      pending_reasoning_ += text;
      return Ok{};
    }
    if (t == "function_call") return function_call(r);
    if (t == "function_call_output") {
      SPLASH_OAI_TRY(auto call_id, r.string("call_id"));
      if (!call_id) return invalid_request(str_cat(r.name("call_id"), " is required"));
      const ojson* out = r.get("output");
      if (out == nullptr) return invalid_request(str_cat(r.name("output"), " is required"));
      SPLASH_OAI_TRY(std::string text, rsp_text_parts(*out, r.path("output")));
      flush_reasoning();
      ChatMessage m;
      m.role = "tool";
      m.content = std::move(text);
      m.tool_call_id = *call_id;
      messages.push_back(std::move(m));
      return Ok{};
    }
    return invalid_request(str_cat(r.name("type"), " '", t,
                                   "' is not supported (message, reasoning, function_call and function_call_output are)"));
  }

  // A reasoning item with nothing after it becomes an assistant turn of its own.
  void finish() { flush_reasoning(); }

 private:
  ApiResult<Ok> message(const FieldReader& r) {
    SPLASH_OAI_TRY(auto role, r.string("role"));
    if (!role) return invalid_request(str_cat(r.name("role"), " is required"));
    if (*role != "user" && *role != "assistant" && *role != "system" && *role != "developer") {
      return invalid_request(str_cat(r.name("role"), " must be one of user, assistant, system, developer; got '", *role, "'"));
    }
    const ojson* content = r.get("content");
    if (content == nullptr) return invalid_request(str_cat(r.name("content"), " is required"));
    SPLASH_OAI_TRY(std::string text, rsp_text_parts(*content, r.path("content")));
    if (*role == "assistant") {
      ChatMessage& m = open_assistant(/*join=*/false);
      m.content = m.content.value_or("") + text;
      return Ok{};
    }
    flush_reasoning();
    ChatMessage m;
    m.role = *role == "developer" ? "system" : *role;
    m.content = std::move(text);
    messages.push_back(std::move(m));
    return Ok{};
  }

  ApiResult<Ok> function_call(const FieldReader& r) {
    SPLASH_OAI_TRY(auto call_id, r.string("call_id"));
    if (!call_id) return invalid_request(str_cat(r.name("call_id"), " is required"));
    SPLASH_OAI_TRY(auto name, r.string("name"));
    if (!name || name->empty()) return invalid_request(str_cat(r.name("name"), " must be a non-empty string"));
    SPLASH_OAI_TRY(auto ns, r.string("namespace"));
    SPLASH_OAI_TRY(auto args, r.string("arguments"));
    HistoryToolCall call;
    call.id = *call_id;
    call.name = flat_tool_name(ns.value_or(""), *name);
    call.arguments = args.value_or("{}");
    auto parsed = parse_json(call.arguments.get_ref<const std::string&>(), r.name("arguments"));
    if (parsed.ok() && parsed->is_object()) call.arguments_object = std::move(parsed).value();
    open_assistant(/*join=*/true).tool_calls.push_back(std::move(call));
    return Ok{};
  }

  // The assistant turn an assistant item belongs to: with `join`, the one just before (a message and
  // the calls after it are one chat turn); else a new one. Pending reasoning goes to it.
  ChatMessage& open_assistant(bool join) {
    const bool reuse = join && !messages.empty() && messages.back().role == "assistant" && pending_reasoning_.empty();
    if (!reuse) {
      ChatMessage m;
      m.role = "assistant";
      messages.push_back(std::move(m));
    }
    ChatMessage& m = messages.back();
    if (!pending_reasoning_.empty()) {
      m.reasoning_content = std::move(pending_reasoning_);
      pending_reasoning_.clear();
    }
    return m;
  }

  void flush_reasoning() {
    if (pending_reasoning_.empty()) return;
    open_assistant(false).content = "";
  }

  std::string pending_reasoning_;
};

ApiResult<std::vector<ChatMessage>> rsp_parse_input(const FieldReader& top) {
  const ojson* v = top.get("input");
  if (v == nullptr) return invalid_request("'input' is required");
  if (v->is_string()) {
    ChatMessage m;
    m.role = "user";
    m.content = v->get<std::string>();
    return std::vector<ChatMessage>{std::move(m)};
  }
  if (!v->is_array() || v->empty()) return invalid_request("'input' must be a string or a non-empty array of items");
  ItemConverter conv;
  for (std::size_t i = 0; i < v->size(); ++i) {
    SPLASH_OAI_TRY(auto ok, conv.item((*v)[i], index_path("input", i)));
    (void)ok;
  }
  conv.finish();
  return std::move(conv.messages);
}

// One function (flat Responses shape) -> a chat tool {type:"function", function:{...}}.
ApiResult<Tool> rsp_function_tool(const FieldReader& r, std::string_view ns) {
  SPLASH_OAI_TRY(auto name, r.string("name"));
  if (!name || name->empty()) return invalid_request(str_cat(r.name("name"), " must be a non-empty string"));
  SPLASH_OAI_TRY(auto description, r.string("description"));
  const ojson* params = r.get("parameters");
  if (params != nullptr && !params->is_object()) {
    return invalid_request(str_cat(r.name("parameters"), " must be a JSON schema object"));
  }
  SPLASH_OAI_TRY(auto strict, r.boolean("strict"));
  (void)strict;  // accepted; calls are not validated against the schema (spec 2.5)
  Tool tool;
  tool.name = flat_tool_name(ns, *name);
  ojson fn = ojson::object();
  fn["name"] = tool.name;
  if (description) fn["description"] = *description;
  fn["parameters"] = params != nullptr ? *params : ojson{{"type", "object"}, {"properties", ojson::object()}};
  tool.definition = ojson::object();
  tool.definition["type"] = "function";
  tool.definition["function"] = std::move(fn);
  return tool;
}

ApiResult<std::vector<Tool>> rsp_parse_tools(const FieldReader& top) {
  std::vector<Tool> tools;
  const ojson* v = top.get("tools");
  if (v == nullptr) return tools;
  if (!v->is_array()) return invalid_request("'tools' must be an array");
  auto add = [&](Tool tool, const FieldReader& r) -> ApiResult<Ok> {
    for (const Tool& earlier : tools) {
      if (earlier.name == tool.name) return invalid_request(str_cat(r.name("name"), " '", tool.name, "' is declared twice"));
    }
    tools.push_back(std::move(tool));
    return Ok{};
  };
  for (std::size_t i = 0; i < v->size(); ++i) {
    std::string path = index_path("tools", i);
    if (!(*v)[i].is_object()) return invalid_request(str_cat(rsp_quoted(path), " must be an object"));
    FieldReader r((*v)[i], path);
    SPLASH_OAI_TRY(auto type, r.string("type"));
    if (!type) return invalid_request(str_cat(r.name("type"), " is required"));
    if (*type == "function") {
      SPLASH_OAI_TRY(Tool tool, rsp_function_tool(r, ""));
      SPLASH_OAI_TRY(auto ok, add(std::move(tool), r));
      (void)ok;
      continue;
    }
    if (*type == "namespace") {
      SPLASH_OAI_TRY(auto ns, r.string("name"));
      if (!ns || ns->empty()) return invalid_request(str_cat(r.name("name"), " must be a non-empty string"));
      const ojson* inner = r.get("tools");
      if (inner == nullptr || !inner->is_array()) return invalid_request(str_cat(r.name("tools"), " must be an array"));
      for (std::size_t j = 0; j < inner->size(); ++j) {
        std::string inner_path = index_path(r.path("tools"), j);
        if (!(*inner)[j].is_object()) return invalid_request(str_cat(rsp_quoted(inner_path), " must be an object"));
        FieldReader ir((*inner)[j], inner_path);
        SPLASH_OAI_TRY(auto inner_type, ir.string("type"));
        if (inner_type.value_or("function") != "function") {
          return invalid_request(str_cat(ir.name("type"), " '", *inner_type, "' is not supported (only function tools are)"));
        }
        SPLASH_OAI_TRY(Tool tool, rsp_function_tool(ir, *ns));
        SPLASH_OAI_TRY(auto ok, add(std::move(tool), ir));
        (void)ok;
      }
      continue;
    }
    return invalid_request(str_cat(r.name("type"), " '", *type, "' is not supported (only function and namespace tools are)"));
  }
  return tools;
}

ApiResult<ToolChoice> rsp_parse_tool_choice(const FieldReader& top, const std::vector<Tool>& tools) {
  ToolChoice choice;
  const ojson* v = top.get("tool_choice");
  if (v == nullptr) return choice;
  if (v->is_string()) return parse_tool_choice_string(v->get_ref<const std::string&>(), tools, "an object");
  if (!v->is_object()) return invalid_request("'tool_choice' must be a string or an object");
  FieldReader r(*v, "tool_choice");
  SPLASH_OAI_TRY(auto type, r.string("type"));
  if (type.value_or("") != "function") {
    return invalid_request(str_cat("'tool_choice.type' '", type.value_or(""), "' is not supported; use \"auto\" or \"none\""));
  }
  SPLASH_OAI_TRY(auto name, r.string("name"));
  if (!name) return invalid_request("'tool_choice.name' is required");
  bool known = std::any_of(tools.begin(), tools.end(), [&](const Tool& t) { return t.name == *name; });
  if (!known) return invalid_request(str_cat("'tool_choice.name' '", *name, "' is not one of 'tools'"));
  choice.mode = ToolChoice::Mode::kFunction;
  choice.function = *name;
  return choice;
}

// text.format json_schema / json_object -> the request's output constraint (structured output).
ApiResult<std::optional<OutputConstraint>> rsp_parse_text_format(const FieldReader& r) {
  const ojson* text = r.get("text");
  if (text == nullptr || !text->is_object()) return std::optional<OutputConstraint>();
  const ojson* format = FieldReader(*text, "text").get("format");
  if (format == nullptr) return std::optional<OutputConstraint>();
  FieldReader f(*format, "text.format");
  SPLASH_OAI_TRY(auto type, f.string("type"));
  if (*type == "json_object") return std::optional<OutputConstraint>(OutputConstraint{OutputConstraint::Kind::kJsonSchema, R"({"type":"object"})", "text.format"});
  if (*type != "json_schema") return std::optional<OutputConstraint>();
  SPLASH_OAI_TRY(auto name, f.string("name"));
  (void)name;
  SPLASH_OAI_TRY(auto strict, f.boolean("strict"));  // the schema is always enforced
  (void)strict;
  const ojson* schema = f.get("schema");
  if (schema == nullptr) return invalid_request("'text.format.schema' is required");
  if (!schema->is_object() && !schema->is_boolean()) return invalid_request("'text.format.schema' must be an object");
  return std::optional<OutputConstraint>(OutputConstraint{OutputConstraint::Kind::kJsonSchema, schema->dump(), "text.format.schema"});
}

ApiResult<Ok> rsp_check_refusals(const FieldReader& r) {
  if (r.get("conversation") != nullptr) return invalid_request("'conversation' is not supported; use 'previous_response_id'");
  SPLASH_OAI_TRY(auto background, r.boolean("background"));
  if (background.value_or(false)) return invalid_request("'background' responses are not supported");
  if (const ojson* t = r.get("truncation")) {
    if (!t->is_string() || t->get_ref<const std::string&>() != "disabled") {
      return invalid_request("'truncation' must be \"disabled\": this server never drops input to fit the context");
    }
  }
  if (r.get("context_management") != nullptr) return invalid_request("'context_management' is not supported");
  if (r.get("prompt") != nullptr) return invalid_request("'prompt' (reusable prompt templates) is not supported");
  if (r.get("max_tool_calls") != nullptr) return invalid_request("'max_tool_calls' is not supported");
  SPLASH_OAI_TRY(auto top_logprobs, r.integer("top_logprobs"));
  if (top_logprobs && *top_logprobs != 0) return invalid_request("'top_logprobs' is not supported");
  if (const ojson* text = r.get("text")) {
    if (!text->is_object()) return invalid_request("'text' must be an object");
    FieldReader tr(*text, "text");
    if (const ojson* format = tr.get("format")) {
      if (!format->is_object()) return invalid_request("'text.format' must be an object");
      SPLASH_OAI_TRY(auto type, FieldReader(*format, "text.format").string("type"));
      if (!type) return invalid_request("'text.format.type' is required");
      if (*type != "text" && *type != "json_schema" && *type != "json_object") return invalid_request("'text.format.type' must be one of text, json_schema, json_object");
    }
    SPLASH_OAI_TRY(auto verbosity, tr.string("verbosity"));  // a hint; accepted, no effect
    if (verbosity && *verbosity != "low" && *verbosity != "medium" && *verbosity != "high") {
      return invalid_request("'text.verbosity' must be one of low, medium, high");
    }
  }
  return Ok{};
}

ApiResult<ojson> rsp_parse_metadata(const FieldReader& r) {
  const ojson* v = r.get("metadata");
  if (v == nullptr) return ojson::object();
  if (!v->is_object()) return invalid_request("'metadata' must be an object");
  if (v->size() > 16) return invalid_request("'metadata' may hold at most 16 keys");
  for (const auto& [key, value] : v->items()) {
    if (key.size() > 64) return invalid_request(str_cat("'metadata' key '", key.substr(0, 64), "...' is longer than 64 characters"));
    if (!value.is_string()) return invalid_request(str_cat("'metadata.", key, "' must be a string"));
    if (value.get_ref<const std::string&>().size() > 512) {
      return invalid_request(str_cat("'metadata.", key, "' is longer than 512 characters"));
    }
  }
  return *v;
}

}  // namespace

std::string flat_tool_name(std::string_view ns, std::string_view name) {
  return ns.empty() ? std::string(name) : str_cat(ns, ".", name);
}

ApiResult<ResponsesRequest> parse_responses_request(const nlohmann::ordered_json& body) {
  if (!body.is_object()) return invalid_request("request body must be a JSON object");
  FieldReader r(body, "");
  ResponsesRequest req;
  SPLASH_OAI_TRY(auto refused, rsp_check_refusals(r));
  (void)refused;
  SPLASH_OAI_TRY(req.common, parse_common_fields(r));
  SPLASH_OAI_TRY(auto text_format, rsp_parse_text_format(r));
  if (text_format) {
    if (req.common.constraint) {
      return invalid_request(str_cat("'text.format' and '", req.common.constraint->field.substr(0, req.common.constraint->field.find('.')),
                                     "' cannot be combined: send one"));
    }
    req.common.constraint = std::move(text_format);
  }
  SPLASH_OAI_TRY(req.instructions, r.string("instructions"));
  SPLASH_OAI_TRY(req.input, rsp_parse_input(r));
  SPLASH_OAI_TRY(req.tools, rsp_parse_tools(r));
  if (const ojson* tools = r.get("tools")) req.tools_json = *tools;
  SPLASH_OAI_TRY(req.tool_choice, rsp_parse_tool_choice(r, req.tools));
  if (const ojson* choice = r.get("tool_choice")) req.tool_choice_json = *choice;
  SPLASH_OAI_TRY(auto parallel, r.boolean("parallel_tool_calls"));
  req.parallel_tool_calls = parallel.value_or(true);
  if (const ojson* reasoning = r.get("reasoning")) {
    if (!reasoning->is_object()) return invalid_request("'reasoning' must be an object");
    FieldReader rr(*reasoning, "reasoning");
    SPLASH_OAI_TRY(req.reasoning_effort, rr.string("effort"));
    if (req.reasoning_effort && !is_reasoning_effort(*req.reasoning_effort)) {
      return invalid_request("'reasoning.effort' must be one of none, minimal, low, medium, high, xhigh, max");
    }
    SPLASH_OAI_TRY(req.reasoning_summary, rr.string("summary"));
    if (req.reasoning_summary && *req.reasoning_summary != "auto" && *req.reasoning_summary != "concise" &&
        *req.reasoning_summary != "detailed" && *req.reasoning_summary != "none") {
      return invalid_request("'reasoning.summary' must be one of auto, concise, detailed, none");
    }
  }
  SPLASH_OAI_TRY(req.max_output_tokens, r.integer("max_output_tokens"));
  if (req.max_output_tokens && *req.max_output_tokens <= 0) return invalid_request("'max_output_tokens' must be greater than 0");
  SPLASH_OAI_TRY(auto store, r.boolean("store"));
  req.store = store.value_or(true);
  SPLASH_OAI_TRY(req.previous_response_id, r.string("previous_response_id"));
  if (req.previous_response_id && req.previous_response_id->empty()) {
    return invalid_request("'previous_response_id' must not be empty");
  }
  SPLASH_OAI_TRY(req.metadata, rsp_parse_metadata(r));
  if (!req.common.stop.empty() && !req.tools.empty() && req.tool_choice.mode != ToolChoice::Mode::kNone) {
    // Spec 2.4: a stop string could cut a tool call in half.
    return invalid_request("'stop' cannot be combined with callable 'tools'");
  }
  return req;
}

ApiResult<ResponsesRequest> parse_responses_request(std::string_view body) {
  SPLASH_OAI_TRY(auto json, parse_json(body));
  return parse_responses_request(json);
}

ChatRequest to_chat_request(const ResponsesRequest& request, const std::vector<ChatMessage>& history) {
  ChatRequest chat;
  chat.common = request.common;
  if (request.instructions) {
    ChatMessage system;
    system.role = "system";
    system.content = *request.instructions;
    chat.messages.push_back(std::move(system));
  }
  chat.messages.insert(chat.messages.end(), history.begin(), history.end());
  chat.messages.insert(chat.messages.end(), request.input.begin(), request.input.end());
  chat.tools = request.tools;
  chat.tool_choice = request.tool_choice;
  chat.parallel_tool_calls = request.parallel_tool_calls;
  chat.reasoning_effort = request.reasoning_effort;
  chat.max_tokens = request.max_output_tokens;
  return chat;
}

}  // namespace splash::openai
