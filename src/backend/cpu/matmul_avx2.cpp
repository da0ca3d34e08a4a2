// AVX2 + FMA + F16C matmul kernels and activation quantizer. Only called when cpu_features() says
// the CPU has them (matmul.cpp dispatches on PackedWeights::isa()).
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/matmul_repack.h"

#define SPLASH_SIMD_VNNI 0

namespace splash::cpu {

namespace {
#include "backend/cpu/matmul_simd_impl.h"
#include "backend/cpu/matmul_gemm_impl.h"
}  // namespace

TileKernel avx2_kernel(WeightFormat f) { return simd_kernel(f); }
TileKernel avx2_x8_kernel(WeightFormat f) { return x8_kernel(f); }

void quantize_acts_avx2(const float* x, QuantizedActs& qx, int64_t i0, int64_t i1) {
  const int64_t nb = qx.blocks();
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  for (int64_t i = i0; i < i1; ++i) {
    const float* xr = x + i * qx.cols;
    int8_t* q = qx.qs.data() + i * qx.cols;
    for (int64_t b = 0; b < nb; ++b) {
      __m256 v[4];
      __m256 amax = _mm256_setzero_ps();
      for (int k = 0; k < 4; ++k) {
        v[k] = _mm256_loadu_ps(xr + b * 32 + 8 * k);
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_mask, v[k]));
      }
      __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
      m = _mm_max_ps(m, _mm_movehl_ps(m, m));
      m = _mm_max_ss(m, _mm_movehdup_ps(m));
      // Same float operations as quantize_acts_scalar, so the codes are bit-identical.
      const float d = _mm_cvtss_f32(m) / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      const __m256 vid = _mm256_set1_ps(id);
      __m256i iv[4];
      for (int k = 0; k < 4; ++k) iv[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], vid));
      // Sums of the first 16 codes (lane 0) and of all 32 (lane 1), reduced side by side.
      const __m256i s01 = _mm256_add_epi32(iv[0], iv[1]);
      const __m256i s = _mm256_add_epi32(s01, _mm256_add_epi32(iv[2], iv[3]));
      __m256i both = _mm256_permute2x128_si256(s01, s, 0x20);  // [s01 lo | s lo]
      both = _mm256_add_epi32(both, _mm256_permute2x128_si256(s01, s, 0x31));
      both = _mm256_add_epi32(both, _mm256_shuffle_epi32(both, 0x4E));
      both = _mm256_add_epi32(both, _mm256_shuffle_epi32(both, 0xB1));
      const __m128i s4 = _mm256_extracti128_si256(both, 1);
      // Pack 32 int32 -> 32 int8; packs work per 128-bit lane, the permute restores the order.
      const __m256i p16a = _mm256_packs_epi32(iv[0], iv[1]);
      const __m256i p16b = _mm256_packs_epi32(iv[2], iv[3]);
      const __m256i p8 = _mm256_packs_epi16(p16a, p16b);
      const __m256i ordered = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + b * 32), ordered);
      qx.d[i * nb + b] = d;
      qx.dsum[i * nb + b] = d * static_cast<float>(_mm_cvtsi128_si32(s4));
      qx.qsum[i * nb + b] = _mm_cvtsi128_si32(s4);
      qx.qsum16[i * nb + b] = _mm_cvtsi128_si32(_mm256_castsi256_si128(both));
    }
  }
}

}  // namespace splash::cpu
