// Incremental detokenizer for streaming: feed generated ids one at a time and get back only text that
// ends on a UTF-8 character boundary (never half a character, even when a character spans several
// byte-level or <0xXX> byte-fallback tokens). The concatenation of everything returned by push() and
// flush() equals Tokenizer::decode(all ids) byte for byte.
//
// One per stream; not thread-safe. Holds a reference to the tokenizer, which must outlive it.
#pragma once

#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace splash {

class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special = false)
      : tokenizer_(&tokenizer), skip_special_(skip_special) {}

  // Returns the newly completed text (possibly empty).
  std::string push(int32_t id);
  // End of stream: returns whatever is still held back (an incomplete sequence, passed through as is).
  std::string flush();

  // Bytes held back waiting for the rest of a character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  bool at_start_ = true;
  std::string pending_;
};

// Length of the longest prefix of `s` that does not end inside a UTF-8 sequence that could still be
// completed by more bytes. Bytes that can never become valid UTF-8 are not held back.
size_t utf8_complete_prefix(std::string_view s);

}  // namespace splash
