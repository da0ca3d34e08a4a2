// AVX512 activation kernels; only called when cpu_features() reports the ISA (activation.cpp).
#include <immintrin.h>

#include <cmath>

#include "backend/cpu/activation_kernels.h"
#include "backend/cpu/activation_vexp.h"

namespace splash::cpu {

void swiglu_row_avx512(const float* gate, const float* up, float* out, int64_t f) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 zero = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= f; j += 16) {
    const __m512 g = _mm512_loadu_ps(gate + j);
    const __m512 s = _mm512_div_ps(g, _mm512_add_ps(one, vexp_avx512(_mm512_sub_ps(zero, g))));
    _mm512_storeu_ps(out + j, _mm512_mul_ps(s, _mm512_loadu_ps(up + j)));
  }
  for (; j < f; ++j) out[j] = gate[j] / (1.0f + std::exp(-gate[j])) * up[j];
}

float exp_sum_avx512(float* x, int64_t n, float m) {
  const __m512 vm = _mm512_set1_ps(m);
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = vexp_avx512(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
    _mm512_storeu_ps(x + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  float sum = _mm512_reduce_add_ps(acc);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  return sum;
}

}  // namespace splash::cpu
