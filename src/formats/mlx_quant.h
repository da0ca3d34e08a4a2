// MLX affine quantization (mlx.core.quantize, mode "affine"), as stored by mlx-lm checkpoints.
//
// A quantized module `<path>` (a linear layer, an embedding, a stacked-experts projection) stores
//   <path>.weight  U32            [..., out, in * bits / 32]   packed codes
//   <path>.scales  F16/BF16/F32   [..., out, in / group_size]
//   <path>.biases  same as scales [..., out, in / group_size]
// and value[o][i] = scales[o][i / g] * q[o][i] + biases[o][i / g].
//
// Packing (all bit widths): the codes of one row form a little-endian bit stream. Code j occupies
// bits [j * bits, (j + 1) * bits) counted from bit 0 of byte 0, bytes in order, the uint32 words
// read little-endian. For 2/4/8 bits that is 32/bits codes per word with code 0 in the low bits.
// For 3 and 6 bits MLX writes groups of 8 (resp. 4) codes into 3 bytes, and for 5 bits 8 codes
// into 5 bytes, lowest code in the lowest bits; a code may straddle a byte or word boundary.
// That is the same bit stream, so one rule covers every width.
//
// The config (`quantization` or `quantization_config` in config.json):
//   {"group_size": 64, "bits": 4, "model.layers.0.mlp.down_proj": {"group_size": 64, "bits": 8},
//    "model.embed_tokens": false, ...}
// A module is quantized iff `<path>.scales` exists; its parameters are its own entry when there is
// one, else the defaults. An entry of `false` means "not quantized".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "formats/safetensors.h"

namespace splash {

struct MlxQuantParams {
  uint32_t group_size = 64;  // 32, 64 or 128
  uint32_t bits = 4;         // 2, 3, 4, 5, 6 or 8
  bool operator==(const MlxQuantParams&) const = default;
};

Status validate_mlx_quant_params(const MlxQuantParams& p, const std::string& where);

class MlxQuantConfig {
 public:
  // Reads the quantization block of a config.json text. nullopt when the model is not quantized
  // (no `quantization` / `quantization_config` block).
  static Result<std::optional<MlxQuantConfig>> parse(std::string_view config_json, const std::string& source);

  // Parameters for a module: its own entry, or the defaults; nullopt when its entry is `false`.
  std::optional<MlxQuantParams> params_for(std::string_view module_path) const;

  const MlxQuantParams& defaults() const { return defaults_; }

 private:
  MlxQuantParams defaults_;
  std::map<std::string, std::optional<MlxQuantParams>, std::less<>> overrides_;
};

// A quantized module found in a checkpoint, shapes validated.
struct MlxQuantizedTensor {
  const SafeTensor* weight = nullptr;  // U32 [..., out, in * bits / 32]
  const SafeTensor* scales = nullptr;  // [..., out, in / group_size]
  const SafeTensor* biases = nullptr;  // [..., out, in / group_size]
  MlxQuantParams params;
  uint64_t rows = 0;         // product of all but the last dimension
  uint64_t in_features = 0;  // values per row after dequantization
};

// Looks `module_path` up in `model`. Returns nullopt when `<path>.scales` is absent (a plain,
// unquantized module). Errors: scales without biases or weight, wrong dtypes or shapes, a module
// quantized in the file but `false` in the config, or a quantized module with no config at all.
Result<std::optional<MlxQuantizedTensor>> find_mlx_quantized(const SafeTensorsModel& model,
                                                             const MlxQuantConfig* config,
                                                             std::string_view module_path);

// Packs codes (each < 2^bits) of whole rows into uint32 words, per the bit-stream rule above.
// codes.size() * bits must be a multiple of 32.
std::vector<uint32_t> mlx_pack_codes(std::span<const uint8_t> codes, uint32_t bits);
// Unpacks `n` codes from a packed row (bytes, any alignment).
void mlx_unpack_codes(std::span<const uint8_t> packed, uint32_t bits, std::span<uint8_t> codes);

// Dequantizes `rows` rows of `in_features` values into `out` [rows, in_features]. `packed` holds
// rows * in_features * bits / 8 bytes; `scales` / `biases` hold rows * in_features / group_size
// values of `scale_dtype` (F16, BF16 or F32). Byte spans need no alignment (mapped files).
Status mlx_dequantize(std::span<const uint8_t> packed, std::span<const uint8_t> scales,
                      std::span<const uint8_t> biases, DType scale_dtype, const MlxQuantParams& p,
                      uint64_t rows, uint64_t in_features, std::span<float> out);
// Convenience: the whole tensor.
Result<std::vector<float>> mlx_dequantize(const MlxQuantizedTensor& t);

struct MlxQuantized {
  std::vector<uint32_t> weight;  // [rows, in * bits / 32]
  std::vector<uint8_t> scales;   // [rows, in / group_size] values of scale_dtype, raw bytes
  std::vector<uint8_t> biases;   // [rows, in / group_size] values of scale_dtype, raw bytes
  DType scale_dtype = DType::kF16;
};

// Quantizes `w` [rows, in_features] as mlx.core.quantize does: per group, with n = 2^bits - 1,
//   scale = max((max - min) / n, 1e-7), negated unless |min| > |max|;
//   edge = min if |min| > |max| else max; q0 = rint(edge / scale);
//   if q0 != 0 { scale = edge / q0; bias = edge } else bias = 0  (the edge value is exact);
//   q = clamp(rint((w - bias) / scale), 0, n).
// Codes are computed with the f32 scale/bias, which are then stored as `scale_dtype`.
Result<MlxQuantized> mlx_quantize(std::span<const float> w, uint64_t rows, uint64_t in_features,
                                  const MlxQuantParams& p, DType scale_dtype = DType::kF16);

}  // namespace splash
