#include "server/openai/tool_call_parser.h"

#include <cmath>

#include "server/openai/json_input.h"
#include "server/openai/reasoning_splitter.h"

namespace splash::openai {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kCallOpen = "<tool_call>";
constexpr std::string_view kCallClose = "</tool_call>";
constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kParamOpen = "<parameter=";
constexpr std::string_view kParamClose = "</parameter>";

std::size_t skip_space(std::string_view s, std::size_t i) {
  while (i < s.size() && is_space_byte(s[i])) ++i;
  return i;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space_byte(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space_byte(s.back())) s.remove_suffix(1);
  return s;
}

bool is_proper_prefix(std::string_view text, std::string_view tag) {
  return text.size() < tag.size() && tag.substr(0, text.size()) == text;
}

// Qwen's XML writes "<parameter=p>\nvalue\n</parameter>": one newline on each side is framing.
std::string_view strip_framing(std::string_view v) {
  if (!v.empty() && v.front() == '\n') v.remove_prefix(1);
  if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
  return v;
}

// The declared types of a schema: "type" as a string or list, or the types of anyOf/oneOf branches.
std::vector<std::string> declared_types(const ojson& schema) {
  std::vector<std::string> types;
  if (!schema.is_object()) return types;
  auto t = schema.find("type");
  if (t != schema.end()) {
    if (t->is_string()) types.push_back(t->get<std::string>());
    if (t->is_array()) {
      for (const auto& e : *t) {
        if (e.is_string()) types.push_back(e.get<std::string>());
      }
    }
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    auto branches = schema.find(key);
    if (branches == schema.end() || !branches->is_array()) continue;
    for (const auto& b : *branches) {
      for (auto& bt : declared_types(b)) types.push_back(std::move(bt));
    }
  }
  return types;
}

std::optional<ojson> parse_as(std::string_view text, const std::string& type) {
  std::string_view t = trim(text);
  if (type == "boolean") {
    if (t == "true" || t == "True") return ojson(true);
    if (t == "false" || t == "False") return ojson(false);
    return std::nullopt;
  }
  if (type == "null") {
    if (t == "null" || t == "None") return ojson(nullptr);
    return std::nullopt;
  }
  if (type != "integer" && type != "number" && type != "object" && type != "array") return std::nullopt;
  auto parsed = parse_json(t, "tool argument");
  if (!parsed.ok()) return std::nullopt;
  const ojson& v = *parsed;
  // 2.0 is an integer too; the range check comes first (casting 1e300 would be undefined).
  bool integral_float = v.is_number_float() && std::fabs(v.get<double>()) < 9.0e18 &&
                        v.get<double>() == std::floor(v.get<double>());
  bool fits = (type == "integer" && (v.is_number_integer() || integral_float)) ||
              (type == "number" && v.is_number()) || (type == "object" && v.is_object()) ||
              (type == "array" && v.is_array());
  if (!fits) return std::nullopt;
  return std::move(parsed).value();
}

// Past the end of the JSON string starting at s[i] == '"' (the text is known to be valid JSON).
std::size_t json_string_end(std::string_view s, std::size_t i) {
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == '"') {
      return i + 1;
    }
  }
  return s.size();
}

// Past the end of the JSON value starting at s[i].
std::size_t json_value_end(std::string_view s, std::size_t i) {
  if (i >= s.size()) return s.size();
  if (s[i] == '"') return json_string_end(s, i);
  if (s[i] == '{' || s[i] == '[') {
    int depth = 0;
    while (i < s.size()) {
      char c = s[i];
      if (c == '"') {
        i = json_string_end(s, i);
        continue;
      }
      if (c == '{' || c == '[') ++depth;
      if ((c == '}' || c == ']') && --depth == 0) return i + 1;
      ++i;
    }
    return s.size();
  }
  while (i < s.size() && s[i] != ',' && s[i] != '}' && s[i] != ']' && !is_space_byte(s[i])) ++i;
  return i;
}

