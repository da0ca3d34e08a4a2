// The two full-vocabulary passes of the filter chain, written with GCC/Clang vector extensions so
// they run 4-8 floats at a time on any target without -ffast-math (plain loops with float selects
// do not vectorize under the default -ftrapping-math). Results are the same bits on every machine:
// only IEEE basic operations, in a fixed order.
#pragma once

#include <cstddef>
#include <span>

namespace splash {

struct RowStats {
  float max;         // largest logit (NaN ignored); -inf when every logit is -inf
  size_t n_finite;   // logits that are not -inf (NaN and +inf counted, but see `bad`)
  bool bad;          // some logit is NaN or +inf
};

RowStats row_stats(std::span<const float> logits);

// w[i] = exp_nonpositive((logits[i] - max) / temperature) for the whole row (w has logits.size()
// entries); returns the sum of w in double, accumulated over 8 lanes in a fixed order.
double row_exp_weights(std::span<const float> logits, float max, float temperature, float* w);

}  // namespace splash
