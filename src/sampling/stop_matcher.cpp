#include "sampling/stop_matcher.h"

#include <algorithm>

namespace splash {
namespace {

// Expected length of a UTF-8 sequence from its lead byte; 0 for a continuation or invalid byte.
int utf8_sequence_length(unsigned char c) {
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return 2;
  if (c >= 0xE0 && c <= 0xEF) return 3;
  if (c >= 0xF0 && c <= 0xF4) return 4;
  return 0;
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const int len = utf8_sequence_length(static_cast<unsigned char>(s[i]));
    if (len == 0 || i + len > s.size()) return false;
    for (int k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

}  // namespace

size_t utf8_text_boundary(std::string_view text) {
  // Look back at most 3 bytes for the lead byte of the last sequence.
  const size_t n = text.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(text[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    const int len = utf8_sequence_length(c);
    return (len > static_cast<int>(back)) ? n - back : n;
  }
  return n;
}

Result<StopMatcher> StopMatcher::create(std::vector<std::string> stops) {
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) return make_error("stop: stop string ", i, " is empty");
    if (!is_valid_utf8(stops[i])) return make_error("stop: stop string ", i, " is not valid UTF-8");
  }
  return StopMatcher(std::move(stops));
}

StopMatcher::Feed StopMatcher::feed(std::string_view piece) {
  Feed out;
  if (stopped_) {
    out.stopped = true;
    out.stop_index = stop_index_;
    return out;
  }
  held_.append(piece);

  // Earliest end, then earliest start. held_ had no complete match before this piece, so the first
  // occurrence of each stop string is the one that ends earliest.
  size_t best_end = std::string::npos;
  size_t best_pos = 0;
  int32_t best = -1;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t pos = held_.find(stops_[i]);
    if (pos == std::string::npos) continue;
    const size_t end = pos + stops_[i].size();
    if (end < best_end || (end == best_end && pos < best_pos)) {
      best_end = end;
      best_pos = pos;
      best = static_cast<int32_t>(i);
    }
  }
  if (best >= 0) {
    stopped_ = true;
    stop_index_ = best;
    out.emit = held_.substr(0, best_pos);
    out.stopped = true;
    out.stop_index = best;
    held_.clear();
    return out;
  }

  // Hold back the longest suffix that is a proper prefix of some stop string. A stop string starts
  // on a character boundary (it is valid UTF-8), so this cut never splits a character.
  size_t hold = 0;
  for (const auto& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, held_.size());
    for (size_t len = max_len; len > hold; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  const size_t emit_len = std::min(held_.size() - hold, utf8_text_boundary(held_));
  out.emit = held_.substr(0, emit_len);
  held_.erase(0, emit_len);
  return out;
}

std::string StopMatcher::finish() {
  if (stopped_) return {};
  std::string rest;
  rest.swap(held_);
  return rest;
}

StopTokens::StopTokens(std::span<const int32_t> ids) : ids_(ids.begin(), ids.end()) {
  std::sort(ids_.begin(), ids_.end());
  ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
}

void StopTokens::add(int32_t id) {
  auto it = std::lower_bound(ids_.begin(), ids_.end(), id);
  if (it == ids_.end() || *it != id) ids_.insert(it, id);
}

bool StopTokens::contains(int32_t id) const {
  return std::binary_search(ids_.begin(), ids_.end(), id);
}

}  // namespace splash
