#include "tokenizer/detokenizer.h"

namespace splash {

size_t utf8_complete_prefix(std::string_view s) {
  // Only the last (at most 3) bytes can be the start of an unfinished sequence.
  const size_t n = s.size();
  size_t back = n < 4 ? n : 4;
  for (size_t k = 1; k <= back; ++k) {
    const auto c = static_cast<unsigned char>(s[n - k]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead byte
    size_t need = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    // Lead byte found k bytes from the end: the sequence is unfinished iff it needs more than k bytes.
    return need > k ? n - k : n;
  }
  return n;  // only continuation bytes at the end: nothing can complete them
}

std::string IncrementalDetokenizer::push(int32_t id) {
  tokenizer_->append_piece(id, skip_special_, at_start_, pending_);
  size_t done = utf8_complete_prefix(pending_);
  std::string out = pending_.substr(0, done);
  pending_.erase(0, done);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  std::string out = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace splash
