#include "constrain/matcher.h"

#include <algorithm>
#include <cstring>

namespace splash::constrain {

Matcher::Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<MaskCache> cache)
    : grammar_(std::move(grammar)), cache_(std::move(cache)), pda_(*grammar_) {
  history_.push_back(pda_.start(arena_));
  ended_.push_back(0);
  digests_.assign(grammar_->states.size(), 0);
}

Matcher::Matcher(const Matcher& o)
    : grammar_(o.grammar_),
      cache_(o.cache_),
      pda_(*grammar_),
      arena_(o.arena_),
      history_(o.history_),
      ended_(o.ended_),
      digests_(o.digests_) {}

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
  const Vocabulary& vocab = cache_->vocab();
  const size_t words = vocab.mask_words();
  std::memset(mask, 0, words * sizeof(uint64_t));
  if (ended()) return;
  const Config& c = history_.back();
  Config probe;
  for (const Frame& f : c.frames) {
    uint64_t& digest = digests_[f.state];
    if (digest == 0) digest = grammar_->state_digest(f.state) | 1;
    const auto entry = cache_->get(pda_, f.state, digest);
    for (size_t w = 0; w < words; ++w) mask[w] |= entry->accepted[w];
    for (int32_t t : entry->uncertain) {
      if ((mask[t >> 6] >> (t & 63)) & 1) continue;
      probe.frames.assign(1, f);
      probe.can_end = probe.escaped = false;
      if (pda_.advance(probe, vocab.bytes(t), arena_)) mask[t >> 6] |= uint64_t{1} << (t & 63);
    }
  }
  if (c.can_end) {
    for (int32_t t : vocab.stop_tokens()) mask[t >> 6] |= uint64_t{1} << (t & 63);
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
