// AMX int8 prefill kernels for the Q4_0x8, Q8_0x8 and MLX 4 / 8-bit x8 layouts (matmul_repack.h). Only called when
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
// (8 rows x 64 int8); tiles 3-5 the same again (block_sums).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

constexpr int64_t kTileRows = 16;   // activation rows per A tile, weight rows per B tile
constexpr int64_t kBTileBytes = 512;  // 8 rows x 64 bytes

#include "backend/cpu/matmul_mlx_scales_impl.h"
#include "backend/cpu/matmul_pair512_impl.h"

// The layouts the AMX kernel takes. Q4_0 / Q8_0: one scale per block. MLX 4 / 8-bit (ST: the scale
// type, as mlx_scales8): a scale and a bias per group of `subs` blocks, the codes as stored (4-bit
// 0..15; 8-bit code - 128, the bias taken as bias + 128 x scale), as the VNNI kernel reads them.
enum class Layout { kQ4_0, kQ8_0, kMlx4, kMlx8 };
constexpr bool is_mlx(Layout l) { return l == Layout::kMlx4 || l == Layout::kMlx8; }
constexpr bool is_4bit(Layout l) { return l == Layout::kQ4_0 || l == Layout::kMlx4; }

// Per weight row pair: [nb] B tiles, [groups, 16] scales and (MLX) [groups, 16] biases.
struct PairTiles {
  uint8_t* b = nullptr;
  float* scale = nullptr;
  float* bias = nullptr;
};

// B tile of one block from the code steps of groups g (c0) and g + 1 (c1) into t; Q4_0's codes as
// signed q - 8 (both formats then take signed x signed products: MLX's 0..15 are valid signed bytes).
template <Layout L>
void build_block(const uint8_t* c0, const uint8_t* c1, uint8_t* t) {
  if constexpr (is_4bit(L)) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i off = _mm512_set1_epi8(L == Layout::kQ4_0 ? 8 : 0);
    for (int s = 0; s < 4; ++s) {
      const __m512i v = load_pair(c0 + 32 * s, c1 + 32 * s);
      _mm512_store_si512(t + 64 * s, _mm512_sub_epi8(_mm512_and_si512(v, m4), off));  // codes 4s..4s+3
      _mm512_store_si512(t + 64 * (4 + s), _mm512_sub_epi8(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), off));  // 16 + 4s..
    }
  } else {
    for (int s = 0; s < 8; ++s) _mm512_store_si512(t + 64 * s, load_pair(c0 + 32 * s, c1 + 32 * s));
  }
}

// The B tiles and scales of groups g (p0) and g + 1 (p1), every block.
template <Layout L, int ST>
void build_pair(const PackedWeights& w, const uint8_t* p0, const uint8_t* p1, int64_t nb, const PairTiles& out) {
  if constexpr (!is_mlx(L)) {
    constexpr int64_t kBlock = L == Layout::kQ4_0 ? kQ4_0x8BlockBytes : kQ8_0x8BlockBytes;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* a0 = p0 + b * kBlock;
      const uint8_t* a1 = p1 + b * kBlock;
      build_block<L>(a0 + 16, a1 + 16, out.b + b * kBTileBytes);
      _mm512_store_ps(out.scale + 16 * b, scales_pair(a0, a1));
    }
  } else {
    constexpr int kSb = mlx_scale_bytes(ST);
    constexpr int64_t kCodes = L == Layout::kMlx8 ? 256 : 128;  // code bytes per block
    const int64_t subs = w.group_size() / 32;
    // Bytes of one MLX group (scales, biases, codes) of the 8 rows; w.group_bytes() is the x8 group's.
    const int64_t gb = L == Layout::kMlx8 ? mlx8x8_group_bytes(32 * subs, kSb) : mlx4x8_group_bytes(32 * subs, kSb);
    for (int64_t j = 0; j < nb / subs; ++j) {
      const uint8_t* a0 = p0 + j * gb;
      const uint8_t* a1 = p1 + j * gb;
      for (int64_t k = 0; k < subs; ++k)
        build_block<L>(a0 + 16 * kSb + kCodes * k, a1 + 16 * kSb + kCodes * k, out.b + (j * subs + k) * kBTileBytes);
      const __m512 scale = mlx_scales_pair<ST>(a0, a1);
      __m512 bias = mlx_scales_pair<ST>(a0 + 8 * kSb, a1 + 8 * kSb);
      if constexpr (L == Layout::kMlx8) bias = _mm512_fmadd_ps(scale, _mm512_set1_ps(128.0f), bias);
      _mm512_store_ps(out.scale + 16 * j, scale);
      _mm512_store_ps(out.bias + 16 * j, bias);
    }
  }
}

