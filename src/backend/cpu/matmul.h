// Matrix products y = x * W^T for the weight formats Splash loads: F32, F16, BF16, GGML Q8_0, Q4_0,
// Q4_K, Q5_K, Q6_K, and MLX affine 4/8-bit. Weights are packed once at load (pack_weights); matmul
// then picks the decode regime (few activation rows: stream each weight row once, several rows in
// flight) or the prefill regime (many rows: tiles of weight rows x activation rows so a weight block
// is decoded once per tile) from n.
//
// Quantized formats quantize the activations to int8 per 32 values (scale = max|x| / 127) and use
// integer dot products per block, like llama.cpp; float formats multiply in f32.
//
// Ownership: a PackedWeights either views the caller's memory (the mapped model file must outlive
// it) or owns a repacked copy; see owns_data(). Thread-safety: PackedWeights is immutable, matmul
// may run concurrently on the same weights with different outputs (each call uses the given pool).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "core/dtype.h"
#include "core/result.h"
#include "core/thread_pool.h"
#include "core/weight_arena.h"

namespace splash {

// The layout a PackedWeights holds; the GGML ones are the file's own blocks, row after row.
enum class WeightFormat : uint8_t {
  kF32, kF16, kBF16,
  kQ8_0, kQ4_0,
  kQ4_K, kQ5_K, kQ6_K,
  kMlx4,  // repacked MLX affine 4-bit: per group {f32 scale, f32 bias, codes as split nibbles per 32}
  kMlx8,  // repacked MLX affine 8-bit: per group {f32 scale, f32 bias', codes - 128 as int8}
  // Q4_0 / Q8_0 repacked at load for the AVX2 / AVX-512 kernels: groups of 8 rows, per 32-value
  // block the 8 fp16 scales, then the codes interleaved 4 bytes per row (matmul_repack.h). Owned.
  kQ4_0x8, kQ8_0x8,
  // MLX affine 4-bit repacked for the AVX2 / AVX-512 kernels: groups of 8 rows, per MLX group the 8
  // scales and 8 biases (in the file's type, scale_dtype()), then per 32 values the codes
  // interleaved as in kQ4_0x8. Owned.
  kMlx4x8,
  // MLX affine 8-bit the same way, codes - 128 as int8 in Q8_0x8's steps. Owned.
  kMlx8x8,
  // F16 / BF16 repacked for the AVX-512 kernels: groups of 16 rows, per column the 16 rows' values
  // side by side (32 bytes), so one load and conversion gives a zmm of 16 rows that meets a
  // broadcast activation in one FMA (matmul_repack.h). Exact: the values are the file's. Owned.
  kF16x16, kBF16x16,
  // Q4_K repacked for the AVX2 / AVX-512 kernels: groups of 8 rows, per 256-value super-block the 8
  // rows' fp16 d and dmin, their 6-bit sub-block scales and mins unpacked to bytes, then per 32
  // values the codes interleaved as in kQ4_0x8 (matmul_repack.h). Owned.
  kQ4_Kx8,
  // Q5_K as kQ4_Kx8, each 32 values' codes followed by their fifth bits. Owned.
  kQ5_Kx8,
  // Q6_K repacked likewise: per super-block the 8 rows' fp16 d and int8 16-value scales, then per 32
  // values the low 4 bits of the codes as in kQ4_0x8 and their top 2 bits beside them. Owned.
  kQ6_Kx8,
};
const char* weight_format_name(WeightFormat f);
// F32 / F16 / BF16 in any layout (the kernels take f32 activations, no quantization).
bool is_float_format(WeightFormat f);
// The interleaved layouts built at load (the x8 formats and the 16-row float ones).
bool is_x8_format(WeightFormat f);

// An MLX affine-quantized matrix as it sits in a safetensors file: three tensors.
// value[r][c] = scale[r][c / group_size] * code[r][c] + bias[r][c / group_size].
struct MlxAffineView {
  int bits = 4;                     // 4 or 8
  int group_size = 64;              // a multiple of 32
  const uint32_t* codes = nullptr;  // [rows, cols * bits / 32], little-endian, lowest bits first
  const void* scales = nullptr;     // [rows, cols / group_size], scale_dtype
  const void* biases = nullptr;     // [rows, cols / group_size], scale_dtype
  DType scale_dtype = DType::kF16;  // kF16, kBF16 or kF32
};

// One of several matrices stacked along the rows (pack_stacked_weights): `rows` rows at `data`.
struct WeightRows {
  const void* data = nullptr;
  int64_t rows = 0;
};

// The decode prefetch distance a layout starts from on this CPU (PackedWeights::stream_prefetch_bytes;
// where not 0, the layout's tuner starts there and moves with the host: prefetch_tuner.h). On
// Intel, whose hardware streamers stop at every 4 KiB boundary even on huge pages (0.6B Q4_0 decode
// +23% on a Sapphire Rapids-class host with 2 KiB), it was measured per layout with two decode
// streams: 1 KiB for Q8_0, Q4_0, Q6_K and the 16-row F16 / BF16 groups, 2 KiB for Q4_K, Q5_K and MLX
// (bench_matmul decode/<type>/prefetch:P/streams:2 and splash bench; docs/PERFORMANCE.md,
// "Prefetch distance per layout"). 0 elsewhere: a Zen 4 host's decode lost 10-25% with any distance
// from 256 B to 6 KB (docs/PERFORMANCE.md, "Decode prefetch by vendor").
int64_t default_stream_prefetch_bytes(WeightFormat format);

// The decode prefetch distances tuned so far, one per layout that ran decode products: e.g.
// "Q4_0x8 768 B (12 trials, 2 moves)", "; "-separated; empty when none ran (benchmark reports).
std::string decode_prefetch_summary();

// The decode streams per task for this CPU (PackedWeights::decode_streams): 2 on Intel, where one
// thread's decode pulls ~13% more from two sequential streams walked together than from one
// (docs/PERFORMANCE.md, "Two decode streams per thread"), 1 elsewhere (on a Zen 4 host two adjacent
// groups walked together read less than one stream: the hardware prefetchers follow one stream to the end).
int default_decode_streams();

class PackedWeights {
 public:
  PackedWeights() = default;
  PackedWeights(PackedWeights&&) noexcept = default;
  PackedWeights& operator=(PackedWeights&&) noexcept = default;
  PackedWeights(const PackedWeights&) = delete;
  PackedWeights& operator=(const PackedWeights&) = delete;

