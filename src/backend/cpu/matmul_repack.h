// Internal to backend/cpu: the interleaved "x8" layouts of Q4_0 and Q8_0 that the AVX2 / AVX-512
// GEMM and GEMV kernels read (matmul_gemm_impl.h), built once at load by pack_weights.
//
// Rows are taken 8 at a time (a group; the last group is padded with zero rows). A group holds its
// 32-value blocks one after the other; block b of a group is
//   fp16 d[8]                 scale of each of the 8 rows (16 bytes)
//   codes, in steps of 32 bytes: step s holds 4 code bytes of row 0, then 4 of row 1, ... row 7.
//     Q4_0: 4 steps, step s = bytes qs[4s .. 4s+3] of each row (low nibbles: values 4s..4s+3,
//           high nibbles: values 16+4s..16+4s+3), codes unsigned 0..15 (value = (q - 8) d).
//     Q8_0: 8 steps, step s = qs[4s .. 4s+3] of each row (values 4s..4s+3), int8.
// So one 32-byte load holds the same 4 (or 4 + 4) values of all 8 rows, and one broadcast of 4
// activation bytes meets them with a single vpmaddubsw: the 8 int32 lanes of the product are the
// 8 rows' partial sums, and a whole block ends in one float FMA with the 8 row scales.
//
// MLX 4-bit (kMlx4x8, built by pack_mlx_weights) uses the same code steps per 32 values, grouped by
// the MLX quantization group (group_size values, a multiple of 32) instead of by block:
//   scale[8], bias[8]               the 8 rows' scale and bias of this group, in the file's type
//                                   (f16 / bf16: 32 bytes, f32: 64 bytes; PackedWeights::scale_dtype)
//   group_size / 32 code blocks     128 bytes each, laid out as a Q4_0x8 block's codes (no scales)
// value = scale * code + bias, codes unsigned 0..15. The kernels sum scale-free integer products per
// 32 values, weigh them by the activation scale, and apply scale and bias once per group (the bias
// meets d * sum(codes) of the activation block, QuantizedActs::dsum).
// MLX 8-bit (kMlx8x8) is the same with Q8_0x8's code steps (8 steps of 4 bytes per row per 32
// values) holding code - 128 as int8, so the signed-code kernels apply without saturating; the
// kernel adds the 128 back as 128 x scale to the bias.
//
// Q4_K (kQ4_Kx8) keeps the file's 256-value super-blocks; one super-block of a group is
//   fp16 d[8], fp16 dmin[8]         the 8 rows' super-scales (32 bytes)
//   u8 sc[8][8], u8 m[8][8]         [sub-block j][row]: the 6-bit scale and min, unpacked (128 bytes)
//   8 code blocks                   sub-block j's 32 values, laid out as a Q4_0x8 block's codes
// value = d sc_j code - dmin m_j, codes unsigned 0..15: 1184 bytes per 8 x 256 values against the
// file's 1152 (the unpacked scales cost 2.8%, and save the kernel the 6-bit unpacking per row).
// Q5_K (kQ5_Kx8) is the same with 160-byte code blocks: the 128 bytes of low 4 bits, then 32 bytes
// whose byte 4r + k holds in bit s the fifth bit of step s's low-nibble value of row r and in bit
// 4 + s that of its high-nibble value: 1440 bytes against the file's 1408.
//
// Q6_K (kQ6_Kx8) likewise; one super-block of a group is
//   fp16 d[8]                       (16 bytes)
//   int8 sc[16][8]                  [16-value sub-block][row] (128 bytes)
//   8 blocks of 32 values, 192 bytes each:
//     the codes' low 4 bits         128 bytes, laid out as a Q4_0x8 block's codes
//     their top 2 bits              2 x 32 bytes; byte 4r + k of half h serves steps 2h and 2h + 1 of
//                                   row r: bits 4-5 / 6-7 the top bits of step 2h's low / high nibble
//                                   value, bits 0-1 / 2-3 those of step 2h + 1
// value = d sc (code - 32), codes unsigned 0..63: 1680 bytes per 8 x 256 values, as in the file. The
// low nibbles of a block are its first 16 values and the high nibbles the last 16, so each 16-value
// scale meets one integer sum.
#pragma once

