// AVX2 attention inner loops (attention_simd_impl.h over 8-float vectors); only called when
// cpu_features() reports the ISA and head_dim is a multiple of 8 (attention.cpp picks the tier).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu/activation_vexp.h"
#include "backend/cpu/attention_kernels.h"

namespace splash::cpu {

namespace {

struct Simd {
  using V = __m256;
  static constexpr int kW = 8;
  // 2 rows x 4 keys = 8 accumulators + 4 keys + 1 query of the 16 ymm registers.
  static constexpr int kScoreRows = 2;
  // 4 rows x 2 vectors = 8 accumulators + 2 values + 1 broadcast.
  static constexpr int kAccRows = 4;
  static constexpr int kAccVecs = 2;

  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V exp(V x) { return vexp_avx2(x); }
  static __m128 low4(V v) { return _mm256_castps256_ps128(v); }
  static V load_i8(const int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static V load_bf16(const uint16_t* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  static float hsum(V v) { return hsum_avx2(v); }
  static float hmax(V v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
  }
  static __m128 reduce4(V a, V b, V c, V d) {
    // hadd pairs lanes within each 128-bit half; the two halves are added at the end.
    const V ab = _mm256_hadd_ps(a, b), cd = _mm256_hadd_ps(c, d);
    const V abcd = _mm256_hadd_ps(ab, cd);
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
  }
  static V iota() { return _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7); }
  static V keep_lt(V x, V idx, V lim, V fill) { return _mm256_blendv_ps(fill, x, _mm256_cmp_ps(idx, lim, _CMP_LT_OQ)); }
};

#include "backend/cpu/attention_simd_impl.h"

}  // namespace

const AttentionKernels& attention_kernels_avx2() { return kSimdKernels; }

float kv_quantize_int8_avx2(const float* x, int hd, int8_t* q) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 m = _mm256_setzero_ps();
  for (int d = 0; d < hd; d += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + d), abs_mask));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float amax = _mm_cvtss_f32(m4);
  const float scale = amax / 127.0f;
  const __m256 inv = _mm256_set1_ps(scale > 0.0f ? 1.0f / scale : 0.0f);
  for (int d = 0; d < hd; d += 8) {
    // cvtps rounds to nearest even (the default MXCSR mode), as lrintf does; |codes| <= 127.
    const __m256i i32 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + d), inv));
    const __m128i i16 = _mm_packs_epi32(_mm256_castsi256_si128(i32), _mm256_extracti128_si256(i32, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + d), _mm_packs_epi16(i16, i16));
  }
  return scale;
}

}  // namespace splash::cpu
