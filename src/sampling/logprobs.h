// Log-probabilities of one logits row, for the API's `logprobs` (OpenAI chat and completions).
// The distribution is the model's raw one: log_softmax of the logits as the forward pass returned
// them, before temperature, penalties, masks and top-k / top-p / min-p (vLLM's default
// "raw_logprobs"), so the numbers do not depend on how the client samples.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace splash {

struct TokenAlternative {
  int32_t id = 0;
  float logprob = 0;  // <= 0; -inf for a token the logits rule out
};

struct TokenLogprob {
  int32_t id = 0;                     // the token that was chosen (sampled or given)
  float logprob = 0;                  // its log-probability
  std::vector<TokenAlternative> top;  // [<= top_n] the most likely tokens, most likely first
};

constexpr int kMaxTopLogprobs = 20;  // OpenAI's top_logprobs limit

// log_softmax(logits)[chosen] and the top_n (0..kMaxTopLogprobs) most likely tokens. Ties rank the
// lower id first; -inf logits get -inf (a row of only -inf gives -inf everywhere); NaN logits count
// as -inf; a row holding +inf has no finite distribution and gives -inf everywhere. The max is
// subtracted first, so large logits do not overflow; the normalizer is the sampler's vectorized exp
// pass (row_kernels.h: float exp within 2 ulp, summed in double), with a scalar double path for rows
// holding NaN or +inf. `chosen` must be in [0, logits.size()); `scratch` is reused between calls
// (resized to logits.size()). Three passes over the row: max, exp-sum, top entries.
TokenLogprob token_logprob(std::span<const float> logits, int32_t chosen, int top_n, std::vector<float>& scratch);

}  // namespace splash