#include <cstdint>

#include "backend/cpu/matmul.h"

namespace splash::cpu {

constexpr int kX8Rows = 8;                           // rows per group
constexpr int64_t kQ4_0x8BlockBytes = 16 + 8 * 16;   // 144: 8 scales + 8 x 16 code bytes
constexpr int64_t kQ8_0x8BlockBytes = 16 + 8 * 32;   // 272: 8 scales + 8 x 32 code bytes
constexpr int64_t kQ4_Kx8SuperBytes = 32 + 128 + 8 * 128;  // 1184: d, dmin, sc, m, 8 code blocks
constexpr int64_t kQ4_Kx8ScOffset = 32, kQ4_Kx8MinOffset = 96, kQ4_Kx8CodeOffset = 160;
constexpr int64_t kQ4_Kx8CodeBytes = 128, kQ5_Kx8CodeBytes = 160;  // per 32 values
constexpr int64_t kQ5_Kx8SuperBytes = 32 + 128 + 8 * 160;  // 1440
constexpr int64_t kQ6_Kx8SuperBytes = 16 + 128 + 8 * 192;  // 1680: d, sc, 8 blocks of codes
constexpr int64_t kQ6_Kx8ScOffset = 16, kQ6_Kx8BlockOffset = 144, kQ6_Kx8BlockBytes = 192;

// Bytes of one MLX group of 8 rows in kMlx4x8: 8 scales + 8 biases of `scale_bytes` (2 or 4) each,
// then group_size / 32 code blocks.
constexpr int64_t mlx4x8_group_bytes(int group_size, int scale_bytes) {
  return 16 * scale_bytes + 4 * static_cast<int64_t>(group_size);
}
// kMlx8x8: the same with 256-byte code blocks (8 steps of 4 bytes per row, as Q8_0x8).
constexpr int64_t mlx8x8_group_bytes(int group_size, int scale_bytes) {
  return 16 * scale_bytes + 8 * static_cast<int64_t>(group_size);
}

// F16 / BF16 (kF16x16, kBF16x16, AVX-512 only): groups of 16 rows; per column c the 16 rows' 2-byte
// values at group + 32 c (row r of the group at + 2 r). The values are the file's, unconverted.
constexpr int kF16x16Rows = 16;
// Rows [row0, row0 + rows) of a kF16x16 / kBF16x16 matrix from `rows` file rows at `src` (2-byte
// values, [rows, cols]); `dst` is zero-filled beforehand (padding rows stay 0).
void repack_f16x16_rows(const uint8_t* src, int64_t rows, int64_t cols, int64_t row0, uint8_t* dst);

// The K-quant x8 layouts (per 256-value super-block).
inline bool is_k_x8(WeightFormat x8) {
  return x8 == WeightFormat::kQ4_Kx8 || x8 == WeightFormat::kQ5_Kx8 || x8 == WeightFormat::kQ6_Kx8;
}

// The x8 format for a GGML file format, or the format itself when it has none.
WeightFormat x8_format_of(WeightFormat f);
// Bytes per 32 values of a group of 8 rows (K-quants: an eighth of a super-block).
int64_t x8_block_bytes(WeightFormat x8);

// Repacks `rows` GGML rows at `src` (Q4_0 for kQ4_0x8, Q8_0 for kQ8_0x8, Q4_K / Q5_K / Q6_K for
// kQ4_Kx8 / kQ5_Kx8 / kQ6_Kx8) into rows [row0, row0 + rows) of the x8 matrix at `dst`, which holds
// ceil(rows / 8) * (cols / 32) * x8_block_bytes(x8) bytes, so several file tensors can be stacked
// without a concatenated copy. `dst` is zero-filled beforehand (a fresh ArenaBuffer): the padding rows
// of the last group stay 0, and scales 0 make them contribute exactly 0.
void repack_x8_rows(WeightFormat x8, const uint8_t* src, int64_t rows, int64_t cols, int64_t row0, uint8_t* dst);

// Row r of an x8 matrix as f32 (the scalar reference reading of the layout).
void dequantize_x8_row(const PackedWeights& w, int64_t r, float* out);

}  // namespace splash::cpu
