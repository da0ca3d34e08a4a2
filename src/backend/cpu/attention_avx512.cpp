// AVX-512 attention inner loops (attention_simd_impl.h over 16-float vectors); only called when
// cpu_features() reports the ISA and head_dim is a multiple of 16 (attention.cpp picks the tier).
#include <immintrin.h>

#include <algorithm>
#include <bit>
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

// --- prefill tier: query rows in vector lanes ----------------------------------------------------
// Scores are outer products (a broadcast key element times 16 rows of one query dimension), so a
// [J keys x RV row-vectors] block is all FMAs with no reduction; the online softmax runs on whole
// vectors of 16 rows (one max, one exp per (key, 16 rows)); the weighted sum is [D dims x RV
// row-vectors] of broadcast value elements times probability vectors. J = D = 8 for up to 32 rows,
// 4 above (at most 16 accumulators).

template <int RV, int J>
void scores_t_rows(const float* qt, int rp, const float* k, int n_keys, int hd, float* s) {
  for (int j0 = 0; j0 < n_keys; j0 += J) {
    __m512 acc[J][RV];
    for (int i = 0; i < J; ++i)
      for (int v = 0; v < RV; ++v) acc[i][v] = _mm512_setzero_ps();
    const float* kj = k + int64_t{j0} * hd;
    for (int d = 0; d < hd; ++d) {
      __m512 qv[RV];
      for (int v = 0; v < RV; ++v) qv[v] = _mm512_loadu_ps(qt + int64_t{d} * rp + v * 16);
      for (int i = 0; i < J; ++i) {
        const __m512 kb = _mm512_set1_ps(kj[i * hd + d]);
        for (int v = 0; v < RV; ++v) acc[i][v] = _mm512_fmadd_ps(kb, qv[v], acc[i][v]);
      }
    }
    for (int i = 0; i < J; ++i)
      for (int v = 0; v < RV; ++v) _mm512_storeu_ps(s + (j0 + i) * rp + v * 16, acc[i][v]);
  }
}

void scores_t(const float* qt, int rp, const float* k, int n_keys, int hd, float* s) {
  switch (rp / 16) {
    case 1: scores_t_rows<1, 8>(qt, rp, k, n_keys, hd, s); break;
    case 2: scores_t_rows<2, 8>(qt, rp, k, n_keys, hd, s); break;
    case 3: scores_t_rows<3, 4>(qt, rp, k, n_keys, hd, s); break;
    default: scores_t_rows<4, 4>(qt, rp, k, n_keys, hd, s); break;
  }
}

void softmax_t(float* s, int rp, int n_keys, const int32_t* end, int32_t kbase, const float* kscale,
               const float* vscale, float* m, float* l, float* alpha) {
  const __m512 vinf = _mm512_set1_ps(-__builtin_inff());
  for (int r = 0; r < rp; r += 16) {
    const __m512i lim = _mm512_sub_epi32(_mm512_loadu_si512(end + r), _mm512_set1_epi32(kbase));
    __m512 mx = vinf;
    for (int j = 0; j < n_keys; ++j) {
      const __mmask16 keep = _mm512_cmpgt_epi32_mask(lim, _mm512_set1_epi32(j));
      const __m512 sj = _mm512_mul_ps(_mm512_loadu_ps(s + j * rp + r), _mm512_set1_ps(kscale[j]));
      const __m512 x = _mm512_mask_blend_ps(keep, vinf, sj);
      _mm512_storeu_ps(s + j * rp + r, x);
      mx = _mm512_max_ps(mx, x);
    }
    // Every row sees key 0 on the first page, so m' is finite; alpha = 0 on the first page (m = -inf).
    const __m512 m_old = _mm512_loadu_ps(m + r);
    const __m512 m_new = _mm512_max_ps(m_old, mx);
    const __m512 a =
        _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(m_old, vinf, _CMP_NEQ_OQ), vexp_avx512(_mm512_sub_ps(m_old, m_new)));
    __m512 sum = _mm512_setzero_ps();
    for (int j = 0; j < n_keys; ++j) {
      const __mmask16 keep = _mm512_cmpgt_epi32_mask(lim, _mm512_set1_epi32(j));
      __m512 e = _mm512_setzero_ps();
      if (keep != 0) e = _mm512_maskz_mov_ps(keep, vexp_avx512(_mm512_sub_ps(_mm512_loadu_ps(s + j * rp + r), m_new)));
      sum = _mm512_add_ps(sum, e);
      _mm512_storeu_ps(s + j * rp + r, _mm512_mul_ps(e, _mm512_set1_ps(vscale[j])));
    }
    _mm512_storeu_ps(l + r, _mm512_fmadd_ps(_mm512_loadu_ps(l + r), a, sum));
    _mm512_storeu_ps(m + r, m_new);
    _mm512_storeu_ps(alpha + r, a);
  }
}

