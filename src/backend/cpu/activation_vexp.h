// Internal to backend/cpu: vectorized exp for the *_avx2.cpp / *_avx512.cpp files (which have the
// ISA flags). Cody-Waite range reduction x = k ln2 + r and a degree-6 polynomial for exp(r):
// relative error about 2e-7 over the clamped range, which is below what softmax and silu need.
// Inputs below -87.3 (ln of the smallest normal float) are clamped there and give ~1e-38, not 0;
// callers that need exact zeros (masked scores) handle them separately.
#pragma once

#include <immintrin.h>

namespace splash::cpu {

#define SPLASH_VEXP_BODY(V, SET1, MAX, MIN, MUL, FMA, ROUND, CVT, ADDI, SLLI, CAST, ADD, SUB, I)  \
  const V hi = SET1(88.3762626647949f), lo = SET1(-87.3365447505531f);                          \
  x = MIN(MAX(x, lo), hi);                                                                      \
  V k = ROUND(MUL(x, SET1(1.44269504088896341f)));                                               \
  V r = FMA(k, SET1(-0.693359375f), x);                                                         \
  r = FMA(k, SET1(2.12194440e-4f), r);                                                          \
  V p = SET1(1.9875691500e-4f);                                                                 \
  p = FMA(p, r, SET1(1.3981999507e-3f));                                                        \
  p = FMA(p, r, SET1(8.3334519073e-3f));                                                        \
  p = FMA(p, r, SET1(4.1665795894e-2f));                                                        \
  p = FMA(p, r, SET1(1.6666665459e-1f));                                                        \
  p = FMA(p, r, SET1(5.0000001201e-1f));                                                        \
  p = FMA(MUL(p, r), r, ADD(r, SET1(1.0f)));                                                    \
  /* 2^k: k in [-126, 128]; k = 128 only at the top of the range, split as 2^(k-1) * 2 */      \
  V k1 = SUB(k, SET1(1.0f));                                                                    \
  I e = SLLI(ADDI(CVT(k1), I##_SET1(127)), 23);                                                 \
  return MUL(MUL(p, CAST(e)), SET1(2.0f));

#if defined(__AVX2__) && defined(__FMA__)
inline __m256 vexp_avx2(__m256 x) {
#define I256_SET1 _mm256_set1_epi32
#define ROUND256(v) _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
  SPLASH_VEXP_BODY(__m256, _mm256_set1_ps, _mm256_max_ps, _mm256_min_ps, _mm256_mul_ps, _mm256_fmadd_ps,
                   ROUND256, _mm256_cvtps_epi32, _mm256_add_epi32, _mm256_slli_epi32, _mm256_castsi256_ps,
                   _mm256_add_ps, _mm256_sub_ps, I256)
#undef ROUND256
#undef I256_SET1
}

inline float hsum_avx2(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
#endif

#if defined(__AVX512F__)
inline __m512 vexp_avx512(__m512 x) {
#define I512_SET1 _mm512_set1_epi32
#define ROUND512(v) _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
  SPLASH_VEXP_BODY(__m512, _mm512_set1_ps, _mm512_max_ps, _mm512_min_ps, _mm512_mul_ps, _mm512_fmadd_ps,
                   ROUND512, _mm512_cvtps_epi32, _mm512_add_epi32, _mm512_slli_epi32, _mm512_castsi512_ps,
                   _mm512_add_ps, _mm512_sub_ps, I512)
#undef ROUND512
#undef I512_SET1
}
#endif

#undef SPLASH_VEXP_BODY

}  // namespace splash::cpu
