#include "constrain/mask_cache.h"

#include <algorithm>

namespace splash::constrain {

StateMask MaskCache::compute(const Pda& pda, int32_t state, const Vocabulary& vocab) {
  StateMask m;
  m.accepted.assign(vocab.mask_words(), 0);
  const auto& nodes = vocab.nodes();
  const auto& ids = vocab.token_ids();
  FrameArena arena;
  // configs[d]: the position after the first d bytes of the current trie path; escaped_before[d]:
  // whether the rule could end after some 1..d-1 bytes of it (a depth-0 end is the popped frames'
  // business: they are in the runtime config too).
  std::vector<Config> configs(vocab.max_depth() + 1);
  std::vector<char> escaped_upto(vocab.max_depth() + 1, 0);
  configs[0].frames.push_back({state, kOpen});
  auto mark_uncertain = [&](int32_t from, int32_t to) {
    for (int32_t i = from; i < to; ++i) {
      for (int32_t k = nodes[i].tokens_begin; k < nodes[i].tokens_end; ++k) m.uncertain.push_back(ids[k]);
    }
  };
  int32_t i = 1;
  const auto n = static_cast<int32_t>(nodes.size());
  while (i < n) {
    const Vocabulary::Node& node = nodes[i];
    const size_t d = node.depth;
    Config& c = configs[d];
    pda.advance(configs[d - 1], node.byte, arena, c);
    const bool before = escaped_upto[d - 1];
    if (c.frames.empty() && !c.escaped) {
      if (before) mark_uncertain(i, node.end);
      i = node.end;
      continue;
    }
    for (int32_t k = node.tokens_begin; k < node.tokens_end; ++k) {
      const int32_t t = ids[k];
      m.accepted[t >> 6] |= uint64_t{1} << (t & 63);
      ++m.n_accepted;
    }
    escaped_upto[d] = before || c.escaped;
    if (c.frames.empty()) {  // ended exactly here: longer tokens continue in the stack below
      mark_uncertain(i + 1, node.end);
      i = node.end;
      continue;
    }
    ++i;
  }
  return m;
}

std::shared_ptr<const StateMask> MaskCache::get(const Pda& pda, int32_t state) {
  const uint64_t digest = pda.grammar().state_keys[state];
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(digest);
    if (it != entries_.end()) return it->second;
  }
  // Computed outside the lock: two threads may both compute a new entry; the first stored wins.
  auto entry = std::make_shared<const StateMask>(compute(pda, state, *vocab_));
  std::lock_guard lock(mu_);
  return entries_.emplace(digest, std::move(entry)).first->second;
}

size_t MaskCache::entries() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace splash::constrain