// The text of top-level member `key` of the JSON object `obj` (valid JSON, the key written without
// escapes), as the model wrote it; nullopt when not found that way.
std::optional<std::string_view> json_member_text(std::string_view obj, std::string_view key) {
  std::size_t p = skip_space(obj, 0);
  if (p >= obj.size() || obj[p] != '{') return std::nullopt;
  ++p;
  for (;;) {
    p = skip_space(obj, p);
    if (p >= obj.size() || obj[p] != '"') return std::nullopt;
    std::size_t key_end = json_string_end(obj, p);
    std::string_view name = obj.substr(p + 1, key_end - p - 2);
    p = skip_space(obj, key_end);
    if (p >= obj.size() || obj[p] != ':') return std::nullopt;
    p = skip_space(obj, p + 1);
    std::size_t value_end = json_value_end(obj, p);
    if (name == key) return obj.substr(p, value_end - p);
    p = skip_space(obj, value_end);
    if (p >= obj.size() || obj[p] != ',') return std::nullopt;
    ++p;
  }
}

}  // namespace

// --- ids ------------------------------------------------------------------------------------------

IdGenerator::IdGenerator(std::optional<uint64_t> seed)
    : rng_(seed ? *seed : (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}()) {}

std::string IdGenerator::next(std::string_view prefix) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string id(prefix);
  for (int i = 0; i < 24; ++i) id += kAlphabet[rng_() % (sizeof(kAlphabet) - 1)];
  return id;
}

ojson convert_parameter(std::string_view text, const ojson* schema) {
  if (schema == nullptr) return ojson(std::string(text));
  for (const std::string& type : declared_types(*schema)) {
    if (type == "string") continue;  // a union with string keeps the text unless another type parses
    if (auto v = parse_as(text, type)) return *v;
  }
  return ojson(std::string(text));
}

// --- parser ---------------------------------------------------------------------------------------

ToolCallParser::ToolCallParser(Options options) : options_(std::move(options)), ids_(options_.id_seed) {
  for (const Tool& t : options_.tools) {
    const ojson& fn = t.definition.contains("function") ? t.definition["function"] : t.definition;
    if (fn.is_object() && fn.contains("parameters") && fn["parameters"].is_object() &&
        fn["parameters"].contains("properties") && fn["parameters"]["properties"].is_object()) {
      properties_[t.name] = fn["parameters"]["properties"];
    }
  }
}

const ojson* ToolCallParser::parameter_schema(const std::string& param) const {
  if (calls_.empty()) return nullptr;
  auto tool = properties_.find(calls_.back().name);
  if (tool == properties_.end()) return nullptr;
  auto p = tool->second.find(param);
  return p == tool->second.end() ? nullptr : &*p;
}

std::vector<OutputPart> ToolCallParser::feed(std::string_view content) {
  std::vector<OutputPart> out;
  if (state_ == State::kDone) return out;
  held_.append(content);
  scan(out, false);
  return out;
}

std::vector<OutputPart> ToolCallParser::finish() {
  std::vector<OutputPart> out;
  if (state_ != State::kDone) scan(out, true);
  held_.clear();
  return out;
}

void ToolCallParser::emit_content(std::vector<OutputPart>& out, std::string_view text) {
  if (text.empty()) return;
  if (!out.empty() && out.back().kind == OutputPart::Kind::kContent) {
    out.back().text.append(text);
    return;
  }
  OutputPart p;
  p.kind = OutputPart::Kind::kContent;
  p.text = std::string(text);
  out.push_back(std::move(p));
}

void ToolCallParser::start_call(std::vector<OutputPart>& out, std::string name) {
  ToolCall call;
  call.id = ids_.next(options_.id_prefix);
  call.name = std::move(name);
  OutputPart p;
  p.kind = OutputPart::Kind::kToolCall;
  p.call.index = static_cast<int>(calls_.size());
  p.call.id = call.id;
  p.call.name = call.name;
  calls_.push_back(std::move(call));
  out.push_back(std::move(p));
  call_started_ = true;
}

void ToolCallParser::append_arguments(std::vector<OutputPart>& out, std::string_view text) {
  if (text.empty()) return;
  calls_.back().arguments.append(text);
  OutputPart p;
  p.kind = OutputPart::Kind::kToolCall;
  p.call.index = static_cast<int>(calls_.size()) - 1;
  p.call.arguments = std::string(text);
  out.push_back(std::move(p));
}

void ToolCallParser::close_call(std::vector<OutputPart>&, bool complete) {
  calls_.back().complete = complete;
  after_call_ = true;
  // parallel_tool_calls false: without a grammar the model may still write more calls; they and
  // anything after them are dropped.
  state_ = options_.parallel_tool_calls ? State::kText : State::kDone;
}

