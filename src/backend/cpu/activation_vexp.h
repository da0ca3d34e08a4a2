// Internal to backend/cpu: vectorized exp for the *_avx2.cpp / *_avx512.cpp files (which have the
// ISA flags). Cody-Waite range reduction x = k ln2 + r and a degree-6 polynomial for exp(r):
// relative error about 2e-7 over the clamped range, which is below what softmax and silu need.
// Inputs below -87.3 (ln of the smallest normal float) are clamped there and give ~0; callers that
// need exact zeros (masked scores) handle them separately.
//
// The functions are static (one private copy per including file): the *_avx2 and *_avx512 files are
// compiled with different instruction sets, and a shared inline copy could be resolved by the linker
// to the AVX-512 build even for the AVX2 callers.
#pragma once

#include <immintrin.h>

#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics initialise undefined vectors with themselves (GCC bug 105593); the
// warning fires in every file that inlines them. Only the *_avx512.cpp files include this header
// with AVX-512 enabled.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace splash::cpu {

#if defined(__AVX2__) && defined(__FMA__)
static inline __m256 vexp_avx2(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.3762626647949f), lo = _mm256_set1_ps(-87.3365447505531f);
  x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(k, _mm256_set1_ps(-0.693359375f), x);
  r = _mm256_fmadd_ps(k, _mm256_set1_ps(2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^k with k in [-126, 128]: build 2^(k-1), always a representable exponent, and double it.
  const __m256i km1 = _mm256_cvtps_epi32(_mm256_sub_ps(k, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(km1, _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), _mm256_set1_ps(2.0f));
}

static inline float hsum_avx2(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
#endif

#if defined(__AVX512F__)
static inline __m512 vexp_avx512(__m512 x) {
  const __m512 hi = _mm512_set1_ps(88.3762626647949f), lo = _mm512_set1_ps(-87.3365447505531f);
  x = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(k, _mm512_set1_ps(-0.693359375f), x);
  r = _mm512_fmadd_ps(k, _mm512_set1_ps(2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  // 2^k with k in [-126, 128]: build 2^(k-1), always a representable exponent, and double it.
  const __m512i km1 = _mm512_cvtps_epi32(_mm512_sub_ps(k, _mm512_set1_ps(1.0f)));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(km1, _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(_mm512_mul_ps(p, _mm512_castsi512_ps(e)), _mm512_set1_ps(2.0f));
}

// _mm512_reduce_add_ps, spelled out: GCC 12's version trips -Wuninitialized (see above).
static inline float hsum_avx512(__m512 v) {
  const __m256 lo = _mm512_castps512_ps256(v);
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  __m256 s8 = _mm256_add_ps(lo, hi);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
#endif

}  // namespace splash::cpu
