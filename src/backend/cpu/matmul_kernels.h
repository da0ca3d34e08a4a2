// Internal to backend/cpu: the kernel interface shared by the scalar, AVX2 and AVX-512 matmul
// files, and the int8 activation format of the quantized kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/matmul.h"

namespace splash::cpu {

constexpr int kActBlock = 32;  // activation quantization block (values per scale)

// Activations quantized per 32 values: x ~= d[i][b] * qs[i][b*32 + k], |qs| <= 127.
struct QuantizedActs {
  int64_t n = 0;
  int64_t cols = 0;          // a multiple of 32
  std::vector<int8_t> qs;    // [n, cols]
  std::vector<float> d;      // [n, cols / 32] scale per block
  std::vector<float> dsum;   // [n, cols / 32] d * sum(qs of the block): folds code offsets and biases
  std::vector<int32_t> qsum; // [n, cols / 32] sum(qs of the block): the x8 kernels fold Q4_0's -8 in int32
  std::vector<int32_t> qsum16; // [n, cols / 32] sum of the block's first 16 qs: Q6_Kx8's -32 per 16 values

  int64_t blocks() const { return cols / kActBlock; }
  const int8_t* q_row(int64_t i) const { return qs.data() + i * cols; }
  const float* d_row(int64_t i) const { return d.data() + i * blocks(); }
  const float* dsum_row(int64_t i) const { return dsum.data() + i * blocks(); }
  const int32_t* qsum_row(int64_t i) const { return qsum.data() + i * blocks(); }
  const int32_t* qsum16_row(int64_t i) const { return qsum16.data() + i * blocks(); }
};

// One unit of work: y[i, r] for r in [r0, r1), i in [i0, i1). `x` is [n, cols] f32 (float formats),
// `qx` the quantized activations (quantized formats), `y` is [n, w.rows()].
struct KernelArgs {
  const PackedWeights* w = nullptr;
  const float* x = nullptr;
  const QuantizedActs* qx = nullptr;
  float* y = nullptr;
  int64_t r0 = 0, r1 = 0;
  int64_t i0 = 0, i1 = 0;
  int64_t prefetch = 0;  // the x8 / x16 decode kernels' prefetch distance (PackedWeights::stream_prefetch_bytes)
  int streams = 1;       // the x8 / x16 kernels' streams per task in decode (PackedWeights::decode_streams): 1 or 2
};
using TileKernel = void (*)(const KernelArgs& a);

// Per level, the kernel for a format, or nullptr when that level has none (the caller falls back).
TileKernel scalar_kernel(WeightFormat f);
TileKernel avx2_kernel(WeightFormat f);
TileKernel avx512_kernel(WeightFormat f);
// The x8-layout kernels (Q4_0x8, Q8_0x8; matmul_repack.h), nullptr for other formats.
TileKernel avx2_x8_kernel(WeightFormat f);
TileKernel avx512_x8_kernel(WeightFormat f);
// AMX int8 tiles for prefill (matmul_amx.cpp): kQ4_0x8, kQ8_0x8, kMlx4x8, kMlx8x8, nullptr otherwise. Only called
// when amx_usable(); rows and activation rows that do not fill a 16 x 16 tile go to avx512_x8_kernel.
TileKernel amx_x8_kernel(WeightFormat f);

// Activation quantizers, rows [i0, i1) of x ([n, cols]) into qx (already sized). All levels produce
// bit-identical output, so kernels of different levels see the same int8 inputs.
void quantize_acts_scalar(const float* x, QuantizedActs& qx, int64_t i0, int64_t i1);
void quantize_acts_avx2(const float* x, QuantizedActs& qx, int64_t i0, int64_t i1);

// Scalar dequantization of one row of the packed layout (the reference the kernels are tested by).
void dequantize_row_scalar(const PackedWeights& w, int64_t r, float* out);

// GGML block structures (bit-exact with GGUF files).
struct BlockQ8_0 {
  uint16_t d;     // fp16 scale
  int8_t qs[32];  // value = qs * d
};
struct BlockQ4_0 {
  uint16_t d;         // fp16 scale
  uint8_t qs[16];     // element k in low nibble of qs[k], element k+16 in the high nibble
};
struct BlockQ4_K {
  uint16_t d;           // fp16 super-scale of the 6-bit sub-block scales
  uint16_t dmin;        // fp16 super-scale of the 6-bit sub-block mins
  uint8_t scales[12];   // 8 x (6-bit scale, 6-bit min), packed
  uint8_t qs[128];      // 64-value chunks: low nibbles = first 32, high nibbles = next 32
};
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];       // fifth bit: element 32*j + l takes bit j of qh[l]
  uint8_t qs[128];
};
struct BlockQ6_K {
  uint8_t ql[128];      // low 4 bits
  uint8_t qh[64];       // high 2 bits
  int8_t scales[16];    // one per 16 values
  uint16_t d;           // fp16 super-scale
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K super-block. `static`: this header
// is included by files built with AVX2 / AVX-512 flags, and an inline function with external linkage
// could have its ISA-flagged copy picked by the linker for the baseline code too.
static inline void k_scale_min(const uint8_t* scales, int j, int& sc, int& m) {
  if (j < 4) {
    sc = scales[j] & 63;
    m = scales[j + 4] & 63;
  } else {
    sc = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4);
    m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

}  // namespace splash::cpu