template <int RV, int D>
void accumulate_t_rows(float* acct, int rp, const float* p, const float* alpha, const float* v, int n_keys, int hd) {
  __m512 al[RV];
  for (int c = 0; c < RV; ++c) al[c] = _mm512_loadu_ps(alpha + c * 16);
  for (int d0 = 0; d0 < hd; d0 += D) {
    __m512 a[D][RV];
    for (int i = 0; i < D; ++i)
      for (int c = 0; c < RV; ++c)
        a[i][c] = _mm512_mul_ps(_mm512_loadu_ps(acct + int64_t{d0 + i} * rp + c * 16), al[c]);
    for (int j = 0; j < n_keys; ++j) {
      __m512 pv[RV];
      for (int c = 0; c < RV; ++c) pv[c] = _mm512_loadu_ps(p + j * rp + c * 16);
      const float* vj = v + int64_t{j} * hd + d0;
      for (int i = 0; i < D; ++i) {
        const __m512 vb = _mm512_set1_ps(vj[i]);
        for (int c = 0; c < RV; ++c) a[i][c] = _mm512_fmadd_ps(vb, pv[c], a[i][c]);
      }
    }
    for (int i = 0; i < D; ++i)
      for (int c = 0; c < RV; ++c) _mm512_storeu_ps(acct + int64_t{d0 + i} * rp + c * 16, a[i][c]);
  }
}

void accumulate_t(float* acct, int rp, const float* p, const float* alpha, const float* v, int n_keys, int hd) {
  switch (rp / 16) {
    case 1: accumulate_t_rows<1, 8>(acct, rp, p, alpha, v, n_keys, hd); break;
    case 2: accumulate_t_rows<2, 8>(acct, rp, p, alpha, v, n_keys, hd); break;
    case 3: accumulate_t_rows<3, 4>(acct, rp, p, alpha, v, n_keys, hd); break;
    default: accumulate_t_rows<4, 4>(acct, rp, p, alpha, v, n_keys, hd); break;
  }
}

// Row r of the tile: the g heads of a token are adjacent.
const float* tile_row(const float* base, int64_t token_stride, int g, int r, int hd) {
  return base + (r / g) * token_stride + int64_t{r % g} * hd;
}

// Transposition by scatters: one row's 16 consecutive values (or bf16 pairs) go to 16 rows of qt.
void load_q_t(const float* q, int64_t token_stride, int g, int rows, int rp, int hd, float scale, float* qt,
              uint16_t* qt_bf16) {
  const __m512i step = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(rp));
  const __m512 vs = _mm512_set1_ps(scale);
  for (int r = 0; r < rp; ++r) {
    const float* src = r < rows ? tile_row(q, token_stride, g, r, hd) : nullptr;
    auto row16 = [&](int d) {
      return src != nullptr ? _mm512_mul_ps(_mm512_loadu_ps(src + d), vs) : _mm512_setzero_ps();
    };
    if (qt_bf16 == nullptr) {
      for (int d = 0; d < hd; d += 16) _mm512_i32scatter_ps(qt + int64_t{d} * rp + r, step, row16(d), 4);
      continue;
    }
    // Word e of the row = (q[2e], q[2e + 1]): the bf16 values in order, read as 32-bit words.
    int d = 0;
    for (; d + 32 <= hd; d += 32) {
      const __m512i w = std::bit_cast<__m512i>(_mm512_cvtne2ps_pbh(row16(d + 16), row16(d)));
      _mm512_i32scatter_epi32(qt_bf16 + 2 * (int64_t{d / 2} * rp + r), step, w, 4);
    }
    if (d < hd) {  // 16 dims left: 8 words
      const __m256i w = std::bit_cast<__m256i>(_mm512_cvtneps_pbh(row16(d)));
      _mm512_mask_i32scatter_epi32(qt_bf16 + 2 * (int64_t{d / 2} * rp + r), 0xFF, step, _mm512_castsi256_si512(w), 4);
    }
  }
}

