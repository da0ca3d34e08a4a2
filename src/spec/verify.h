// Verification of drafted tokens against the target's logits (spec 6 "Verify").
//
// The target ran [last committed token, d_1 .. d_k] in one pass and returned k + 1 logits rows; row i
// is the target's distribution for the token after d_1 .. d_i. The caller walks the rows in order,
// commits each returned token (Sampler::accept and its own bookkeeping: stop strings, max_tokens, EOS)
// and goes on to row i + 1 only while the returned token equals the proposal d_{i+1}. So the sampler's
// penalty history always holds the preceding accepted draft tokens, as the spec asks.
//
// Greedy (temperature 0): the token is the argmax of the processed row, so the walk commits the longest
// argmax-matching prefix plus the target's own token: exactly what plain decoding produces.
// Sampling: the drafts are deterministic (a point mass q = 1 at d), so exact speculative sampling
// (Leviathan et al. 2023; Chen et al. 2023) reduces to: accept d with probability p(d) over the
// PROCESSED distribution p (penalties, top-k, top-p, min-p, temperature, as Sampler::probabilities
// makes it); on rejection draw from p with d removed, renormalized (max(0, p - q) normalized). The
// committed token is then distributed exactly as p, whatever the drafter proposed.
#pragma once

#include <cstdint>
#include <span>

#include "core/result.h"
#include "sampling/sampler.h"

namespace splash {

// One verify row: `logits` [n_vocab] (modified: penalties, filters), `proposal` the drafted token for
// this position or -1 for none (the row after the last proposal, or plain decoding). Returns the token
// to commit; it equals `proposal` iff the proposal was accepted. Errors: the Sampler's (NaN logits ...).
// Uses at most two uniforms of the sampler's RNG (none when greedy).
Result<int32_t> verify_row(Sampler& sampler, std::span<float> logits, int32_t proposal);

// The accept test and residual draw on an already processed distribution `dist` (ascending ids, p
// summing to 1, as Sampler::probabilities returns it): exposed for the statistical test.
int32_t verify_distribution(Sampler& sampler, std::span<const TokenProb> dist, int32_t proposal);

}  // namespace splash
