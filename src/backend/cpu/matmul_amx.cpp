// AMX int8 prefill kernels for the Q4_0x8 and Q8_0x8 layouts (matmul_repack.h). Only called when
// amx_usable(); built with the AVX-512 and AMX flags (src/CMakeLists.txt, files named *_amx.cpp).
//
// One tile product covers one 32-value block of 16 activation rows (tile A: 16 x 32 int8, read in
// place from QuantizedActs with the row length as stride) against 16 weight rows (tile B: 8 x 64,
// each row 4 consecutive codes of the 16 weight rows, the "VNNI" order of AMX). B comes from two
// neighbouring x8 groups: a group's 4-byte code steps are already 4 codes of each of its 8 rows, so
// a B row is group g's step next to group g + 1's (Q4_0: low nibbles give the rows of codes 0-15,
// high nibbles those of 16-31, each made signed q - 8 there, so both types take signed x signed
// products). The 16 x 16 int32 block sums then meet the scales in AVX-512 with the float steps of the
// 512-bit VNNI kernel (matmul_gemm512_impl.h): one FMA per activation row with the weight scales
// times the activation scale. The integer sums are exact (that kernel folds Q4_0's -8 in as 8 x the
// activation codes' sum: the same integer), so the output is bit-identical to that kernel's.
//
// Per weight row pair, the B tiles and scales of every block are built once into a per-thread
// buffer and reused by every 16 activation rows of the task.
#include <immintrin.h>

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics initialise undefined vectors with themselves (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/matmul_repack.h"

namespace splash::cpu {

namespace {

// The tile configuration (palette 1): tile 0 = C (16 x 16 int32), 1 = A (16 rows x 32 int8), 2 = B
// (8 rows x 64 int8).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

constexpr int64_t kTileRows = 16;   // activation rows per A tile, weight rows per B tile
constexpr int64_t kBTileBytes = 512;  // 8 rows x 64 bytes

#include "backend/cpu/matmul_pair512_impl.h"

// B tiles and weight scales of groups g (p0) and g + 1 (p1), every block, into bt / dt.
template <bool kQ4>
void build_pair(const uint8_t* p0, const uint8_t* p1, int64_t nb, uint8_t* bt, float* dt) {
  constexpr int64_t kBlock = kQ4 ? kQ4_0x8BlockBytes : kQ8_0x8BlockBytes;
  const __m512i m4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* a0 = p0 + b * kBlock;
    const uint8_t* a1 = p1 + b * kBlock;
    uint8_t* t = bt + b * kBTileBytes;
    if constexpr (kQ4) {
      for (int s = 0; s < 4; ++s) {
        const __m512i v = load_pair(a0 + 16 + 32 * s, a1 + 16 + 32 * s);
        // q - 8 as signed bytes: codes 4s..4s+3 of the block, then codes 16 + 4s..
        _mm512_store_si512(t + 64 * s, _mm512_sub_epi8(_mm512_and_si512(v, m4), eight));
        _mm512_store_si512(t + 64 * (4 + s), _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), eight));
      }
    } else {
      for (int s = 0; s < 8; ++s) _mm512_store_si512(t + 64 * s, load_pair(a0 + 16 + 32 * s, a1 + 16 + 32 * s));
    }
    _mm512_store_ps(dt + 16 * b, scales_pair(a0, a1));
  }
}

// Rows [r0, r1) x activation rows [i0, i1): full 16 x 16 tiles on AMX, the rest on the AVX-512 kernel.
template <bool kQ4>
void amx_tile(const KernelArgs& a) {
  const PackedWeights& w = *a.w;
  const QuantizedActs& qx = *a.qx;
  const TileKernel rest = avx512_x8_kernel(w.format());
  const int64_t nb = w.cols() / 32;
  const int64_t g0 = a.r0 / 8, g_end = (a.r1 + 7) / 8;
  const int64_t pairs_end = g0 + (g_end - g0) / 2 * 2;  // groups in pairs on AMX
  const int64_t i_end = a.i0 + (a.i1 - a.i0) / kTileRows * kTileRows;
  if (pairs_end == g0 || i_end == a.i0) {
    rest(a);
    return;
  }

  TileConfig cfg;
  cfg.rows[0] = 16;
  cfg.colsb[0] = 64;
  cfg.rows[1] = 16;
  cfg.colsb[1] = 32;
  cfg.rows[2] = 8;
  cfg.colsb[2] = 64;
  _tile_loadconfig(&cfg);

  // Per thread, reused: [nb] B tiles (512 bytes each, 64-aligned) and [nb, 16] scales.
  struct alignas(64) Line {
    uint8_t bytes[64];
  };
  thread_local std::vector<Line> b_tiles, scales;
  if (b_tiles.size() < static_cast<size_t>(nb * 8)) b_tiles.resize(static_cast<size_t>(nb * 8));
  if (scales.size() < static_cast<size_t>(nb)) scales.resize(static_cast<size_t>(nb));
  auto* bt = b_tiles.data()->bytes;
  auto* dt = reinterpret_cast<float*>(scales.data()->bytes);
  alignas(64) int32_t c[kTileRows * 16];

  for (int64_t g = g0; g < pairs_end; g += 2) {
    const uint8_t* p0 = w.data() + g * w.group_bytes();
    build_pair<kQ4>(p0, p0 + w.group_bytes(), nb, bt, dt);
    const int64_t row0 = g * 8;
    const int64_t valid = std::min<int64_t>(16, w.rows() - row0);
    const __mmask16 keep = static_cast<__mmask16>((1u << valid) - 1u);
    for (int64_t i = a.i0; i < i_end; i += kTileRows) {
      __m512 acc[kTileRows];
      for (auto& v : acc) v = _mm512_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        _tile_zero(0);
        _tile_loadd(1, qx.q_row(i) + b * 32, qx.cols);
        _tile_loadd(2, bt + b * kBTileBytes, 64);
        _tile_dpbssd(0, 1, 2);
        _tile_stored(0, c, 64);
        const __m512 d = _mm512_load_ps(dt + 16 * b);
        for (int64_t t = 0; t < kTileRows; ++t) {
          const __m512 s = _mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * t));
          acc[t] = _mm512_fmadd_ps(s, _mm512_mul_ps(d, _mm512_set1_ps(qx.d_row(i + t)[b])), acc[t]);
        }
      }
      for (int64_t t = 0; t < kTileRows; ++t) _mm512_mask_storeu_ps(a.y + (i + t) * w.rows() + row0, keep, acc[t]);
    }
  }
  _tile_release();

  // What did not fill a tile: the last activation rows (all rows), the odd last group (AMX's rows).
  if (i_end < a.i1) {
    KernelArgs r = a;
    r.i0 = i_end;
    rest(r);
  }
  if (pairs_end < g_end) {
    KernelArgs r = a;
    r.r0 = pairs_end * 8;
    r.i1 = i_end;
    rest(r);
  }
}

}  // namespace

TileKernel amx_x8_kernel(WeightFormat f) {
  if (f == WeightFormat::kQ4_0x8) return amx_tile<true>;
  if (f == WeightFormat::kQ8_0x8) return amx_tile<false>;
  return nullptr;
}

}  // namespace splash::cpu
