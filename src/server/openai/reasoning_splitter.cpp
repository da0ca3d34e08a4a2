#include "server/openai/reasoning_splitter.h"

#include <algorithm>

namespace splash::openai {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

std::size_t skip_space(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && is_space_byte(s[i])) ++i;
  return i;
}

}  // namespace

bool is_space_byte(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  std::size_t max = std::min(text.size(), tag.size() - 1);
  for (std::size_t n = max; n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

ReasoningSplitter::ReasoningSplitter(Options options)
    : state_(options.start_in_reasoning ? State::kReasoningStart : State::kStart) {}

ReasoningDelta ReasoningSplitter::feed(std::string_view piece) {
  ReasoningDelta out;
  held_.append(piece);
  // Each pass either finishes (waiting for more text) or moves to a later state.
  for (;;) {
    std::string_view h = held_;
    switch (state_) {
      case State::kStart: {
        std::string_view rest = h.substr(skip_space(h));
        if (rest.substr(0, kOpen.size()) == kOpen) {
          held_.erase(0, h.size() - rest.size() + kOpen.size());
          state_ = State::kReasoningStart;
          continue;
        }
        if (rest.size() < kOpen.size() && kOpen.substr(0, rest.size()) == rest) return out;  // undecided
        state_ = State::kContent;
        continue;
      }
      case State::kReasoningStart: {
        std::size_t ws = skip_space(h);
        std::string_view rest = h.substr(ws);
        // A model may repeat the `<think>` the prompt already opened.
        if (rest.substr(0, kOpen.size()) == kOpen) {
          held_.erase(0, ws + kOpen.size());
          continue;
        }
        if (rest.size() < kOpen.size() && kOpen.substr(0, rest.size()) == rest) return out;  // undecided
        held_.erase(0, ws);
        state_ = State::kReasoning;
        continue;
      }
      case State::kReasoning: {
        auto close = h.find(kClose);
        if (close != std::string_view::npos) {
          std::string_view body = h.substr(0, close);
          while (!body.empty() && is_space_byte(body.back())) body.remove_suffix(1);
          out.reasoning.append(body);
          held_.erase(0, close + kClose.size());
          state_ = State::kContentStart;
          continue;
        }
        // Hold a possible partial `</think>` and the whitespace before it (dropped if the tag follows).
        std::size_t keep_from = h.size() - partial_tag_suffix(h, kClose);
        while (keep_from > 0 && is_space_byte(h[keep_from - 1])) --keep_from;
        out.reasoning.append(h.substr(0, keep_from));
        held_.erase(0, keep_from);
        return out;
      }
      case State::kContentStart: {
        std::size_t ws = skip_space(h);
        held_.erase(0, ws);
        if (held_.empty()) return out;
        state_ = State::kContent;
        continue;
      }
      case State::kContent:
        out.content.append(held_);
        held_.clear();
        return out;
    }
  }
}

ReasoningDelta ReasoningSplitter::finish() {
  ReasoningDelta out;
  switch (state_) {
    case State::kStart:
      out.content = std::move(held_);
      break;
    case State::kReasoningStart:
      out.reasoning.append(std::string_view(held_).substr(skip_space(held_)));
      break;
    case State::kReasoning:
      out.reasoning = std::move(held_);
      break;
    case State::kContentStart:
    case State::kContent:
      break;
  }
  held_.clear();
  return out;
}

}  // namespace splash::openai