void store_out_t(const float* acct, int rp, const float* l, int rows, int hd, int g, int64_t token_stride, float* out) {
  const __m512i step = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(rp));
  for (int r = 0; r < rows; ++r) {
    float* o = out + (r / g) * token_stride + int64_t{r % g} * hd;
    const __m512 inv = _mm512_set1_ps(1.0f / l[r]);  // l > 0: key 0 is visible to every query
    for (int d = 0; d < hd; d += 16)
      _mm512_storeu_ps(o + d, _mm512_mul_ps(_mm512_i32gather_ps(step, acct + int64_t{d} * rp + r, 4), inv));
  }
}

// --- prefill tier, bf16 products (AVX512_BF16) --------------------------------------------------
// The same transposed blocks with vdpbf16ps: each instruction does two products per lane (a pair of
// query dimensions in the scores, a pair of keys in the weighted sum), so half the instructions of
// the f32 FMAs. Only called where cpu_features().avx512bf16.

__m512bh as_bh(__m512i x) { return std::bit_cast<__m512bh>(x); }

// One 32-bit word (two bf16) broadcast to all lanes.
__m512bh bcast_word(const uint16_t* p) { return as_bh(_mm512_broadcastd_epi32(_mm_loadu_si32(p))); }

// (a[0], b[0], a[1], b[1], ...) from x = [a[0..15], b[0..15]].
__m512i interleave_halves(__m512i x) {
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,  // lane 31 first
                                       23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(idx, x);
}

// 16 codes of row j (dims c..c+15) as f32; codes are int8 or bf16.
__m512 code16(KvFormat f, const uint8_t* src, int64_t i) {
  if (f == KvFormat::kInt8) return Simd::load_i8(reinterpret_cast<const int8_t*>(src) + i);
  return Simd::load_bf16(reinterpret_cast<const uint16_t*>(src) + i);
}

void load_tile_bf16(const KvPageGeometry& geo, const uint8_t* block, int h, int n, bool pair_keys, uint16_t* dst,
                    float* scale) {
  const int hd = geo.head_dim;
  const uint8_t* src = block + h * geo.head_bytes();
  if (geo.format == KvFormat::kInt8) {
    std::memcpy(scale, block + geo.scales_offset(h), static_cast<size_t>(n) * 4);
    for (int j = n; j < kTile; ++j) scale[j] = 1.0f;
  } else {
    for (int j = 0; j < kTile; ++j) scale[j] = 1.0f;
  }
  if (!pair_keys) {
    const int64_t len = int64_t{n} * hd;
    if (geo.format == KvFormat::kBF16) {
      std::memcpy(dst, src, static_cast<size_t>(len) * 2);
    } else {
      for (int64_t i = 0; i < len; i += 16)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                            std::bit_cast<__m256i>(_mm512_cvtneps_pbh(code16(geo.format, src, i))));
    }
    std::memset(dst + len, 0, static_cast<size_t>(int64_t{kTile - n} * hd) * 2);
    return;
  }
  for (int i = 0; 2 * i < n; ++i) {
    const int64_t a = int64_t{2 * i} * hd, b = a + hd;
    const bool has_b = 2 * i + 1 < n;
    for (int c = 0; c < hd; c += 16) {
      const __m512 fa = code16(geo.format, src, a + c);
      const __m512 fb = has_b ? code16(geo.format, src, b + c) : _mm512_setzero_ps();
      const __m512bh x = _mm512_cvtne2ps_pbh(fb, fa);  // lower half from fa
      _mm512_storeu_si512(dst + 2 * (int64_t{i} * hd + c), interleave_halves(std::bit_cast<__m512i>(x)));
    }
  }
}

template <int RV, int J>
void scores_bf16_rows(const uint16_t* qt, int rp, const uint16_t* k, int n_keys, int hd, float* s) {
  for (int j0 = 0; j0 < n_keys; j0 += J) {
    __m512 acc[J][RV];
    for (int i = 0; i < J; ++i)
      for (int v = 0; v < RV; ++v) acc[i][v] = _mm512_setzero_ps();
    const uint16_t* kj = k + int64_t{j0} * hd;
    for (int e = 0; e < hd / 2; ++e) {
      __m512bh qv[RV];
      for (int v = 0; v < RV; ++v) qv[v] = as_bh(_mm512_loadu_si512(qt + 2 * (int64_t{e} * rp + v * 16)));
      for (int i = 0; i < J; ++i) {
        const __m512bh kb = bcast_word(kj + i * hd + 2 * e);
        for (int v = 0; v < RV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], qv[v], kb);
      }
    }
    for (int i = 0; i < J; ++i)
      for (int v = 0; v < RV; ++v) _mm512_storeu_ps(s + (j0 + i) * rp + v * 16, acc[i][v]);
  }
}

