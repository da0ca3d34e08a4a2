// Internal to backend/cpu: per-ISA row kernels of activation.h, and the vector exp the attention
// softmax shares. Scalar versions are the reference the SIMD ones are tested against.
#pragma once

#include <cstdint>

namespace splash::cpu {

using SwigluRowFn = void (*)(const float* gate, const float* up, float* out, int64_t f);
// Writes p[i] = exp(x[i] - m) into x and returns the sum of the p[i].
using ExpSumFn = float (*)(float* x, int64_t n, float m);

void swiglu_row_scalar(const float* gate, const float* up, float* out, int64_t f);
void swiglu_row_avx2(const float* gate, const float* up, float* out, int64_t f);
void swiglu_row_avx512(const float* gate, const float* up, float* out, int64_t f);

float exp_sum_scalar(float* x, int64_t n, float m);
float exp_sum_avx2(float* x, int64_t n, float m);
float exp_sum_avx512(float* x, int64_t n, float m);

}  // namespace splash::cpu
