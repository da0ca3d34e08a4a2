// AVX2 activation kernels; only called when cpu_features() reports the ISA (activation.cpp).
#include <immintrin.h>

#include <cmath>

#include "backend/cpu/activation_kernels.h"
#include "backend/cpu/activation_vexp.h"

namespace splash::cpu {

void swiglu_row_avx2(const float* gate, const float* up, float* out, int64_t f) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 zero = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= f; j += 8) {
    const __m256 g = _mm256_loadu_ps(gate + j);
    const __m256 s = _mm256_div_ps(g, _mm256_add_ps(one, vexp_avx2(_mm256_sub_ps(zero, g))));
    _mm256_storeu_ps(out + j, _mm256_mul_ps(s, _mm256_loadu_ps(up + j)));
  }
  for (; j < f; ++j) out[j] = gate[j] / (1.0f + std::exp(-gate[j])) * up[j];
}

float exp_sum_avx2(float* x, int64_t n, float m) {
  const __m256 vm = _mm256_set1_ps(m);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = vexp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  float sum = hsum_avx2(acc);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  return sum;
}

}  // namespace splash::cpu
