#include "constrain/pda.h"

#include <algorithm>

namespace splash::constrain {

int32_t FrameArena::intern(Frame f) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(f.state)) << 32) | static_cast<uint32_t>(f.parent);
  auto [it, fresh] = index_.emplace(key, static_cast<int32_t>(frames_.size()));
  if (fresh) frames_.push_back(f);
  return it->second;
}

namespace {

bool contains(const std::vector<Frame>& v, Frame f) { return std::find(v.begin(), v.end(), f) != v.end(); }

}  // namespace

void Pda::close(Frame seed, FrameArena& arena, Config& out) const {
  // Frames passed through without byte edges, so a cycle of calls and returns ends.
  thread_local std::vector<Frame> work, through;
  work.clear();
  through.clear();
  work.push_back(seed);
  while (!work.empty()) {
    const Frame f = work.back();
    work.pop_back();
    const Grammar::State& st = g_.states[f.state];
    const bool edges = st.edges_begin != st.edges_end;
    if (edges ? contains(out.frames, f) : contains(through, f)) continue;
    (edges ? out.frames : through).push_back(f);
    if (st.counter >= 0) {
      // Another character while the count is below hi; the end once it reaches lo.
      const Grammar::Counter& k = g_.counters[st.counter];
      const FrameArena::Count c = arena.count_of(f.parent);
      if (k.hi < 0 || c.count < k.hi) {
        const int32_t next = k.hi < 0 ? std::min(c.count + 1, k.lo) : c.count + 1;
        const int32_t ret = arena.intern({f.state, arena.intern_count(next, c.below)});
        work.push_back({g_.rules[k.item].start, ret});
      }
      if (c.count >= k.lo) end_rule(c.below, arena, out, work);
      continue;
    }
    for (uint32_t i = st.calls_begin; i < st.calls_end; ++i) {
      const Grammar::Call& c = g_.calls[i];
      const int32_t ret = arena.intern({c.to, f.parent});
      work.push_back({g_.rules[c.rule].start, ret});
    }
    if (st.accepting) end_rule(f.parent, arena, out, work);
  }
}

void Pda::end_rule(int32_t parent, const FrameArena& arena, Config& out, std::vector<Frame>& work) const {
  if (parent == kRoot) {
    out.can_end = true;
  } else if (parent == kOpen) {
    out.escaped = true;
  } else {
    work.push_back(arena[parent]);
  }
}

Config Pda::start(FrameArena& arena) const { return from(g_.rules[g_.root].start, kRoot, arena); }

Config Pda::from(int32_t state, int32_t parent, FrameArena& arena) const {
  Config c;
  close({state, parent}, arena, c);
  return c;
}

void Pda::advance(const Config& in, uint8_t byte, FrameArena& arena, Config& out) const {
  out.frames.clear();
  out.can_end = false;
  out.escaped = false;
  for (const Frame& f : in.frames) {
    const int32_t to = g_.step(f.state, byte);
    if (to < 0) continue;
    const Grammar::State& st = g_.states[to];
    if (st.calls_begin == st.calls_end && !st.accepting) {
      // Nothing to enter or return from (the common case inside strings and literals): a live state
      // without calls or an end has byte edges, so the frame stands as it is.
      const Frame next{to, f.parent};
      if (in.frames.size() == 1 || !contains(out.frames, next)) out.frames.push_back(next);
      continue;
    }
    close({to, f.parent}, arena, out);
  }
}

bool Pda::advance(Config& c, std::string_view bytes, FrameArena& arena) const {
  Config next;
  for (char ch : bytes) {
    advance(c, static_cast<uint8_t>(ch), arena, next);
    if (next.dead()) return false;
    std::swap(c, next);
  }
  return true;
}

}  // namespace splash::constrain
