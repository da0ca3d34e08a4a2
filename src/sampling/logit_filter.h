// The filter chain that turns one (already penalized) logits row into the distribution a token is
// drawn from, and the draw itself. Sampler (sampler.h) is the usual entry point; this layer is
// separate so speculative decoding can reuse the exact same chain and draw.
//
// Chain, in llama.cpp's default order (penalties happen before, in PenaltyHistory::apply):
//   top_k -> top_p -> min_p -> temperature -> normalize
//   * top_k keeps the k highest logits; ties at the cut go to the lowest ids (exactly k survive).
//   * top_p is computed on softmax(logits) at temperature 1 over the tokens top_k kept (the whole
//     vocabulary when top_k is off): keep the shortest prefix of the descending order (equal logits:
//     lower id first) whose probability reaches top_p, including the token that crosses it. (The
//     running sum is taken per histogram bucket, so "reaches" is decided up to double rounding.)
//   * min_p keeps tokens with p >= min_p * p_max, i.e. logit - max >= ln(min_p).
//   * temperature divides the surviving logits; the result is softmax over survivors.
// Every filter sees the whole vocabulary and nothing is approximated (no pre-truncation to a fixed
// top 40): top_k streams over the row keeping a buffer of candidates above a rising threshold; top_p
// sums exp over every token, bounds which tokens can possibly matter, and finds the exact cut with a
// histogram plus a sort of the one bucket holding it. Weights are exp_nonpositive (fast_exp.h), so a
// seed gives the same tokens on every x86-64 machine, with or without AVX2/FMA.
// -inf logits are never kept; NaN or +inf is an error. Greedy (temperature 0) is one argmax pass;
// ties go to the lowest id.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/result.h"
#include "sampling/rng.h"
#include "sampling/sampling_params.h"

namespace splash {

struct TokenProb {
  int32_t id;
  float p;
};

// Reusable buffers, so a steady decode loop does not allocate. Not thread-safe: one per sampler.
struct FilterScratch {
  struct Candidate {
    float logit;
    int32_t id;
  };
  std::vector<Candidate> pool;      // [n_pool] superset of the survivors, then the survivors
  std::vector<Candidate> boundary;  // [n_boundary] the histogram bucket where top_p's cut falls
  std::vector<float> weights;       // [n_vocab] exp(logit - max)
  std::vector<uint16_t> bucket;     // [n_pool] histogram bucket of each pool entry
  std::vector<double> mass;         // [n_buckets] sum of weights per bucket
};

// Applies the chain (top_k, top_p, min_p, temperature; params.temperature == 0 means argmax) to
// `logits` [n_vocab] and writes the survivors to `out` in ascending id order with probabilities
// summing to 1 (up to rounding). Fails, naming the token, if a logit is NaN or +inf, or if every
// logit is -inf. `params` must have passed validate().
Status filter_logits(std::span<const float> logits, const SamplingParams& params,
                     FilterScratch& scratch, std::vector<TokenProb>& out);

// Inverse-CDF draw from `dist` (as produced by filter_logits): one rng.uniform() per call, walked
// in the list's order. A token with p == 0 is never returned. `dist` must be non-empty.
int32_t draw_token(std::span<const TokenProb> dist, Rng& rng);

}  // namespace splash