  WeightFormat format() const { return format_; }
  int64_t rows() const { return rows_; }  // output features
  int64_t cols() const { return cols_; }  // input features
  IsaLevel isa() const { return isa_; }   // kernel level chosen at pack time
  bool owns_data() const { return !storage_.empty(); }
  // Row-major formats: [rows, row_bytes]. x8 formats: [ceil(rows / group_rows()), group_bytes], see is_x8().
  const uint8_t* data() const { return data_; }
  // Bytes of one row's weights (for x8 formats the GGML row size: the same data, interleaved).
  int64_t row_bytes() const { return row_bytes_; }
  // Row-major formats only (not x8).
  const uint8_t* row(int64_t r) const { return data_ + r * row_bytes_; }
  bool is_x8() const { return is_x8_format(format_); }
  int group_size() const { return group_size_; }        // MLX formats; 0 otherwise
  // kMlx4x8 / kMlx8x8: the type its scales and biases are kept in (the file's: F16, BF16 or F32).
  DType scale_dtype() const { return scale_dtype_; }
  // Row-major MLX formats: bytes of one group of a row; x8 formats: bytes of one group of 8 rows.
  int64_t group_bytes() const { return group_bytes_; }
  // Bytes the kernels read for the whole matrix (packed layout, x8 padding rows included).
  int64_t packed_bytes() const {
    return is_x8() ? (rows_ + group_rows() - 1) / group_rows() * group_bytes_ : rows_ * row_bytes_;
  }
  // Rows per group of an interleaved layout: 16 for kF16x16 / kBF16x16, 8 for the other x8 formats.
  int group_rows() const { return format_ == WeightFormat::kF16x16 || format_ == WeightFormat::kBF16x16 ? 16 : 8; }
  // How far ahead (bytes) the decode kernels of the interleaved layouts prefetch this matrix's stream
  // into L1; 0 leaves it to the hardware prefetchers. The value of set_stream_prefetch_bytes once
  // set (benchmarks compare values); until then the layout's tuned distance where the default is
  // not 0 (stream_prefetch_tuned(): one per layout, moving while tokens are decoded,
  // backend/cpu/prefetch_tuner.h), else default_stream_prefetch_bytes(format()). Changing it never
  // changes results.
  int64_t stream_prefetch_bytes() const;
  bool stream_prefetch_tuned() const;
  void set_stream_prefetch_bytes(int64_t bytes) { stream_prefetch_bytes_ = bytes < 0 ? 0 : bytes; }
  // How many sequential streams one decode task of an interleaved layout (Q4_0, Q8_0, K-quants, MLX;
  // F16 / BF16 in 16-row groups) reads at once: 1, or 2 (the task's rows cut in two runs of groups,
  // one group of each per kernel call). Set at pack time to default_decode_streams(); never changes
  // results (the sums per row are the same).
  int decode_streams() const { return decode_streams_; }
  void set_decode_streams(int streams) { decode_streams_ = streams >= 2 ? 2 : 1; }
  // Whether prefill products (16 or more activation rows) run on the AMX tiles: Q4_0, Q8_0 and MLX
  // 4 / 8-bit (x8 layouts) on a CPU where amx_usable(), unless turned off here (tests and benchmarks compare the
  // two: the results are bit-identical, as the integer sums are exact and the float steps the same).
  bool uses_amx() const;
  void set_amx_allowed(bool allowed) { amx_allowed_ = allowed; }

