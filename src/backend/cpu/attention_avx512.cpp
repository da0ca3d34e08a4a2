// AVX-512 attention inner loops (attention_simd_impl.h over 16-float vectors); only called when
// cpu_features() reports the ISA and head_dim is a multiple of 16 (attention.cpp picks the tier).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/activation_vexp.h"
#include "backend/cpu/attention_kernels.h"

namespace splash::cpu {

namespace {

struct Simd {
  using V = __m512;
  static constexpr int kW = 16;
  // 4 rows x 4 keys = 16 accumulators + 4 keys + 1 query of the 32 zmm registers.
  static constexpr int kScoreRows = 4;
  // 4 rows x 4 vectors = 16 accumulators + 4 values + 1 broadcast.
  static constexpr int kAccRows = 4;
  static constexpr int kAccVecs = 4;

  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V exp(V x) { return vexp_avx512(x); }
  static __m128 low4(V v) { return _mm512_castps512_ps128(v); }
  static V load_i8(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static V load_bf16(const uint16_t* p) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  }
  static float hsum(V v) { return hsum_avx512(v); }
  static __m256 halves_max(V v) {
    return _mm256_max_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  }
  static float hmax(V v) {
    const __m256 h = halves_max(v);
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
  }
  static __m256 halves_sum(V v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  }
  static __m128 reduce4(V a, V b, V c, V d) {
    const __m256 ab = _mm256_hadd_ps(halves_sum(a), halves_sum(b));
    const __m256 cd = _mm256_hadd_ps(halves_sum(c), halves_sum(d));
    const __m256 abcd = _mm256_hadd_ps(ab, cd);
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
  }
  static V iota() { return _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); }
  static V keep_lt(V x, V idx, V lim, V fill) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(idx, lim, _CMP_LT_OQ), fill, x);
  }
};

#include "backend/cpu/attention_simd_impl.h"

}  // namespace

const AttentionKernels& attention_kernels_avx512() { return kSimdKernels; }

}  // namespace splash::cpu
