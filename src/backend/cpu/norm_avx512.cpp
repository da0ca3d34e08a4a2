// AVX512 RMSNorm row kernel; only called when cpu_features() reports the ISA (norm.cpp).
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/activation_vexp.h"
#include "backend/cpu/norm_kernels.h"

namespace splash::cpu {

void rms_norm_row_avx512(const float* x, const float* w, float eps, float* out, int64_t d) {
  // Four independent f32 accumulators per block of 1024 values (short enough that f32 partial sums
  // stay accurate), block sums added in double: rows of 64K large values keep ~1e-7 relative error.
  double ss = 0.0;
  int64_t j = 0;
  while (j + 4 * 16 <= d) {
    const int64_t end = std::min<int64_t>(d, j + 1024);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (; j + 4 * 16 <= end; j += 4 * 16) {
      const __m512 x0 = _mm512_loadu_ps(x + j), x1 = _mm512_loadu_ps(x + j + 16);
      const __m512 x2 = _mm512_loadu_ps(x + j + 2 * 16), x3 = _mm512_loadu_ps(x + j + 3 * 16);
      a0 = _mm512_fmadd_ps(x0, x0, a0);
      a1 = _mm512_fmadd_ps(x1, x1, a1);
      a2 = _mm512_fmadd_ps(x2, x2, a2);
      a3 = _mm512_fmadd_ps(x3, x3, a3);
    }
    ss += hsum_avx512(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  }
  for (; j < d; ++j) ss += static_cast<double>(x[j]) * x[j];
  const float r = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(d) + eps));
  const __m512 vr = _mm512_set1_ps(r);
  j = 0;
  for (; j + 16 <= d; j += 16) {
    _mm512_storeu_ps(out + j, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + j), vr), _mm512_loadu_ps(w + j)));
  }
  for (; j < d; ++j) out[j] = x[j] * r * w[j];
}

}  // namespace splash::cpu
