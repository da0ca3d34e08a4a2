// AVX-512 attention inner loops; only called when cpu_features() reports the ISA and head_dim is a
// multiple of 16 (attention.cpp picks the tier).
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/activation_kernels.h"
#include "backend/cpu/activation_vexp.h"
#include "backend/cpu/attention_kernels.h"

namespace splash::cpu {
namespace {

void load_tile(const KvPageGeometry& geo, const uint8_t* block, int h, int n, float* dst) {
  const int hd = geo.head_dim;
  const uint8_t* src = block + h * geo.head_bytes();
  switch (geo.format) {
    case KvFormat::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * hd * 4);
      break;
    case KvFormat::kBF16: {
      const auto* b = reinterpret_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < int64_t{n} * hd; i += 16) {
        const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i)));
        _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
      }
      break;
    }
    case KvFormat::kInt8: {
      const auto* qv = reinterpret_cast<const int8_t*>(src);
      const auto* scales = reinterpret_cast<const float*>(block + geo.data_bytes()) + h * kKvPageTokens;
      for (int j = 0; j < n; ++j) {
        float sc;
        std::memcpy(&sc, scales + j, 4);
        const __m512 vs = _mm512_set1_ps(sc);
        const int8_t* qr = qv + j * hd;
        float* o = dst + j * hd;
        for (int d = 0; d < hd; d += 16) {
          const __m512i w = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qr + d)));
          _mm512_storeu_ps(o + d, _mm512_mul_ps(_mm512_cvtepi32_ps(w), vs));
        }
      }
      break;
    }
  }
}

// Four keys per pass share each load of the query row.
void scores(const float* q, int n_rows, const float* k, int n_keys, int hd, float* s) {
  for (int r = 0; r < n_rows; ++r) {
    const float* qr = q + r * hd;
    float* sr = s + r * kKvPageTokens;
    int j = 0;
    for (; j + 4 <= n_keys; j += 4) {
      const float* k0 = k + j * hd;
      __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int d = 0; d < hd; d += 16) {
        const __m512 x = _mm512_loadu_ps(qr + d);
        a0 = _mm512_fmadd_ps(x, _mm512_loadu_ps(k0 + d), a0);
        a1 = _mm512_fmadd_ps(x, _mm512_loadu_ps(k0 + hd + d), a1);
        a2 = _mm512_fmadd_ps(x, _mm512_loadu_ps(k0 + 2 * hd + d), a2);
        a3 = _mm512_fmadd_ps(x, _mm512_loadu_ps(k0 + 3 * hd + d), a3);
      }
      sr[j] = hsum_avx512(a0);
      sr[j + 1] = hsum_avx512(a1);
      sr[j + 2] = hsum_avx512(a2);
      sr[j + 3] = hsum_avx512(a3);
    }
    for (; j < n_keys; ++j) {
      __m512 a0 = _mm512_setzero_ps();
      for (int d = 0; d < hd; d += 16) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(qr + d), _mm512_loadu_ps(k + j * hd + d), a0);
      sr[j] = hsum_avx512(a0);
    }
  }
}

// The output row stays in registers 64 floats at a time while all keys stream past it.
void accumulate(float* acc, const float* p, const float* v, int n_keys, int hd) {
  int d = 0;
  for (; d + 64 <= hd; d += 64) {
    __m512 a0 = _mm512_loadu_ps(acc + d), a1 = _mm512_loadu_ps(acc + d + 16);
    __m512 a2 = _mm512_loadu_ps(acc + d + 2 * 16), a3 = _mm512_loadu_ps(acc + d + 3 * 16);
    for (int j = 0; j < n_keys; ++j) {
      const __m512 w = _mm512_set1_ps(p[j]);
      const float* vr = v + j * hd + d;
      a0 = _mm512_fmadd_ps(w, _mm512_loadu_ps(vr), a0);
      a1 = _mm512_fmadd_ps(w, _mm512_loadu_ps(vr + 16), a1);
      a2 = _mm512_fmadd_ps(w, _mm512_loadu_ps(vr + 2 * 16), a2);
      a3 = _mm512_fmadd_ps(w, _mm512_loadu_ps(vr + 3 * 16), a3);
    }
    _mm512_storeu_ps(acc + d, a0);
    _mm512_storeu_ps(acc + d + 16, a1);
    _mm512_storeu_ps(acc + d + 2 * 16, a2);
    _mm512_storeu_ps(acc + d + 3 * 16, a3);
  }
  for (; d < hd; d += 16) {
    __m512 a0 = _mm512_loadu_ps(acc + d);
    for (int j = 0; j < n_keys; ++j) a0 = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_loadu_ps(v + j * hd + d), a0);
    _mm512_storeu_ps(acc + d, a0);
  }
}

}  // namespace

const AttentionKernels& attention_kernels_avx512() {
  static const AttentionKernels k{load_tile, scores, accumulate, exp_sum_avx512};
  return k;
}

}  // namespace splash::cpu
