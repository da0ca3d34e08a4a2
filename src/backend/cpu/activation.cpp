#include "backend/cpu/activation.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/activation_kernels.h"
#include "core/check.h"

namespace splash {

namespace cpu {

void swiglu_row_scalar(const float* gate, const float* up, float* out, int64_t f) {
  for (int64_t j = 0; j < f; ++j) {
    const float g = gate[j];
    out[j] = g / (1.0f + std::exp(-g)) * up[j];
  }
}

float exp_sum_scalar(float* x, int64_t n, float m) {
  // Double accumulation: this is the reference the vector versions are measured against.
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  return static_cast<float>(sum);
}

}  // namespace cpu

namespace {

IsaLevel effective(IsaLevel level) { return clamp_isa_level(level); }

}  // namespace

void swiglu(const float* gate, const float* up, int64_t in_stride, float* out, int64_t n, int64_t f,
            IsaLevel level) {
  SPLASH_CHECK(n >= 0 && f >= 0 && in_stride >= f);
  const IsaLevel l = effective(level);
  const cpu::SwigluRowFn fn = l >= IsaLevel::kAvx512 ? cpu::swiglu_row_avx512
                              : l >= IsaLevel::kAvx2 ? cpu::swiglu_row_avx2
                                                     : cpu::swiglu_row_scalar;
  for (int64_t i = 0; i < n; ++i) fn(gate + i * in_stride, up + i * in_stride, out + i * f, f);
}

void softmax(float* x, int64_t n, IsaLevel level) {
  if (n <= 0) return;
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  if (m == -std::numeric_limits<float>::infinity()) {  // fully masked: no probability mass anywhere
    for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;
    return;
  }
  const IsaLevel l = effective(level);
  const cpu::ExpSumFn fn = l >= IsaLevel::kAvx512 ? cpu::exp_sum_avx512
                           : l >= IsaLevel::kAvx2 ? cpu::exp_sum_avx2
                                                  : cpu::exp_sum_scalar;
  const float inv = 1.0f / fn(x, n, m);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void add(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];  // auto-vectorized; memory-bound anyway
}

}  // namespace splash
