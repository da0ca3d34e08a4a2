// The per-request token matcher: where a constrained output is in its grammar, which tokens may come
// next (a bitmask over the vocabulary), and undo for speculative decoding.
//
//   auto grammar = compile_json_schema(schema);             // json_schema.h; cached by the caller
//   Matcher m(grammar, cache);                              // cache: one MaskCache per vocabulary
//   std::vector<uint64_t> mask(cache->vocab().mask_words());
//   m.fill_mask(mask.data());   // then -inf every logit whose bit is 0, sample, and
//   m.accept(token);            // false: the token was not allowed (nothing changed)
//   m.rollback(2);              // drafts the verifier rejected
//
// Not thread-safe; one matcher per sequence (fork() for parallel candidates). The grammar and the
// cache are shared.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "constrain/grammar.h"
#include "constrain/mask_cache.h"
#include "constrain/pda.h"

namespace splash::constrain {

class Matcher {
 public:
  Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<MaskCache> cache);
  Matcher(const Matcher& other);
  Matcher& operator=(const Matcher&) = delete;

  // Is `token` allowed now (a stop token: where the grammar may end)?
  bool allows(int32_t token) const;
  // Advances by an allowed token; false and no change otherwise.
  bool accept(int32_t token);
  // Undoes the last n accepted tokens (n <= accepted()).
  void rollback(size_t n);
  size_t accepted() const { return history_.size() - 1; }
  // The output may stop here / nothing but a stop token may come / a stop token was accepted.
  bool can_end() const { return history_.back().can_end; }
  bool must_end() const { return history_.back().frames.empty(); }
  bool ended() const { return ended_.back(); }

  // Sets `mask` (vocab().mask_words() words) to the tokens allowed now.
  void fill_mask(uint64_t* mask) const;
  Matcher fork() const { return Matcher(*this); }
  const Vocabulary& vocab() const { return cache_->vocab(); }

  // How long the engine waits for a mask computed ahead (mask_worker.h) before it fails the request
  // (503 mask_timeout), and a delay added to each one (a test hook). Set by the ConstraintCompiler.
  struct Timing {
    std::chrono::microseconds mask_timeout = std::chrono::seconds(5);
    std::chrono::microseconds test_delay{0};
  };
  const Timing& timing() const { return timing_; }
  void set_timing(Timing t) { timing_ = t; }

  // The slow reference: tries every token from the current position, one byte at a time.
  void fill_mask_reference(uint64_t* mask) const;

 private:
  bool is_stop(int32_t token) const;
  void compute_mask(const Config& c, uint64_t* mask) const;
  // Adds the uncertain tokens of `entry` that the real stack under `f` accepts.
  void check_uncertain(const Frame& f, const StateMask& entry, uint64_t* mask) const;

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<MaskCache> cache_;
  Pda pda_;
  mutable FrameArena arena_;                 // mutable: mask checks intern frames, never change meaning
  std::vector<Config> history_;              // history_[k]: the position after k accepted tokens
  std::vector<char> ended_;                  // a stop token was accepted at k
  // The last masks computed, by position: inside a string or a number the position repeats token
  // after token, and a copy is far cheaper than checking the uncertain tokens again.
  struct Memo {
    Config config;
    std::vector<uint64_t> mask;
  };
  static constexpr size_t kMemoSize = 4;
  mutable std::vector<Memo> memo_;
  mutable size_t memo_next_ = 0;
  Timing timing_;
};

}  // namespace splash::constrain
