// Splits streamed model output into reasoning (`<think>` ... `</think>`) and content, one text piece at
// a time. A tag cut across pieces never leaks into either side: text that may be the start of a tag is
// held back until the next piece decides it. Results do not depend on where the pieces were cut.
//
// Rules: a `<think>` opens reasoning only before any content (leading whitespace allowed); the first
// `</think>` closes it for good. Newlines right after `<think>` and right before `</think>` are dropped,
// as is the whitespace between `</think>` and the content (Qwen3 writes "<think>\n...\n</think>\n\n").
// Not thread-safe; one per request.
#pragma once

#include <string>
#include <string_view>

namespace splash::openai {

struct ReasoningDelta {
  std::string reasoning;
  std::string content;
};

class ReasoningSplitter {
 public:
  struct Options {
    // The prompt already opened `<think>` (see prompt_opens_reasoning): output starts as reasoning.
    bool start_in_reasoning = false;
  };
  explicit ReasoningSplitter(Options options);
  ReasoningSplitter() : ReasoningSplitter(Options{}) {}

  ReasoningDelta feed(std::string_view piece);
  // End of output: whatever was held back goes out (an unclosed block stays reasoning).
  ReasoningDelta finish();
  // Inside a reasoning block (or about to be, at the start of a prompt-opened one).
  bool in_reasoning() const { return state_ == State::kReasoningStart || state_ == State::kReasoning; }

 private:
  enum class State : unsigned char { kStart, kReasoningStart, kReasoning, kContentStart, kContent };
  State state_;
  std::string held_;
};

// Length of the longest suffix of `text` that is a proper prefix of `tag` (text that may become the
// tag when more arrives).
std::size_t partial_tag_suffix(std::string_view text, std::string_view tag);
bool is_space_byte(char c);

}  // namespace splash::openai