// Not a call after all: the opening tag goes out as content and the body is read again as text.
void ToolCallParser::abandon_call(std::vector<OutputPart>& out) {
  emit_content(out, kCallOpen);
  state_ = State::kText;
}

void ToolCallParser::scan(std::vector<OutputPart>& out, bool at_end) {
  for (;;) {
    if (state_ == State::kDone) {
      held_.clear();
      return;
    }
    if (state_ == State::kCall) {
      if (!scan_call(out, at_end)) return;
      continue;
    }
    if (after_call_) {
      // Whitespace right after a call is framing as well.
      std::size_t ws = skip_space(held_, 0);
      held_.erase(0, ws);
      if (held_.empty() && !at_end) return;
      after_call_ = false;
    }
    std::string_view h = held_;
    auto open = h.find(kCallOpen);
    if (open != std::string_view::npos) {
      // Whitespace just before a call is framing, not content.
      std::string_view before = h.substr(0, open);
      while (!before.empty() && is_space_byte(before.back())) before.remove_suffix(1);
      emit_content(out, before);
      held_.erase(0, open + kCallOpen.size());
      state_ = State::kCall;
      body_pos_ = 0;
      call_started_ = false;
      n_params_ = 0;
      args_closed_ = false;
      continue;
    }
    if (at_end) {
      // Trailing whitespace after the calls is framing too.
      if (calls_.empty() || !trim(h).empty()) emit_content(out, h);
      held_.clear();
      return;
    }
    // Hold a possible partial `<tool_call>` and the whitespace before it.
    std::size_t keep_from = h.size() - partial_tag_suffix(h, kCallOpen);
    while (keep_from > 0 && is_space_byte(h[keep_from - 1])) --keep_from;
    emit_content(out, h.substr(0, keep_from));
    held_.erase(0, keep_from);
    return;
  }
}

bool ToolCallParser::scan_call(std::vector<OutputPart>& out, bool at_end) {
  std::string_view h = held_;
  std::size_t start = skip_space(h, 0);
  std::string_view rest = h.substr(start);
  if (!rest.empty() && rest.front() == '{') return scan_json(out, at_end);
  if (rest.substr(0, kFunctionOpen.size()) == kFunctionOpen) return scan_xml(out, at_end);
  bool closed = h.find(kCallClose) != std::string_view::npos;
  if (!at_end && !closed && is_proper_prefix(rest, kFunctionOpen)) return false;  // undecided
  abandon_call(out);
  return true;
}

bool ToolCallParser::scan_json(std::vector<OutputPart>& out, bool at_end) {
  std::string_view h = held_;
  auto close = h.find(kCallClose);
  if (close == std::string_view::npos && !at_end) return false;
  std::string_view body = trim(h.substr(0, close == std::string_view::npos ? h.size() : close));
  auto parsed = parse_json(body, "tool call");
  std::optional<std::string> name;
  std::string arguments;
  if (parsed.ok() && parsed->is_object() && parsed->contains("name") && (*parsed)["name"].is_string()) {
    name = (*parsed)["name"].get<std::string>();
    auto args = parsed->find("arguments");
    if (args == parsed->end() || args->is_null()) {
      arguments = "{}";
    } else if (args->is_string()) {
      arguments = args->get<std::string>();
    } else if (auto text = json_member_text(body, "arguments")) {
      // The model's own bytes: the client sends them back, and the template prints a string
      // verbatim, so the next turn's prompt repeats this output exactly (prefix-cache hit).
      arguments = std::string(*text);
    } else {
      arguments = dump_json(*args);
    }
  } else if (close == std::string_view::npos) {
    // Cut by the end of output: keep the name and the raw arguments text written so far.
    auto name_key = body.find("\"name\"");
    std::size_t p = name_key == std::string_view::npos ? body.size() : skip_space(body, name_key + 6);
    if (p < body.size() && body[p] == ':') {
      p = skip_space(body, p + 1);
      auto end = p < body.size() && body[p] == '"' ? body.find('"', p + 1) : std::string_view::npos;
      if (end != std::string_view::npos) {
        name = std::string(body.substr(p + 1, end - p - 1));
        auto args_key = body.find("\"arguments\"", end);
        if (args_key != std::string_view::npos) {
          std::size_t a = skip_space(body, args_key + 11);
          if (a < body.size() && body[a] == ':') arguments = std::string(trim(body.substr(a + 1)));
        }
      }
    }
  }
  if (!name || name->empty()) {
    abandon_call(out);
    return true;
  }
  start_call(out, std::move(*name));
  append_arguments(out, arguments);
  close_call(out, close != std::string_view::npos);
  held_.erase(0, close == std::string_view::npos ? held_.size() : close + kCallClose.size());
  return true;
}

