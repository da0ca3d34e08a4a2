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
};

// Thread-safe: masks may be computed on a helper thread while the engine samples on another.
class MaskCache {
 public:
  explicit MaskCache(std::shared_ptr<const Vocabulary> vocab) : vocab_(std::move(vocab)) {}

  const Vocabulary& vocab() const { return *vocab_; }
  // The mask entry for `state` of `pda`'s grammar (keyed by grammar().state_keys[state]).
  std::shared_ptr<const StateMask> get(const Pda& pda, int32_t state);
  size_t entries() const;

  // The walk behind get(), exposed for tests.
  static StateMask compute(const Pda& pda, int32_t state, const Vocabulary& vocab);

 private:
  std::shared_ptr<const Vocabulary> vocab_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<const StateMask>> entries_;
};

}  // namespace splash::constrain
