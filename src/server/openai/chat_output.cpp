#include "server/openai/chat_output.h"

#include "server/openai/render.h"

namespace splash::openai {

ChatOutputOptions ChatOutputOptions::for_request(const ChatRequest& request, std::string_view prompt) {
  ChatOutputOptions o;
  o.start_in_reasoning = prompt_opens_reasoning(prompt);
  o.parse_tool_calls = request.tools_callable();
  o.tools = request.tools;
  o.parallel_tool_calls = request.parallel_tool_calls;
  return o;
}

ChatOutput::ChatOutput(ChatOutputOptions options)
    : parse_tool_calls_(options.parse_tool_calls),
      splitter_(ReasoningSplitter::Options{options.start_in_reasoning}),
      tools_(ToolCallParser::Options{std::move(options.tools), options.parallel_tool_calls, options.id_seed,
                                     std::move(options.call_id_prefix)}) {}

std::vector<OutputPart> ChatOutput::feed(std::string_view piece, int64_t n_tokens) {
  bool was_reasoning = splitter_.in_reasoning();
  ReasoningDelta delta = splitter_.feed(piece);
  if (was_reasoning || splitter_.in_reasoning() || !delta.reasoning.empty()) reasoning_tokens_ += n_tokens;
  return route(std::move(delta), false);
}

std::vector<OutputPart> ChatOutput::finish() { return route(splitter_.finish(), true); }

std::vector<OutputPart> ChatOutput::route(ReasoningDelta delta, bool at_end) {
  std::vector<OutputPart> parts;
  if (!delta.reasoning.empty()) {
    reasoning_ += delta.reasoning;
    OutputPart p;
    p.kind = OutputPart::Kind::kReasoning;
    p.text = std::move(delta.reasoning);
    parts.push_back(std::move(p));
  }
  std::vector<OutputPart> content;
  if (parse_tool_calls_) {
    content = tools_.feed(delta.content);
    if (at_end) {
      for (auto& p : tools_.finish()) content.push_back(std::move(p));
    }
  } else if (!delta.content.empty()) {
    OutputPart p;
    p.kind = OutputPart::Kind::kContent;
    p.text = std::move(delta.content);
    content.push_back(std::move(p));
  }
  for (auto& p : content) {
    if (p.kind == OutputPart::Kind::kContent) {
      // Adjacent content parts (the tool parser's before and after an abandoned tag) become one.
      if (!parts.empty() && parts.back().kind == OutputPart::Kind::kContent) {
        content_ += p.text;
        parts.back().text += p.text;
        continue;
      }
      content_ += p.text;
    }
    parts.push_back(std::move(p));
  }
  return parts;
}

}  // namespace splash::openai
