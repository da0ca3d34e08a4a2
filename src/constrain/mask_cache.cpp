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
  auto mark_uncertain = [&](int32_t from, int32_t to) {
    for (int32_t i = from; i < to; ++i) {
      for (int32_t k = nodes[i].tokens_begin; k < nodes[i].tokens_end; ++k) m.uncertain.push_back(ids[k]);
    }
  };
  // Most positions of a walk are one frame whose next state neither calls nor ends a rule (inside a
  // string, a literal, a number): those steps keep just the frame (`single`), no Config.
  const Grammar& g = pda.grammar();
  std::vector<Frame> single(vocab.max_depth() + 1);
  std::vector<char> simple(vocab.max_depth() + 1, 0);
  single[0] = {state, kOpen};
  simple[0] = 1;
  Config parent;
  int32_t i = 1;
  const auto n = static_cast<int32_t>(nodes.size());
  while (i < n) {
    const Vocabulary::Node& node = nodes[i];
    const size_t d = node.depth;
    const bool before = escaped_upto[d - 1];
    bool frames = true, escaped = false;
    simple[d] = 0;
    if (simple[d - 1]) {
      const Frame f = single[d - 1];
      const int32_t to = g.step(f.state, node.byte);
      const Grammar::State* st = to >= 0 ? &g.states[to] : nullptr;
      if (st != nullptr && st->calls_begin == st->calls_end && !st->accepting) {
        single[d] = {to, f.parent};
        simple[d] = 1;
      } else {
        parent.frames.assign(1, f);
        parent.can_end = parent.escaped = false;
        pda.advance(parent, node.byte, arena, configs[d]);
      }
    } else {
      pda.advance(configs[d - 1], node.byte, arena, configs[d]);
    }
    if (!simple[d]) {
      const Config& c = configs[d];
      frames = !c.frames.empty();
      escaped = c.escaped;
      if (c.frames.size() == 1 && !c.escaped && !c.can_end) {
        single[d] = c.frames[0];
        simple[d] = 1;
      }
    }
    if (!frames && !escaped) {
      if (before) mark_uncertain(i, node.end);
      i = node.end;
      continue;
    }
    for (int32_t k = node.tokens_begin; k < node.tokens_end; ++k) {
      const int32_t t = ids[k];
      m.accepted[t >> 6] |= uint64_t{1} << (t & 63);
      ++m.n_accepted;
    }
    escaped_upto[d] = before || escaped;
    if (!frames) {  // ended exactly here: longer tokens continue in the stack below
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