bool ToolCallParser::scan_xml(std::vector<OutputPart>& out, bool at_end) {
  std::string_view h = held_;
  auto close = h.find(kCallClose);
  std::size_t limit = close == std::string_view::npos ? h.size() : close;
  bool ending = at_end || close != std::string_view::npos;
  if (!call_started_) {
    std::size_t name_at = skip_space(h, 0) + kFunctionOpen.size();
    auto gt = h.find('>', name_at);
    if (gt == std::string_view::npos || gt > limit) {
      if (!ending) return false;
      abandon_call(out);
      return true;
    }
    std::string_view name = trim(h.substr(name_at, gt - name_at));
    if (name.empty()) {
      abandon_call(out);
      return true;
    }
    start_call(out, std::string(name));
    body_pos_ = gt + 1;
  }
  while (!args_closed_) {
    std::size_t p = skip_space(h.substr(0, limit), body_pos_);
    std::string_view rest = h.substr(p, limit - p);
    if (rest.substr(0, kParamOpen.size()) == kParamOpen) {
      auto gt = h.find('>', p);
      if (gt == std::string_view::npos || gt >= limit) break;
      auto end = h.find(kParamClose, gt + 1);
      if (end == std::string_view::npos || end > limit) break;
      std::string param(trim(h.substr(p + kParamOpen.size(), gt - p - kParamOpen.size())));
      ojson value = convert_parameter(strip_framing(h.substr(gt + 1, end - gt - 1)), parameter_schema(param));
      append_arguments(out, (n_params_ == 0 ? "{" : ", ") + dump_json(ojson(param)) + ": " + dump_json(value));
      ++n_params_;
      body_pos_ = end + kParamClose.size();
      continue;
    }
    if (rest.substr(0, kFunctionClose.size()) == kFunctionClose) {
      append_arguments(out, n_params_ == 0 ? "{}" : "}");
      args_closed_ = true;
      body_pos_ = p + kFunctionClose.size();
      break;
    }
    if (rest.empty() || is_proper_prefix(rest, kParamOpen) || is_proper_prefix(rest, kFunctionClose)) break;
    // Stray text between parameters: skip to the next tag.
    auto next = h.find('<', p + 1);
    body_pos_ = (next == std::string_view::npos || next > limit) ? limit : next;
  }
  if (!ending) return false;
  finish_xml(out, limit, close != std::string_view::npos);
  held_.erase(0, close == std::string_view::npos ? held_.size() : close + kCallClose.size());
  return true;
}

// The call ends (its `</tool_call>` or the end of output) with its arguments possibly still open: a
// parameter whose `</parameter>` never came keeps the text it has, then the object is closed.
void ToolCallParser::finish_xml(std::vector<OutputPart>& out, std::size_t limit, bool complete) {
  if (!args_closed_) {
    std::string_view h = std::string_view(held_).substr(0, limit);
    std::size_t p = skip_space(h, body_pos_);
    std::string_view rest = h.substr(p);
    auto gt = rest.find('>');
    if (rest.substr(0, kParamOpen.size()) == kParamOpen && gt != std::string_view::npos) {
      std::string param(trim(rest.substr(kParamOpen.size(), gt - kParamOpen.size())));
      std::string_view value = rest.substr(gt + 1);
      auto fclose = value.find(kFunctionClose);
      if (fclose != std::string_view::npos) value = value.substr(0, fclose);
      value.remove_suffix(partial_tag_suffix(value, kParamClose));
      ojson v = convert_parameter(strip_framing(value), parameter_schema(param));
      append_arguments(out, (n_params_ == 0 ? "{" : ", ") + dump_json(ojson(param)) + ": " + dump_json(v));
      ++n_params_;
    }
    append_arguments(out, n_params_ == 0 ? "{}" : "}");
    args_closed_ = true;
  }
  close_call(out, complete);
}

}  // namespace splash::openai
