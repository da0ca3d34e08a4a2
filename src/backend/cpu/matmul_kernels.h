// Internal to backend/cpu: the kernel interface shared by the scalar, AVX2 and AVX-512 matmul
// files, and the int8 activation format of the quantized kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/matmul.h"
#include "core/ggml_blocks.h"

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

// GGML block structures and the K-quant scale unpacking (core/ggml_blocks.h).
using quant::BlockQ4_0;
using quant::BlockQ4_K;
using quant::BlockQ5_K;
using quant::BlockQ6_K;
using quant::BlockQ8_0;
using quant::k_scale_min;

}  // namespace splash::cpu
