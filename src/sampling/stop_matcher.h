// Stop conditions. Stop strings are matched on the decoded text, across token boundaries; stop
// token ids are a plain set the caller checks on each sampled id.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace splash {

// Streams decoded text through a set of stop strings (OpenAI `stop`, llama.cpp `stop`).
//
// feed() appends a decoded piece and returns the text that is safe to emit now. Text that could
// still be the beginning of a stop string is held back, and so is an incomplete UTF-8 sequence at
// the end, so an emitted chunk never ends inside a character. Generation stops at the first byte
// at which the text contains a stop string (the earliest *end*; among stop strings ending there the
// one starting earliest wins), which makes the result independent of how the text was split into
// pieces. On a match, feed() emits the text before the stop string and the matcher is done: later
// feeds return nothing. finish() returns the held text when generation ended for another reason.
// Not thread-safe; one per sequence.
class StopMatcher {
 public:
  struct Feed {
    std::string emit;          // text to send to the client now
    bool stopped = false;      // a stop string matched (now or before)
    int32_t stop_index = -1;   // which one, index into the constructor's list, when stopped
  };

  // Fails on an empty stop string (it would match before any text) or one that is not valid UTF-8;
  // the message names its index.
  static Result<StopMatcher> create(std::vector<std::string> stops);

  Feed feed(std::string_view piece);
  // End of generation without a match: everything held back (nothing once stopped).
  std::string finish();

  bool stopped() const { return stopped_; }
  int32_t stop_index() const { return stop_index_; }  // the matched string, -1 before a match
  bool empty() const { return stops_.empty(); }
  // Bytes currently held back.
  size_t held_size() const { return held_.size(); }

 private:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  int32_t stop_index_ = -1;
};

// Stop token ids (EOS, <|im_end|>, ...): a sorted set with a membership test.
class StopTokens {
 public:
  StopTokens() = default;
  explicit StopTokens(std::span<const int32_t> ids);
  void add(int32_t id);
  bool contains(int32_t id) const;
  std::span<const int32_t> ids() const { return ids_; }

 private:
  std::vector<int32_t> ids_;  // sorted, unique
};

// Length of the longest prefix of `text` that ends on a UTF-8 character boundary, treating a
// truncated multi-byte sequence at the very end (at most 3 bytes) as not yet complete. Invalid
// bytes are not held: only a lead byte whose continuation bytes have not arrived yet is.
// (Not named utf8_complete_prefix: the tokenizer module defines that symbol, and both link into splash.)
size_t utf8_text_boundary(std::string_view text);

}  // namespace splash
