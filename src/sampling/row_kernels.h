// The two full-vocabulary passes of the filter chain, written with GCC/Clang vector extensions so
// they run 4-8 floats at a time on any target without -ffast-math (plain loops with float selects
// do not vectorize under the default -ftrapping-math). Results are the same bits on every machine:
// only IEEE basic operations, in a fixed order, and no FMA contraction (the .cpp files turn it off,
// since -march=native or the AVX2 flags would otherwise let the compiler fuse a * b + c).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace splash {

struct RowStats {
  float max;         // largest logit (NaN ignored); -inf when every logit is -inf
  size_t n_finite;   // logits that are not -inf (NaN and +inf counted, but see `bad`)
  bool bad;          // some logit is NaN or +inf
};

RowStats row_stats(std::span<const float> logits);

// w[i] = exp_nonpositive((logits[i] - max) / temperature) for the whole row (w has logits.size()
// entries); returns the sum of w in double, accumulated over 8 lanes in a fixed order. Uses the AVX2
// version when the CPU has it; both give identical bits (tested).
double row_exp_weights(std::span<const float> logits, float max, float temperature, float* w);

// logits[i] = -inf wherever bit i of `allowed` (a bitset over the row, logits.size() bits rounded up
// to whole 64-bit words) is 0: structured output's mask, four lanes at a time.
void row_apply_mask(std::span<float> logits, const uint64_t* allowed);

namespace detail {
double row_exp_weights_sse(std::span<const float> logits, float max, float temperature, float* w);
double row_exp_weights_avx2(std::span<const float> logits, float max, float temperature, float* w);
bool cpu_has_avx2();
}  // namespace detail

// Defined in row_kernels_avx2.cpp, with raw pointers so that file needs no std:: inline code; call
// only when detail::cpu_has_avx2().
double row_exp_weights_avx2_raw(const float* logits, size_t n, float max, float temperature, float* w);

}  // namespace splash
