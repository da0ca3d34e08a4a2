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
    ++m.nodes_visited;
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

MaskCache::CountTable MaskCache::compute_count_table(const Grammar& g, const Grammar::Counter& k, int32_t state,
                                                      const Vocabulary& vocab) {
  CountTable table;
  table.full.assign(vocab.mask_words(), 0);
  const auto& nodes = vocab.nodes();
  const auto& ids = vocab.token_ids();
  const auto n = static_cast<int32_t>(nodes.size());
  const int32_t item_start = g.rules[k.item].start;
  constexpr int32_t kBoundary = -2;  // between two characters: the next byte starts one
  // Per depth of the current trie path: the item state, characters started and completed after the
  // current one, and the first / last boundary whose next byte may follow the repetition.
  const size_t depth = vocab.max_depth() + 1;
  std::vector<int32_t> at(depth), started(depth), complete(depth), first_exit(depth), last_exit(depth);
  at[0] = state;
  started[0] = 0;
  complete[0] = -1;
  first_exit[0] = INT16_MAX;
  last_exit[0] = -1;
  auto entry = [](int32_t t, int32_t st, int32_t first, int32_t last) {
    return CountTable::Entry{t, static_cast<int16_t>(st), static_cast<int16_t>(std::min<int32_t>(first, INT16_MAX)),
                             static_cast<int16_t>(last)};
  };
  int32_t i = 1;
  while (i < n) {
    const Vocabulary::Node& node = nodes[i];
    const size_t d = node.depth;
    int32_t x = at[d - 1], st = started[d - 1], done = complete[d - 1];
    int32_t first = first_exit[d - 1], last = last_exit[d - 1];
    if (x == kBoundary) {
      if (k.follow.has(node.byte)) {
        first = std::min(first, done);
        last = done;
      }
      x = item_start;
      ++st;
    }
    const int32_t to = g.step(x, node.byte);
    if (to < 0) {  // the repetition cannot read this byte: the subtree can only have left it earlier
      if (last >= 0) {
        const int32_t end = node.end < n ? nodes[node.end].tokens_begin : static_cast<int32_t>(ids.size());
        for (int32_t j = node.tokens_begin; j < end; ++j) table.leaving.push_back(entry(ids[j], st, first, last));
      }
      i = node.end;
      continue;
    }
    if (g.states[to].accepting) {
      at[d] = kBoundary;
      ++done;
    } else {
      at[d] = to;
    }
    started[d] = st;
    complete[d] = done;
    first_exit[d] = first;
    last_exit[d] = last;
    for (int32_t j = node.tokens_begin; j < node.tokens_end; ++j) {
      const int32_t t = ids[j];
      table.full[t >> 6] |= uint64_t{1} << (t & 63);
      if (st > 0) table.long_full.push_back(entry(t, st, first, last));
    }
    ++i;
  }
  std::stable_sort(table.long_full.begin(), table.long_full.end(),
                   [](const CountTable::Entry& a, const CountTable::Entry& b) { return a.started > b.started; });
  return table;
}

std::shared_ptr<const StateMask> MaskCache::get_counted(const Pda& pda, int32_t state, const Grammar::Counter& k,
                                                        int32_t count) {
  // Only min(bound, longest token + 1) matters: no token starts or completes more characters.
  const int32_t cap = static_cast<int32_t>(vocab_->max_depth()) + 1;
  const int32_t need = std::clamp(k.lo - count, 0, cap);
  const int32_t room = k.hi < 0 ? cap : std::clamp(k.hi - count, 0, cap);
  uint64_t table_key = pda.grammar().state_keys[state] * 0x9e3779b97f4a7c15ull + 0xC0;
  for (uint64_t w : k.follow.bits) table_key = (table_key ^ w) * 0x100000001b3ull;
  const uint64_t key = (table_key ^ (static_cast<uint64_t>(need) << 40) ^ (static_cast<uint64_t>(room) << 20)) | 1;
  std::shared_ptr<const CountTable> table;
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) return it->second;
    auto tt = count_tables_.find(table_key);
    if (tt != count_tables_.end()) table = tt->second;
  }
  if (!table) {
    auto built = std::make_shared<const CountTable>(compute_count_table(pda.grammar(), k, state, *vocab_));
    std::lock_guard lock(mu_);
    table = count_tables_.emplace(table_key, std::move(built)).first->second;
  }
  auto m = std::make_shared<StateMask>();
  m->accepted = table->full;
  std::vector<int32_t> over;  // full tokens that start too many characters, and may leave earlier
  for (const CountTable::Entry& e : table->long_full) {
    if (e.started <= room) break;
    m->accepted[e.token >> 6] &= ~(uint64_t{1} << (e.token & 63));
    if (e.may_leave(need, room)) over.push_back(e.token);
  }
  for (const CountTable::Entry& e : table->leaving) {
    if (e.may_leave(need, room)) m->uncertain.push_back(e.token);
  }
  m->uncertain.insert(m->uncertain.end(), over.begin(), over.end());
  for (uint64_t w : m->accepted) m->n_accepted += __builtin_popcountll(w);
  std::lock_guard lock(mu_);
  return entries_.emplace(key, std::move(m)).first->second;
}

size_t MaskCache::entries() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

}  // namespace splash::constrain
