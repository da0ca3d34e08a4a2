#include "constrain/matcher.h"

#include <algorithm>
#include <cstring>

namespace splash::constrain {

Matcher::Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<MaskCache> cache)
    : grammar_(std::move(grammar)), cache_(std::move(cache)), pda_(*grammar_) {
  history_.push_back(pda_.start(arena_));
  ended_.push_back(0);
}

Matcher::Matcher(const Matcher& o)
    : grammar_(o.grammar_),
      cache_(o.cache_),
      pda_(*grammar_),
      arena_(o.arena_),
      history_(o.history_),
      ended_(o.ended_),
      memo_(o.memo_),
      memo_next_(o.memo_next_),
      timing_(o.timing_) {}

bool Matcher::is_stop(int32_t token) const {
  const auto& stops = cache_->vocab().stop_tokens();
  return std::find(stops.begin(), stops.end(), token) != stops.end();
}

bool Matcher::allows(int32_t token) const {
  if (ended()) return false;
  const Config& c = history_.back();
  if (is_stop(token)) return c.can_end;
  const std::string& bytes = cache_->vocab().bytes(token);
  if (bytes.empty()) return false;
  Config probe = c;
  return pda_.advance(probe, bytes, arena_);
}

bool Matcher::accept(int32_t token) {
  if (ended()) return false;
  Config c = history_.back();
  if (is_stop(token)) {
    if (!c.can_end) return false;
    c.frames.clear();
    history_.push_back(std::move(c));
    ended_.push_back(1);
    return true;
  }
  const std::string& bytes = cache_->vocab().bytes(token);
  if (bytes.empty() || !pda_.advance(c, bytes, arena_)) return false;
  history_.push_back(std::move(c));
  ended_.push_back(0);
  return true;
}

void Matcher::rollback(size_t n) {
  SPLASH_CHECK(n <= accepted());
  history_.resize(history_.size() - n);
  ended_.resize(ended_.size() - n);
}

void Matcher::fill_mask(uint64_t* mask) const {
  const size_t words = cache_->vocab().mask_words();
  if (ended()) {
    std::memset(mask, 0, words * sizeof(uint64_t));
    return;
  }
  const Config& c = history_.back();
  for (const Memo& m : memo_) {
    if (m.config.can_end == c.can_end && m.config.frames == c.frames) {
      std::memcpy(mask, m.mask.data(), words * sizeof(uint64_t));
      return;
    }
  }
  compute_mask(c, mask);
  if (memo_.size() < kMemoSize) memo_.emplace_back();
  Memo& slot = memo_[memo_next_++ % kMemoSize];
  slot.config = c;
  slot.mask.assign(mask, mask + words);
}

void Matcher::compute_mask(const Config& c, uint64_t* mask) const {
  const Vocabulary& vocab = cache_->vocab();
  const size_t words = vocab.mask_words();
  std::memset(mask, 0, words * sizeof(uint64_t));
  const Grammar& g = *grammar_;
  for (const Frame& f : c.frames) {
    // A character of a counting rule: its entry depends on the count, held below the return frame.
    const Frame* ret = f.parent >= 0 ? &arena_[f.parent] : nullptr;
    const int32_t counter = ret != nullptr && ret->state >= 0 ? g.states[ret->state].counter : -1;
    const auto entry = counter >= 0
                           ? cache_->get_counted(pda_, f.state, g.counters[counter], arena_.count_of(ret->parent).count)
                           : cache_->get(pda_, f.state);
    const uint64_t* acc = entry->accepted.data();
    for (size_t w = 0; w < words; ++w) mask[w] |= acc[w];
    check_uncertain(f, *entry, mask);
  }
  if (c.can_end) {
    for (int32_t t : vocab.stop_tokens()) mask[t >> 6] |= uint64_t{1} << (t & 63);
  }
}

void Matcher::check_uncertain(const Frame& f, const StateMask& entry, uint64_t* mask) const {
  // Tokens come in trie order: each resumes from the position after the prefix it shares with the
  // last one checked, and a prefix that died rejects every following token that starts with it.
  const Vocabulary& vocab = cache_->vocab();
  thread_local std::vector<Config> at;  // at[d]: the position after d bytes of the current token
  if (at.size() < vocab.max_depth() + 1) at.resize(vocab.max_depth() + 1);
  at[0].frames.assign(1, f);
  at[0].can_end = at[0].escaped = false;
  std::string_view prev;
  size_t dead_at = SIZE_MAX;  // prev's prefix of this length is not allowed
  for (int32_t t : entry.uncertain) {
    if ((mask[t >> 6] >> (t & 63)) & 1) continue;
    const std::string& bytes = vocab.bytes(t);
    size_t common = 0;
    const size_t limit = std::min(prev.size(), bytes.size());
    while (common < limit && prev[common] == bytes[common]) ++common;
    if (dead_at <= common) continue;
    dead_at = SIZE_MAX;
    size_t d = common;
    for (; d < bytes.size(); ++d) {
      pda_.advance(at[d], static_cast<uint8_t>(bytes[d]), arena_, at[d + 1]);
      if (at[d + 1].dead()) {
        dead_at = d + 1;
        break;
      }
    }
    if (dead_at == SIZE_MAX) mask[t >> 6] |= uint64_t{1} << (t & 63);
    prev = bytes;
  }
}

void Matcher::fill_mask_reference(uint64_t* mask) const {
  const Vocabulary& vocab = cache_->vocab();
  std::memset(mask, 0, vocab.mask_words() * sizeof(uint64_t));
  for (int32_t t = 0; t < vocab.size(); ++t) {
    if (allows(t)) mask[t >> 6] |= uint64_t{1} << (t & 63);
  }
}

}  // namespace splash::constrain