void scores_bf16(const uint16_t* qt, int rp, const uint16_t* k, int n_keys, int hd, float* s) {
  switch (rp / 16) {
    case 1: scores_bf16_rows<1, 8>(qt, rp, k, n_keys, hd, s); break;
    case 2: scores_bf16_rows<2, 8>(qt, rp, k, n_keys, hd, s); break;
    case 3: scores_bf16_rows<3, 4>(qt, rp, k, n_keys, hd, s); break;
    default: scores_bf16_rows<4, 4>(qt, rp, k, n_keys, hd, s); break;
  }
}

template <int RV, int D>
void accumulate_bf16_rows(float* acct, int rp, const uint16_t* pw, const float* alpha, const uint16_t* v, int n_pairs,
                          int hd) {
  __m512 al[RV];
  for (int c = 0; c < RV; ++c) al[c] = _mm512_loadu_ps(alpha + c * 16);
  for (int d0 = 0; d0 < hd; d0 += D) {
    __m512 a[D][RV];
    for (int i = 0; i < D; ++i)
      for (int c = 0; c < RV; ++c)
        a[i][c] = _mm512_mul_ps(_mm512_loadu_ps(acct + int64_t{d0 + i} * rp + c * 16), al[c]);
    for (int jp = 0; jp < n_pairs; ++jp) {
      __m512bh pv[RV];
      for (int c = 0; c < RV; ++c) pv[c] = as_bh(_mm512_loadu_si512(pw + 2 * (jp * rp + c * 16)));
      const uint16_t* vj = v + 2 * (int64_t{jp} * hd + d0);
      for (int i = 0; i < D; ++i) {
        const __m512bh vb = bcast_word(vj + 2 * i);
        for (int c = 0; c < RV; ++c) a[i][c] = _mm512_dpbf16_ps(a[i][c], pv[c], vb);
      }
    }
    for (int i = 0; i < D; ++i)
      for (int c = 0; c < RV; ++c) _mm512_storeu_ps(acct + int64_t{d0 + i} * rp + c * 16, a[i][c]);
  }
}

void accumulate_bf16(float* acct, int rp, const float* p, const float* alpha, const uint16_t* v, int n_keys, int hd) {
  // Probabilities as key pairs: words [n_pairs, rp] = (p[2i][r], p[2i + 1][r]); a missing odd key is 0.
  alignas(64) uint16_t pw[kTile * 64];
  const int n_pairs = (n_keys + 1) / 2;
  for (int i = 0; i < n_pairs; ++i) {
    const bool has_b = 2 * i + 1 < n_keys;
    for (int r = 0; r < rp; r += 16) {
      const __m512 a = _mm512_loadu_ps(p + 2 * i * rp + r);
      const __m512 b = has_b ? _mm512_loadu_ps(p + (2 * i + 1) * rp + r) : _mm512_setzero_ps();
      const __m512bh x = _mm512_cvtne2ps_pbh(b, a);
      _mm512_storeu_si512(pw + 2 * (i * rp + r), interleave_halves(std::bit_cast<__m512i>(x)));
    }
  }
  switch (rp / 16) {
    case 1: accumulate_bf16_rows<1, 8>(acct, rp, pw, alpha, v, n_pairs, hd); break;
    case 2: accumulate_bf16_rows<2, 8>(acct, rp, pw, alpha, v, n_pairs, hd); break;
    case 3: accumulate_bf16_rows<3, 4>(acct, rp, pw, alpha, v, n_pairs, hd); break;
    default: accumulate_bf16_rows<4, 4>(acct, rp, pw, alpha, v, n_pairs, hd); break;
  }
}

constexpr AttentionKernels kAvx512Kernels{kSimdKernels.load_tile, kSimdKernels.scores, kSimdKernels.softmax_tile,
                                          kSimdKernels.accumulate, scores_t, softmax_t, accumulate_t,
                                          load_q_t, store_out_t, load_tile_bf16, scores_bf16, accumulate_bf16,
                                          kSimdKernels.scores_i8, kSimdKernels.accumulate_i8,
                                          kSimdKernels.scores_bf16kv, kSimdKernels.accumulate_bf16kv};

}  // namespace

const AttentionKernels& attention_kernels_avx512() { return kAvx512Kernels; }

}  // namespace splash::cpu
