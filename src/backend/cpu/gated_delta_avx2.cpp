// AVX2+FMA copy of the gated delta rule (gated_delta_impl.h); compiled with the AVX2 flags.
#include <immintrin.h>

#include "backend/cpu/gated_delta_impl.h"

namespace splash {

namespace {

struct Avx2Ops {
  static void axpy(float a, const float* x, float* y, int64_t n) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; ++i) y[i] += a * x[i];
  }
  static float dot(const float* x, const float* y, int64_t n) {
    __m256 acc = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    float r = _mm_cvtss_f32(s);
    for (; i < n; ++i) r += x[i] * y[i];
    return r;
  }
  static void scale(float* x, float a, int64_t n) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(va, _mm256_loadu_ps(x + i)));
    for (; i < n; ++i) x[i] *= a;
  }
};

}  // namespace

namespace cpu {

void gated_delta_recurrent_avx2(const DeltaRuleHead& h, float* state) { recurrent_impl<Avx2Ops>(h, state); }

void gated_delta_chunked_avx2(const DeltaRuleHead& h, float* state, int chunk, std::vector<float>& scratch) {
  chunked_impl<Avx2Ops>(h, state, chunk, scratch);
}

}  // namespace cpu
}  // namespace splash