// Block b's product of activation rows x (stride: the row length) and the B tiles bt into tile set
// 0 (C, A, B = tiles 0, 1, 2) or set 1 (tiles 3, 4, 5). Two functions, not one template: the tile
// intrinsics take their tile numbers as literal tokens.
inline void product_set0(const int8_t* x, int64_t stride, int64_t b, const uint8_t* bt) {
  _tile_zero(0);
  _tile_loadd(1, x + b * 32, stride);
  _tile_loadd(2, bt + b * kBTileBytes, 64);
  _tile_dpbssd(0, 1, 2);
}
inline void product_set1(const int8_t* x, int64_t stride, int64_t b, const uint8_t* bt) {
  _tile_zero(3);
  _tile_loadd(4, x + b * 32, stride);
  _tile_loadd(5, bt + b * kBTileBytes, 64);
  _tile_dpbssd(3, 4, 5);
}

// The int32 sums of blocks [b0, b1) in turn (activation rows [i, i + 16) x the pair's 16 rows), each
// handed to on_block(b, sums) in block order. Two blocks per step in two sets of tiles (C, A, B = 0,
// 1, 2 and 3, 4, 5): tiles are not renamed, so with one set every block's product waited for the
// previous block's store; with two, the second product runs while the first one's sums are scaled.
template <class OnBlock>
inline void block_sums(const QuantizedActs& qx, int64_t i, int64_t b0, int64_t b1, const uint8_t* bt,
                       OnBlock&& on_block) {  // Q4_0 / Q8_0
  alignas(64) int32_t c0[kTileRows * 16], c1[kTileRows * 16];
  const int8_t* x = qx.q_row(i);
  int64_t b = b0;
  for (; b + 2 <= b1; b += 2) {
    product_set0(x, qx.cols, b, bt);
    product_set1(x, qx.cols, b + 1, bt);
    _tile_stored(0, c0, 64);
    on_block(b, c0);
    _tile_stored(3, c1, 64);
    on_block(b + 1, c1);
  }
  if (b < b1) {
    product_set0(x, qx.cols, b, bt);
    _tile_stored(0, c0, 64);
    on_block(b, c0);
  }
}

// Activation rows [i, i + 16) x the pair's 16 rows into acc, with the float steps of the 512-bit VNNI
// kernel of the layout (q4_0x16_micro / q8_0x16_micro / mlx_x16_micro), in the same order. gsums (MLX):
// the 16 rows' code sums per group, [16, groups].
template <Layout L>
void tile_rows(const PackedWeights& w, const QuantizedActs& qx, int64_t i, int64_t nb, const PairTiles& pt,
               const float* gsums, __m512* acc) {
  for (int64_t t = 0; t < kTileRows; ++t) acc[t] = _mm512_setzero_ps();
  if constexpr (!is_mlx(L)) {
    block_sums(qx, i, 0, nb, pt.b, [&](int64_t b, const int32_t* c) {
      const __m512 d = _mm512_load_ps(pt.scale + 16 * b);
      for (int64_t t = 0; t < kTileRows; ++t) {
        const __m512 s = _mm512_cvtepi32_ps(_mm512_load_si512(c + 16 * t));
        acc[t] = _mm512_fmadd_ps(s, _mm512_mul_ps(d, _mm512_set1_ps(qx.d_row(i + t)[b])), acc[t]);
      }
    });
  } else {
    // Per group, two blocks per step in the two tile sets as block_sums, written out here: through
    // block_sums' callback the group sums lived in memory and it ran 14% slower.
    alignas(64) int32_t c0[kTileRows * 16], c1[kTileRows * 16];
    const int8_t* x = qx.q_row(i);
    const int64_t subs = w.group_size() / 32, groups = nb / subs;
    for (int64_t j = 0; j < groups; ++j) {
      __m512 gsum[kTileRows];
      for (int64_t t = 0; t < kTileRows; ++t) gsum[t] = _mm512_setzero_ps();
      int64_t b = j * subs;
      const int64_t b_end = b + subs;
      for (; b + 2 <= b_end; b += 2) {
        product_set0(x, qx.cols, b, pt.b);
        product_set1(x, qx.cols, b + 1, pt.b);
        _tile_stored(0, c0, 64);
        for (int64_t t = 0; t < kTileRows; ++t)
          gsum[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c0 + 16 * t)), _mm512_set1_ps(qx.d_row(i + t)[b]), gsum[t]);
        _tile_stored(3, c1, 64);
        for (int64_t t = 0; t < kTileRows; ++t)
          gsum[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c1 + 16 * t)), _mm512_set1_ps(qx.d_row(i + t)[b + 1]), gsum[t]);
      }
      if (b < b_end) {  // g32: one block per group
        product_set0(x, qx.cols, b, pt.b);
        _tile_stored(0, c0, 64);
        for (int64_t t = 0; t < kTileRows; ++t)
          gsum[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c0 + 16 * t)), _mm512_set1_ps(qx.d_row(i + t)[b]), gsum[t]);
      }
      const __m512 scale = _mm512_load_ps(pt.scale + 16 * j);
      const __m512 bias = _mm512_load_ps(pt.bias + 16 * j);
      for (int64_t t = 0; t < kTileRows; ++t)
        acc[t] = _mm512_fmadd_ps(bias, _mm512_set1_ps(gsums[t * groups + j]), _mm512_fmadd_ps(gsum[t], scale, acc[t]));
    }
  }
}