 private:
  friend Result<PackedWeights> pack_weights(DType, const void*, int64_t, int64_t, IsaLevel, std::string_view);
  friend Result<PackedWeights> pack_stacked_weights(DType, std::span<const WeightRows>, int64_t, IsaLevel,
                                                    std::string_view);
  static Result<PackedWeights> pack_parts(DType type, std::span<const WeightRows> parts, int64_t cols, IsaLevel level,
                                          std::string_view name, bool own);
  friend Result<PackedWeights> pack_mlx_weights(const MlxAffineView&, int64_t, int64_t, IsaLevel,
                                                std::string_view);

  WeightFormat format_ = WeightFormat::kF32;
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  IsaLevel isa_ = IsaLevel::kScalar;
  const uint8_t* data_ = nullptr;
  int64_t row_bytes_ = 0;
  int group_size_ = 0;
  DType scale_dtype_ = DType::kF32;
  int64_t group_bytes_ = 0;
  int64_t stream_prefetch_bytes_ = -1;  // -1: not set (tuned, or default_stream_prefetch_bytes(format_))
  int decode_streams_ = default_decode_streams();
  bool amx_allowed_ = true;
  ArenaBuffer storage_;  // repacked copy when the file layout is not the kernel's (on huge pages)
};

// Wraps `data` ([rows, cols] of `type`, GGML block layout for quantized types) for matmul. Zero-copy
// for the float types (and for the quantized ones below AVX2): `data` must then stay valid and
// unchanged while the result is used. Q4_0, Q8_0, Q4_K, Q5_K and Q6_K at level AVX2 or above, and
// F16 / BF16 at AVX-512, are repacked into an owned x8 layout (owns_data()):
// `data` is not read after the call, so a loader may drop its file pages. `name`
// (the tensor's name) goes into error messages. `level` is clamped to what the CPU supports; pass a
// lower one to force a kernel tier (tests, benchmarks).
Result<PackedWeights> pack_weights(DType type, const void* data, int64_t rows, int64_t cols,
                                   IsaLevel level = IsaLevel::kAvx512, std::string_view name = {});

// Several [rows_i, cols] matrices of one type stacked into one [sum rows_i, cols] matrix (fused
// q/k/v or gate/up projections) that always owns its data: repacked straight from the parts where
// pack_weights would repack (Q4_0 / Q8_0 / K-quants at AVX2 and above), one concatenated copy otherwise. The
// parts are not read after the call. Errors as pack_weights'.
Result<PackedWeights> pack_stacked_weights(DType type, std::span<const WeightRows> parts, int64_t cols,
                                           IsaLevel level = IsaLevel::kAvx512, std::string_view name = {});

// Repacks an MLX affine matrix into an owned layout: at AVX2 and above into kMlx4x8 / kMlx8x8 (8
// rows interleaved, like Q4_0x8 / Q8_0x8), otherwise row by row (per group f32 scale/bias, codes in 32-blocks).
Result<PackedWeights> pack_mlx_weights(const MlxAffineView& view, int64_t rows, int64_t cols,
                                       IsaLevel level = IsaLevel::kAvx512, std::string_view name = {});

// y[i, r] = sum_c x[i, c] * W[r, c] for i < n. x: [n, cols] f32, y: [n, rows] f32 (overwritten).
// x and y must not overlap. n == 0 is a no-op.
void matmul(const PackedWeights& w, const float* x, float* y, int64_t n, ThreadPool& pool);

// Rows [r0, r1) of matmul(w, x, y, n) on the calling thread alone, in the decode regime (n <= 8);
// y's other rows are not written. The same bits as matmul() gives for those rows. r0 must start a
// row group (PackedWeights::group_rows() for interleaved layouts) and r1 end one or be rows().
void matmul_rows(const PackedWeights& w, const float* x, float* y, int64_t n, int64_t r0, int64_t r1);

// Dequantizes weight row r into out[cols] (f32), from the packed layout. For tests and for ops that
// need a row as floats (embedding lookup on a quantized tied matrix).
void dequantize_packed_row(const PackedWeights& w, int64_t r, float* out);

}  // namespace splash
