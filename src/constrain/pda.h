// Running a Grammar as a pushdown automaton over bytes. A position in the grammar is a Frame: a
// state and the stack below it (an id of an interned frame to return to, shared by every position
// that has the same stack, so parallel stacks cost little). A Config is the set of frames that can
// read the next byte, plus whether the whole grammar may end here.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "constrain/grammar.h"

namespace splash::constrain {

struct Frame {
  int32_t state;
  int32_t parent;  // an id in the FrameArena, or kRoot / kOpen
  bool operator==(const Frame&) const = default;
};

// Below every frame of a whole-grammar run: ending there ends the output.
constexpr int32_t kRoot = -1;
// Below the frame a token-mask cache entry starts from: ending there leaves the part of the stack
// the entry does not know (mask_cache.h).
constexpr int32_t kOpen = -2;

// A counting state's frame keeps its count in its parent: a count frame {kCountBase - count, below}
// sits between it and the real stack below (Grammar::Counter).
constexpr int32_t kCountBase = -16;

// Interned return frames. Ids only grow; an arena lives as long as the configs that use it.
class FrameArena {
 public:
  int32_t intern(Frame f);
  // The count a counting state's frame holds in `parent`, and the stack below it.
  struct Count {
    int32_t count;
    int32_t below;
  };
  Count count_of(int32_t parent) const {
    if (parent >= 0 && frames_[parent].state <= kCountBase) return {kCountBase - frames_[parent].state, frames_[parent].parent};
    return {0, parent};
  }
  int32_t intern_count(int32_t count, int32_t below) { return intern({kCountBase - count, below}); }
  const Frame& operator[](int32_t id) const { return frames_[id]; }
  size_t size() const { return frames_.size(); }
  void clear() {
    frames_.clear();
    index_.clear();
  }

 private:
  std::vector<Frame> frames_;
  std::unordered_map<uint64_t, int32_t> index_;
};

struct Config {
  std::vector<Frame> frames;  // frames whose state has byte edges; no duplicates
  bool can_end = false;       // the root rule may end here (the output may stop)
  bool escaped = false;       // a frame over kOpen reached the end of its rule
  bool dead() const { return frames.empty() && !can_end && !escaped; }
};

class Pda {
 public:
  explicit Pda(const Grammar& g) : g_(g) {}

  // The config at the start of the root rule.
  Config start(FrameArena& arena) const;
  // The config starting at `state` over `parent` (kOpen for cache walks).
  Config from(int32_t state, int32_t parent, FrameArena& arena) const;
  // Reads one byte. `out` is overwritten; it is dead() when the byte is not allowed. The result's
  // can_end / escaped describe the position after the byte.
  void advance(const Config& in, uint8_t byte, FrameArena& arena, Config& out) const;
  // Reads a string; false (and `c` unspecified) when some byte is not allowed.
  bool advance(Config& c, std::string_view bytes, FrameArena& arena) const;

  const Grammar& grammar() const { return g_; }

 private:
  // Adds `f` and everything reachable from it without reading a byte (calls entered, ended rules
  // returned from) to `out`.
  void close(Frame f, FrameArena& arena, Config& out) const;
  // The rule of a frame over `parent` ended: return to it (or end the output / escape the walk).
  void end_rule(int32_t parent, const FrameArena& arena, Config& out, std::vector<Frame>& work) const;

  const Grammar& g_;
};

}  // namespace splash::constrain
