// Tool calls out of streamed model content (spec 2.5), one text piece at a time.
//
// Two forms, told apart by what follows `<tool_call>`:
//   Qwen3 JSON:   <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   Qwen3.5+ XML: <tool_call>\n<function=f>\n<parameter=p>\nvalue\n</parameter>\n</function>\n</tool_call>
// XML parameter values convert by the tool's declared parameter type (JSON for non-string types,
// True/False/None accepted for boolean/null; a union keeps the text unless it parses as another of
// its types; undeclared parameters stay strings). Calls are not validated against the schema.
//
// Output is a sequence of parts in order: content text outside calls, and call deltas in OpenAI's
// streaming shape (the first delta of a call carries id and name, later ones append to arguments).
// XML calls stream one complete parameter at a time; JSON calls arrive whole at `</tool_call>`.
// Whitespace between calls is dropped. A call cut by the end of output keeps its partial arguments
// (completed parameters plus the open one's text so far); a call cut before its name is known, or
// one that is not well formed, is returned as plain content. Concatenated results do not depend on
// where the pieces were cut. Not thread-safe; one per request.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai/request.h"

namespace splash::openai {

struct ToolCallDelta {
  int index = 0;            // position of the call in this response
  std::string id;           // "call_..." on a call's first delta, else empty
  std::string name;         // on a call's first delta, else empty
  std::string arguments;    // text to append to the call's arguments
};

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;    // JSON text (partial when the call was cut)
  bool complete = false;    // `</tool_call>` was seen
};

struct OutputPart {
  enum class Kind : unsigned char { kReasoning, kContent, kToolCall };
  Kind kind = Kind::kContent;
  std::string text;         // reasoning / content text
  ToolCallDelta call;       // kToolCall
};

// Random ids ("call_" / "chatcmpl-" + 24 letters and digits); seeded for reproducible tests.
class IdGenerator {
 public:
  explicit IdGenerator(std::optional<uint64_t> seed = std::nullopt);
  std::string next(std::string_view prefix);

 private:
  std::mt19937_64 rng_;
};

// Converts one XML parameter's text by its JSON schema (nullptr: undeclared -> string).
nlohmann::ordered_json convert_parameter(std::string_view text, const nlohmann::ordered_json* schema);

class ToolCallParser {
 public:
  struct Options {
    std::vector<Tool> tools;               // declared parameter types come from here
    bool parallel_tool_calls = true;       // false: output after the first call is dropped
    std::optional<uint64_t> id_seed;       // for reproducible call ids
    std::string id_prefix = "call_";       // Messages uses "toolu_"
  };
  explicit ToolCallParser(Options options);

  std::vector<OutputPart> feed(std::string_view content);
  std::vector<OutputPart> finish();
  const std::vector<ToolCall>& calls() const { return calls_; }

 private:
  enum class State : unsigned char { kText, kCall, kDone };
  void scan(std::vector<OutputPart>& out, bool at_end);
  // Inside a call: emits what became complete; returns true when the call ended (consumed).
  bool scan_call(std::vector<OutputPart>& out, bool at_end);
  void emit_content(std::vector<OutputPart>& out, std::string_view text);
  void start_call(std::vector<OutputPart>& out, std::string name);
  void append_arguments(std::vector<OutputPart>& out, std::string_view text);
  void close_call(std::vector<OutputPart>& out, bool complete);
  void abandon_call(std::vector<OutputPart>& out);
  bool scan_xml(std::vector<OutputPart>& out, bool at_end);
  bool scan_json(std::vector<OutputPart>& out, bool at_end);
  const nlohmann::ordered_json* parameter_schema(const std::string& param) const;
  void finish_xml(std::vector<OutputPart>& out, std::size_t limit, bool complete);

  Options options_;
  std::map<std::string, nlohmann::ordered_json> properties_;  // tool name -> parameters.properties
  IdGenerator ids_;
  State state_ = State::kText;
  std::string held_;          // text not yet decided (kText) or the open call's body (kCall)
  std::size_t body_pos_ = 0;  // kCall, XML: bytes of held_ already turned into deltas
  bool call_started_ = false; // kCall: the call has an id and name
  int n_params_ = 0;          // kCall, XML: parameters emitted
  bool args_closed_ = false;  // kCall, XML: `</function>` seen
  bool after_call_ = false;   // kText: a call just ended, leading whitespace is dropped
  std::vector<ToolCall> calls_;
};

}  // namespace splash::openai
