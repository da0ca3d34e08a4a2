// SamplingParams: the per-request sampling settings, with the meaning of the OpenAI and llama.cpp
// request fields of the same names. Parsed once at the server edge, validated there, then copied into
// a Sampler (sampler.h).
#pragma once

#include <cstdint>
#include <optional>

#include "core/result.h"

namespace splash {

struct SamplingParams {
  // Softmax temperature, applied last (after every filter). 0 = greedy: the argmax of the penalized
  // logits, lowest token id on ties. OpenAI range: [0, 2].
  float temperature = 1.0f;
  // Keep the k highest logits; 0 = off. Ties at the cut go to the lowest ids, so exactly k survive.
  int32_t top_k = 0;
  // Nucleus: keep the smallest set of highest-probability tokens whose probability sums to >= top_p
  // (always at least one). 1 = off. Range [0, 1].
  float top_p = 1.0f;
  // Keep tokens whose probability is >= min_p * (probability of the most likely token). 0 = off.
  // Range [0, 1].
  float min_p = 0.0f;

  // llama.cpp / Hugging Face repetition penalty (CTRL paper with the sign fix): for every distinct
  // token among the last `penalty_last_n` tokens of prompt + output, a positive logit is divided by
  // it and a negative one multiplied by it. 1 = off; must be > 0.
  float repetition_penalty = 1.0f;
  // Window of the repetition penalty: 0 = disabled, -1 = the whole context (prompt + output).
  // llama.cpp's default is 64.
  int32_t penalty_last_n = 64;
  // OpenAI penalties: logit[j] -= presence_penalty * (c[j] > 0) + frequency_penalty * c[j], where
  // c[j] counts how often token j was *generated* so far in this request (the OpenAI definition;
  // prompt tokens do not count, and there is no window). llama.cpp differs: it counts the same
  // last-n window of prompt + output as the repetition penalty. Range [-2, 2] each, 0 = off.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;

  // Seed of the sampler's generator. Unset: drawn from std::random_device; the Sampler reports the
  // seed it used (Sampler::seed()) so a run can be reproduced.
  std::optional<uint64_t> seed;

  // Checks every field against its allowed range (NaN is never allowed). The message names the
  // field, its value and the range, e.g. "sampling: top_p = 1.5 is outside [0, 1]".
  Status validate() const;

  bool is_greedy() const { return temperature == 0.0f; }
};

}  // namespace splash
