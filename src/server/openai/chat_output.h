// The whole output side of one chat completion: model text pieces in, reasoning / content / tool-call
// parts out (ReasoningSplitter, then ToolCallParser on the content), plus the totals a non-stream
// body and the usage block need. Not thread-safe; one per request.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/openai/reasoning_splitter.h"
#include "server/openai/request.h"
#include "server/openai/tool_call_parser.h"

namespace splash::openai {

struct ChatOutputOptions {
  bool start_in_reasoning = false;     // prompt_opens_reasoning(prompt)
  bool parse_tool_calls = false;       // request.tools_callable()
  std::vector<Tool> tools;             // for parameter types
  bool parallel_tool_calls = true;
  std::optional<uint64_t> id_seed;     // reproducible call ids in tests
  std::string call_id_prefix = "call_";  // tool-call ids: "call_" (OpenAI), "toolu_" (Messages)

  static ChatOutputOptions for_request(const ChatRequest& request, std::string_view prompt);
};

class ChatOutput {
 public:
  explicit ChatOutput(ChatOutputOptions options);

  // `n_tokens`: how many generated tokens made this piece (for usage.reasoning_tokens: a piece's
  // tokens count as reasoning when the piece began or ended inside a reasoning block or produced
  // reasoning text; the engine's pieces are a token or two, so the tags count as reasoning).
  std::vector<OutputPart> feed(std::string_view piece, int64_t n_tokens = 0);
  std::vector<OutputPart> finish();

  const std::string& reasoning() const { return reasoning_; }
  const std::string& content() const { return content_; }
  const std::vector<ToolCall>& tool_calls() const { return tools_.calls(); }
  int64_t reasoning_tokens() const { return reasoning_tokens_; }

 private:
  std::vector<OutputPart> route(ReasoningDelta delta, bool at_end);

  bool parse_tool_calls_;
  ReasoningSplitter splitter_;
  ToolCallParser tools_;
  std::string reasoning_;
  std::string content_;
  int64_t reasoning_tokens_ = 0;
};

}  // namespace splash::openai
