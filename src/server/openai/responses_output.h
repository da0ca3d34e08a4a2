// The output side of one /v1/responses request: the model's output parts (reasoning, text, tool-call
// deltas, as ChatOutput splits them) in, the Response object and its stream events out (spec 2.6).
//
// Output items, in the order the model wrote them: a `reasoning` item (id rs_..., its text as one
// reasoning_text content part, summary []), a `message` item (msg_..., one output_text part), and one
// `function_call` item per call (fc_..., call_id call_..., arguments as JSON text). An item opens on
// its first output and closes when the next item opens or at the end.
//
// Events, each with sequence_number 0, 1, 2 ...:
//   response.created, response.in_progress                          start()
//   response.in_progress + prompt_progress (return_progress only)    progress()
//   reasoning: output_item.added, content_part.added, reasoning_text.delta ..., reasoning_text.done,
//              content_part.done, output_item.done
//   message:   output_item.added, content_part.added, output_text.delta ..., output_text.done,
//              content_part.done, output_item.done
//   call:      output_item.added, function_call_arguments.delta ..., function_call_arguments.done,
//              output_item.done (Codex CLI takes calls from here)
//   exactly one of response.completed, response.incomplete (token or context limit:
//   incomplete_details.reason "max_output_tokens"; the cut item is "incomplete"), response.failed.
// The same object is the non-stream body and what the store keeps. Not thread-safe; one per request.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai/response.h"
#include "server/openai/responses_request.h"
#include "server/openai/tool_call_parser.h"

namespace splash::openai {

// What the Response object reports besides its output.
struct ResponseSettings {
  std::string id;                                   // "resp_..."
  int64_t created_at = 0;                           // unix seconds
  std::string model;
  nlohmann::ordered_json instructions = nullptr;
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  nlohmann::ordered_json tool_choice = "auto";
  bool parallel_tool_calls = true;
  double temperature = 1.0;
  double top_p = 0.95;
  std::optional<int64_t> max_output_tokens;
  std::optional<std::string> previous_response_id;
  std::optional<std::string> reasoning_effort;
  std::optional<std::string> reasoning_summary;
  bool store = true;
  nlohmann::ordered_json metadata = nlohmann::ordered_json::object();
  bool return_progress = false;
  std::vector<std::string> namespaces;              // "NS.NAME" calls are reported as namespace + name
  std::optional<uint64_t> id_seed;                  // reproducible item ids in tests

  static ResponseSettings for_request(const ResponsesRequest& request, std::string id, int64_t created_at,
                                      std::string model);
};

// One SSE event: `event: <type>` and its JSON payload (which holds the same "type").
struct ResponseEvent {
  std::string type;
  std::string data;
};
// "event: <type>\ndata: <json>\n\n".
std::string sse_frame(const ResponseEvent& event);

class ResponseEvents {
 public:
  explicit ResponseEvents(ResponseSettings settings);

  std::vector<ResponseEvent> start();
  std::optional<ResponseEvent> progress(const PromptProgress& p);
  std::vector<ResponseEvent> feed(const std::vector<OutputPart>& parts);
  // For kStop / kLength / kContext: closes the open item and sends completed or incomplete.
  std::vector<ResponseEvent> finish(FinishReason end, const GenerationStats& stats, int64_t reasoning_tokens);
  // For endings that are not an answer (generation_error): response.failed with the error.
  std::vector<ResponseEvent> fail(const ApiError& error, const GenerationStats& stats, int64_t reasoning_tokens);

  // The Response object as it stands (status in_progress until finish / fail).
  const nlohmann::ordered_json& response() const { return response_; }
  // The non-stream body: the response plus output_text (all output_text parts joined).
  nlohmann::ordered_json body() const;
  // The output as one assistant chat turn (reasoning_content, content, tool_calls) for the store.
  ChatMessage assistant_turn() const;
  bool finished() const { return finished_; }

 private:
  struct Item {
    enum class Kind : unsigned char { kReasoning, kMessage, kCall };
    Kind kind = Kind::kMessage;
    std::string id;
    std::string text;       // reasoning / message text, or call arguments
    std::string call_id, name, ns;
    int call_index = -1;    // ToolCallDelta::index
    std::string status = "in_progress";
  };
  nlohmann::ordered_json item_json(const Item& item) const;
  nlohmann::ordered_json usage_json(const GenerationStats& stats, int64_t reasoning_tokens) const;
  ResponseEvent event(std::string type, nlohmann::ordered_json payload);
  void open(std::vector<ResponseEvent>& out, Item item);
  void close(std::vector<ResponseEvent>& out, std::string status);
  void append(std::vector<ResponseEvent>& out, std::string_view text);
  std::vector<ResponseEvent> end(std::string status, nlohmann::ordered_json extra, const GenerationStats& stats,
                                 int64_t reasoning_tokens);

  ResponseSettings settings_;
  IdGenerator ids_;
  nlohmann::ordered_json response_;
  std::vector<Item> items_;
  bool open_ = false;       // items_.back() is open
  bool finished_ = false;
  int64_t sequence_ = 0;
};

}  // namespace splash::openai
