// Response object and stream events of /v1/responses (spec 2.6).
#include "server/openai/responses_output.h"

#include <cmath>
#include <ctime>

#include "server/http/sse.h"
#include "server/openai/json_input.h"

namespace splash::openai {

using ojson = nlohmann::ordered_json;

ResponseSettings ResponseSettings::for_request(const ResponsesRequest& r, std::string id, int64_t created_at,
                                               std::string model) {
  ResponseSettings s;
  s.id = std::move(id);
  s.created_at = created_at;
  s.model = std::move(model);
  if (r.instructions) s.instructions = *r.instructions;
  s.tools = r.tools_json;
  s.tool_choice = r.tool_choice_json;
  s.parallel_tool_calls = r.parallel_tool_calls;
  // The sampler keeps floats; the response reports them as the client wrote them (0.95, not 0.949999988).
  auto decimal = [](float v) { return std::round(static_cast<double>(v) * 1e6) / 1e6; };
  s.temperature = decimal(r.common.sampling.temperature);
  s.top_p = decimal(r.common.sampling.top_p);
  s.max_output_tokens = r.max_output_tokens;
  s.previous_response_id = r.previous_response_id;
  s.reasoning_effort = r.reasoning_effort;
  s.reasoning_summary = r.reasoning_summary;
  s.store = r.store;
  s.metadata = r.metadata;
  s.return_progress = r.common.return_progress;
  for (const ojson& t : r.tools_json) {
    if (t.is_object() && t.value("type", "") == "namespace") s.namespaces.push_back(t.value("name", ""));
  }
  return s;
}

std::string sse_frame(const ResponseEvent& e) { return str_cat("event: ", e.type, "\n", http::sse_event(e.data)); }

ResponseEvents::ResponseEvents(ResponseSettings settings) : settings_(std::move(settings)), ids_(settings_.id_seed) {
  const ResponseSettings& s = settings_;
  ojson& r = response_;
  r["id"] = s.id;
  r["object"] = "response";
  r["created_at"] = s.created_at;
  r["status"] = "in_progress";
  r["background"] = false;
  r["error"] = nullptr;
  r["incomplete_details"] = nullptr;
  r["instructions"] = s.instructions;
  r["max_output_tokens"] = s.max_output_tokens ? ojson(*s.max_output_tokens) : ojson(nullptr);
  r["model"] = s.model;
  r["output"] = ojson::array();
  r["parallel_tool_calls"] = s.parallel_tool_calls;
  r["previous_response_id"] = s.previous_response_id ? ojson(*s.previous_response_id) : ojson(nullptr);
  r["reasoning"] = {{"effort", s.reasoning_effort ? ojson(*s.reasoning_effort) : ojson(nullptr)},
                    {"summary", s.reasoning_summary ? ojson(*s.reasoning_summary) : ojson(nullptr)}};
  r["store"] = s.store;
  r["temperature"] = s.temperature;
  r["text"] = {{"format", {{"type", "text"}}}};
  r["tool_choice"] = s.tool_choice;
  r["tools"] = s.tools;
  r["top_p"] = s.top_p;
  r["truncation"] = "disabled";
  r["usage"] = nullptr;
  r["metadata"] = s.metadata;
}

ResponseEvent ResponseEvents::event(std::string type, ojson payload) {
  ojson e = ojson::object();
  e["type"] = type;
  for (auto& [k, v] : payload.items()) e[k] = std::move(v);
  e["sequence_number"] = sequence_++;
  return ResponseEvent{std::move(type), dump_json(e)};
}

std::vector<ResponseEvent> ResponseEvents::start() {
  std::vector<ResponseEvent> out;
  out.push_back(event("response.created", {{"response", response_}}));
  out.push_back(event("response.in_progress", {{"response", response_}}));
  return out;
}

std::optional<ResponseEvent> ResponseEvents::progress(const PromptProgress& p) {
  if (!settings_.return_progress || finished_) return std::nullopt;
  ojson progress = {{"total", p.total}, {"cache", p.cache}, {"processed", p.processed}, {"time_ms", p.time_ms}};
  return event("response.in_progress", {{"response", response_}, {"prompt_progress", std::move(progress)}});
}

ojson ResponseEvents::item_json(const Item& item) const {
  ojson j = ojson::object();
  switch (item.kind) {
    case Item::Kind::kReasoning:
      j["id"] = item.id;
      j["type"] = "reasoning";
      j["summary"] = ojson::array();
      j["content"] = ojson::array({{{"type", "reasoning_text"}, {"text", item.text}}});
      j["status"] = item.status;
      break;
    case Item::Kind::kMessage:
      j["id"] = item.id;
      j["type"] = "message";
      j["status"] = item.status;
      j["role"] = "assistant";
      j["content"] = ojson::array(
          {{{"type", "output_text"}, {"text", item.text}, {"annotations", ojson::array()}, {"logprobs", ojson::array()}}});
      break;
    case Item::Kind::kCall:
      j["id"] = item.id;
      j["type"] = "function_call";
      j["status"] = item.status;
      j["arguments"] = item.text;
      j["call_id"] = item.call_id;
      j["name"] = item.name;
      if (!item.ns.empty()) j["namespace"] = item.ns;
      break;
  }
  return j;
}

// output_item.added with the item as it starts (empty text, no content parts yet), then the item's
// content part.
void ResponseEvents::open(std::vector<ResponseEvent>& out, Item item) {
  items_.push_back(std::move(item));
  open_ = true;
  const Item& it = items_.back();
  const int64_t index = static_cast<int64_t>(items_.size()) - 1;
  ojson added = item_json(it);
  if (it.kind != Item::Kind::kCall) added["content"] = ojson::array();
  out.push_back(event("response.output_item.added", {{"output_index", index}, {"item", std::move(added)}}));
  if (it.kind == Item::Kind::kCall) return;
  ojson part = item_json(it)["content"][0];
  out.push_back(event("response.content_part.added",
                      {{"item_id", it.id}, {"output_index", index}, {"content_index", 0}, {"part", std::move(part)}}));
}

void ResponseEvents::append(std::vector<ResponseEvent>& out, std::string_view text) {
  if (text.empty()) return;
  Item& it = items_.back();
  it.text += text;
  const int64_t index = static_cast<int64_t>(items_.size()) - 1;
  switch (it.kind) {
    case Item::Kind::kReasoning:
      out.push_back(event("response.reasoning_text.delta",
                          {{"item_id", it.id}, {"output_index", index}, {"content_index", 0}, {"delta", std::string(text)}}));
      break;
    case Item::Kind::kMessage:
      out.push_back(event("response.output_text.delta", {{"item_id", it.id},
                                                         {"output_index", index},
                                                         {"content_index", 0},
                                                         {"delta", std::string(text)},
                                                         {"logprobs", ojson::array()}}));
      break;
    case Item::Kind::kCall:
      out.push_back(event("response.function_call_arguments.delta",
                          {{"item_id", it.id}, {"output_index", index}, {"delta", std::string(text)}}));
      break;
  }
}

void ResponseEvents::close(std::vector<ResponseEvent>& out, std::string status) {
  if (!open_) return;
  open_ = false;
  Item& it = items_.back();
  it.status = std::move(status);
  const int64_t index = static_cast<int64_t>(items_.size()) - 1;
  ojson done = item_json(it);
  switch (it.kind) {
    case Item::Kind::kReasoning:
      out.push_back(event("response.reasoning_text.done",
                          {{"item_id", it.id}, {"output_index", index}, {"content_index", 0}, {"text", it.text}}));
      break;
    case Item::Kind::kMessage:
      out.push_back(event("response.output_text.done", {{"item_id", it.id},
                                                        {"output_index", index},
                                                        {"content_index", 0},
                                                        {"text", it.text},
                                                        {"logprobs", ojson::array()}}));
      break;
    case Item::Kind::kCall:
      out.push_back(event("response.function_call_arguments.done",
                          {{"item_id", it.id}, {"output_index", index}, {"name", it.name}, {"arguments", it.text}}));
      break;
  }
  if (it.kind != Item::Kind::kCall) {
    out.push_back(event("response.content_part.done", {{"item_id", it.id},
                                                       {"output_index", index},
                                                       {"content_index", 0},
                                                       {"part", done["content"][0]}}));
  }
  response_["output"].push_back(done);
  out.push_back(event("response.output_item.done", {{"output_index", index}, {"item", std::move(done)}}));
}

std::vector<ResponseEvent> ResponseEvents::feed(const std::vector<OutputPart>& parts) {
  std::vector<ResponseEvent> out;
  if (finished_) return out;
  for (const OutputPart& p : parts) {
    switch (p.kind) {
      case OutputPart::Kind::kReasoning:
      case OutputPart::Kind::kContent: {
        if (p.text.empty()) break;
        const Item::Kind kind = p.kind == OutputPart::Kind::kReasoning ? Item::Kind::kReasoning : Item::Kind::kMessage;
        if (!open_ || items_.back().kind != kind) {
          close(out, "completed");
          Item item;
          item.kind = kind;
          item.id = ids_.next(kind == Item::Kind::kReasoning ? "rs_" : "msg_");
          open(out, std::move(item));
        }
        append(out, p.text);
        break;
      }
      case OutputPart::Kind::kToolCall: {
        const ToolCallDelta& d = p.call;
        if (!d.id.empty() || !open_ || items_.back().kind != Item::Kind::kCall || items_.back().call_index != d.index) {
          close(out, "completed");
          Item item;
          item.kind = Item::Kind::kCall;
          item.id = ids_.next("fc_");
          item.call_id = d.id.empty() ? ids_.next("call_") : d.id;
          item.call_index = d.index;
          item.name = d.name;
          // A call to "NS.NAME" of a declared namespace is reported as namespace NS, name NAME.
          for (const std::string& ns : settings_.namespaces) {
            if (d.name.size() > ns.size() + 1 && d.name.compare(0, ns.size(), ns) == 0 && d.name[ns.size()] == '.') {
              item.ns = ns;
              item.name = d.name.substr(ns.size() + 1);
              break;
            }
          }
          open(out, std::move(item));
        }
        append(out, d.arguments);
        break;
      }
    }
  }
  return out;
}

ojson ResponseEvents::usage_json(const GenerationStats& s, int64_t reasoning_tokens) const {
  ojson u = ojson::object();
  u["input_tokens"] = s.prompt_tokens;
  u["input_tokens_details"] = {{"cached_tokens", s.cached_tokens}};
  u["output_tokens"] = s.completion_tokens;
  u["output_tokens_details"] = {{"reasoning_tokens", reasoning_tokens}};
  u["total_tokens"] = s.prompt_tokens + s.completion_tokens;
  return u;
}

std::vector<ResponseEvent> ResponseEvents::end(std::string status, ojson extra, const GenerationStats& stats,
                                               int64_t reasoning_tokens) {
  std::vector<ResponseEvent> out;
  if (finished_) return out;
  close(out, status == "incomplete" ? "incomplete" : "completed");
  finished_ = true;
  response_["status"] = status;
  for (auto& [k, v] : extra.items()) response_[k] = std::move(v);
  response_["usage"] = usage_json(stats, reasoning_tokens);
  out.push_back(event(str_cat("response.", status), {{"response", response_}}));
  return out;
}

std::vector<ResponseEvent> ResponseEvents::finish(FinishReason end_reason, const GenerationStats& stats,
                                                  int64_t reasoning_tokens) {
  if (end_reason == FinishReason::kLength || end_reason == FinishReason::kContext) {
    return end("incomplete", {{"incomplete_details", {{"reason", "max_output_tokens"}}}}, stats, reasoning_tokens);
  }
  return end("completed", {{"completed_at", static_cast<int64_t>(std::time(nullptr))}}, stats, reasoning_tokens);
}

std::vector<ResponseEvent> ResponseEvents::fail(const ApiError& error, const GenerationStats& stats,
                                                int64_t reasoning_tokens) {
  return end("failed", {{"error", {{"code", error.code}, {"message", error.message}}}}, stats, reasoning_tokens);
}

ojson ResponseEvents::body() const {
  ojson b = response_;
  std::string text;
  for (const Item& it : items_) {
    if (it.kind == Item::Kind::kMessage) text += it.text;
  }
  b["output_text"] = std::move(text);
  return b;
}

ChatMessage ResponseEvents::assistant_turn() const {
  ChatMessage m;
  m.role = "assistant";
  std::string reasoning, content;
  for (const Item& it : items_) {
    switch (it.kind) {
      case Item::Kind::kReasoning:
        reasoning += it.text;
        break;
      case Item::Kind::kMessage:
        content += it.text;
        break;
      case Item::Kind::kCall: {
        HistoryToolCall call;
        call.id = it.call_id;
        call.name = flat_tool_name(it.ns, it.name);
        call.arguments = it.text;
        auto parsed = parse_json(it.text, "arguments");
        if (parsed.ok() && parsed->is_object()) call.arguments_object = std::move(parsed).value();
        m.tool_calls.push_back(std::move(call));
        break;
      }
    }
  }
  if (!reasoning.empty()) m.reasoning_content = std::move(reasoning);
  m.content = std::move(content);
  return m;
}

}  // namespace splash::openai