// Rows [r0, r1) x activation rows [i0, i1): full 16 x 16 tiles on AMX, the rest on the AVX-512 kernel.
template <Layout L, int ST = 0>
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
  for (int k = 3; k < 6; ++k) {  // the second set (block_sums)
    cfg.rows[k] = cfg.rows[k - 3];
    cfg.colsb[k] = cfg.colsb[k - 3];
  }
  _tile_loadconfig(&cfg);

  // Per thread, reused (64-byte lines): [nb] B tiles of 8 lines, [nb] scale and bias lines.
  struct alignas(64) Line {
    uint8_t bytes[64];
  };
  thread_local std::vector<Line> lines;
  if (lines.size() < static_cast<size_t>(nb * 10)) lines.resize(static_cast<size_t>(nb * 10));
  // MLX: the activation rows' code sums per group (d x sum(codes), the blocks added in order as the
  // VNNI kernel does), once per task instead of once per weight row pair: [i_end - i0, groups].
  thread_local std::vector<float> gsums;
  const int64_t groups = is_mlx(L) ? nb / (w.group_size() / 32) : 0;
  if constexpr (is_mlx(L)) {
    const int64_t subs = w.group_size() / 32;
    if (gsums.size() < static_cast<size_t>((i_end - a.i0) * groups)) gsums.resize(static_cast<size_t>((i_end - a.i0) * groups));
    for (int64_t t = a.i0; t < i_end; ++t)
      for (int64_t j = 0; j < groups; ++j) {
        float sum = 0.0f;
        for (int64_t k = 0; k < subs; ++k) sum += qx.dsum_row(t)[j * subs + k];
        gsums[static_cast<size_t>((t - a.i0) * groups + j)] = sum;
      }
  }
  PairTiles pt;
  pt.b = lines.data()->bytes;
  pt.scale = reinterpret_cast<float*>(lines[static_cast<size_t>(nb * 8)].bytes);
  pt.bias = reinterpret_cast<float*>(lines[static_cast<size_t>(nb * 9)].bytes);

  for (int64_t g = g0; g < pairs_end; g += 2) {
    const uint8_t* p0 = w.data() + g * w.group_bytes();
    build_pair<L, ST>(w, p0, p0 + w.group_bytes(), nb, pt);
    const int64_t row0 = g * 8;
    const int64_t valid = std::min<int64_t>(16, w.rows() - row0);
    const __mmask16 keep = static_cast<__mmask16>((1u << valid) - 1u);
    for (int64_t i = a.i0; i < i_end; i += kTileRows) {
      __m512 acc[kTileRows];
      tile_rows<L>(w, qx, i, nb, pt, is_mlx(L) ? gsums.data() + (i - a.i0) * groups : nullptr, acc);
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

template <Layout L>
void amx_mlx_tile(const KernelArgs& a) {
  switch (mlx_scale_kind(a.w->scale_dtype())) {
    case 1: amx_tile<L, 1>(a); break;
    case 2: amx_tile<L, 2>(a); break;
    default: amx_tile<L, 0>(a); break;
  }
}

}  // namespace

TileKernel amx_x8_kernel(WeightFormat f) {
  if (f == WeightFormat::kQ4_0x8) return amx_tile<Layout::kQ4_0>;
  if (f == WeightFormat::kQ8_0x8) return amx_tile<Layout::kQ8_0>;
  if (f == WeightFormat::kMlx4x8) return amx_mlx_tile<Layout::kMlx4>;
  if (f == WeightFormat::kMlx8x8) return amx_mlx_tile<Layout::kMlx8>;
  return nullptr;
}

}  // namespace splash::cpu
