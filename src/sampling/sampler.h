// Sampler: turns one sequence's logits rows into tokens, exactly and reproducibly.
//
// One Sampler per sequence; it owns the sequence's penalty history and random generator. Not
// thread-safe (one decode lane drives it); move-only, clone() checkpoints it (history + RNG
// position), e.g. before speculative verification.
//
// Per call of sample(logits):
//   1. penalties (repetition over the last penalty_last_n prompt+output tokens; OpenAI presence and
//      frequency over generated tokens), applied to `logits` in place;
//   2. top_k -> top_p -> min_p -> temperature (llama.cpp's default order; details in
//      logit_filter.h), exact over the whole vocabulary;
//   3. an inverse-CDF draw over the survivors in ascending id order, using one rng.uniform().
// Temperature 0 is greedy: the argmax of the penalized logits, lowest id on ties, and it draws no
// random number. With temperature > 0, sample(l) returns exactly what draw(probabilities(l)) returns
// from the same state (both consume one uniform()).
//
// The caller records tokens: accept_prompt() once with the prompt, accept() after each token it
// keeps (sample() does not record, so speculative decoding can sample without committing).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/result.h"
#include "sampling/logit_filter.h"
#include "sampling/penalties.h"
#include "sampling/rng.h"
#include "sampling/sampling_params.h"

namespace splash {

class Sampler {
 public:
  // Validates `params` (the error names the field); an unset seed is drawn from std::random_device.
  static Result<Sampler> create(const SamplingParams& params);

  Sampler(Sampler&&) = default;
  Sampler& operator=(Sampler&&) = default;
  Sampler clone() const { return Sampler(*this); }

  void accept_prompt(std::span<const int32_t> tokens) { history_.accept_prompt(tokens); }
  void accept(int32_t token) { history_.accept(token); }
  // Forgets the history (a new request on the same lane); the RNG stream continues.
  void clear_history() { history_.clear(); }

  // Next token for `logits` [n_vocab]. Modifies `logits` (penalties). Fails, naming the token, if a
  // logit is NaN or +inf, or if every logit is -inf; the sampler is unchanged then.
  Result<int32_t> sample(std::span<float> logits);

  // The distribution sample() draws from: survivors in ascending id order, p summing to 1.
  // Modifies `logits` (penalties) like sample(). The returned reference stays valid until the next
  // call of sample() or probabilities() on this sampler; copy it to keep it.
  Result<std::span<const TokenProb>> probabilities(std::span<float> logits);

  // Draws from a distribution (this sampler's or one built elsewhere, e.g. a residual max(0, p - q)
  // in speculative verification), advancing this sampler's RNG by one uniform().
  int32_t draw(std::span<const TokenProb> dist) { return draw_token(dist, rng_); }
  // One uniform double in [0, 1) from this sampler's RNG (speculative verification's accept test).
  double uniform() { return rng_.uniform(); }

  const SamplingParams& params() const { return params_; }
  // The seed actually used (the random one when params().seed was unset).
  uint64_t seed() const { return seed_; }
  const PenaltyHistory& history() const { return history_; }

 private:
  Sampler(const SamplingParams& params, uint64_t seed);
  Sampler(const Sampler&) = default;
  Sampler& operator=(const Sampler&) = default;

  SamplingParams params_;
  uint64_t seed_;
  Rng rng_;
  PenaltyHistory history_;
  FilterScratch scratch_;
  std::vector<TokenProb> dist_;  // [n_survivors] the last distribution, ascending id
};

}  // namespace splash
