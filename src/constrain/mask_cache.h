// Per-state token masks, computed once per (vocabulary, sub-grammar) and shared by every grammar
// that contains the same sub-grammar (the adaptive token-mask cache of XGrammar). For a state, a walk
// of the vocabulary trie with an unknown stack below sorts every token into:
// - accepted: read entirely inside the state's rule (and rules it calls): allowed whatever the stack;
// - uncertain: the rule can end part-way through the token, so the rest depends on the stack below:
//   the matcher checks these one by one against the real stack;
// - rejected: the rest.
// Inside a JSON string almost every token is accepted and only those with a closing quote followed
// by more bytes are uncertain, so a mask costs a bitset OR plus a few hundred short checks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "constrain/pda.h"
#include "constrain/vocabulary.h"

namespace splash::constrain {

struct StateMask {
  std::vector<uint64_t> accepted;  // bitset over the vocabulary
  std::vector<int32_t> uncertain;  // token ids in the trie's order, so checks share common prefixes
  int64_t n_accepted = 0;
  int64_t nodes_visited = 0;  // trie nodes the walk stepped through (its cost)
};

// Thread-safe: masks may be computed on a helper thread while the engine samples on another.
class MaskCache {
 public:
  explicit MaskCache(std::shared_ptr<const Vocabulary> vocab) : vocab_(std::move(vocab)) {}

  const Vocabulary& vocab() const { return *vocab_; }
  // The mask entry for `state` of `pda`'s grammar (keyed by grammar().state_keys[state]).
  std::shared_ptr<const StateMask> get(const Pda& pda, int32_t state);
  size_t entries() const;

  // The mask entry for a frame at `state` of counter `k`'s item (one character) whose count, this
  // character included, is `count`. A token read entirely inside the repetition is allowed when it
  // starts at most hi - count more characters; one that leaves it is uncertain when it can leave
  // at a character boundary the count allows. Derived from the item's CountTable (one trie walk
  // per item state, shared by every count, bound and grammar) in about a bitset copy.
  std::shared_ptr<const StateMask> get_counted(const Pda& pda, int32_t state, const Grammar::Counter& k, int32_t count);

  // The walk behind get(), exposed for tests.
  static StateMask compute(const Pda& pda, int32_t state, const Vocabulary& vocab);

  // Every token read from `state` of counter `k`'s item, the item repeated without bound: whether
  // the repetition reads it all, and where it could leave it (a boundary whose next byte is in
  // k.follow: a superset, as uncertain tokens are checked against the real stack anyway).
  struct CountTable {
    struct Entry {
      int32_t token;
      int16_t started;     // characters started after the current one
      int16_t first_exit;  // the first / last such boundary (characters completed after the current
      int16_t last_exit;   // one); last_exit < 0: none
      // Whether it may leave at a boundary in [need, room].
      bool may_leave(int32_t need, int32_t room) const { return std::max<int32_t>(first_exit, need) <= std::min<int32_t>(last_exit, room); }
    };
    std::vector<uint64_t> full;  // bitset: tokens read entirely
    std::vector<Entry> long_full;  // full tokens that start a character, most characters first
    std::vector<Entry> leaving;    // the rest that reach a boundary, in trie order
  };
  static CountTable compute_count_table(const Grammar& g, const Grammar::Counter& k, int32_t state, const Vocabulary& vocab);

 private:
  std::shared_ptr<const Vocabulary> vocab_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<const StateMask>> entries_;
  std::unordered_map<uint64_t, std::shared_ptr<const CountTable>> count_tables_;
};

}  // namespace splash::constrain
