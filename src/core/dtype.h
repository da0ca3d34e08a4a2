// Element types of tensors as they sit in model files and in memory. Block-quantized types store
// `block_elems` values in `block_bytes` bytes (GGML layouts, bit-exact with GGUF files); plain types
// have block_elems == 1. MLX affine quantization is not a dtype: it is U32-packed codes plus
// separate scales/biases tensors (formats/mlx_quant.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace splash {

enum class DType : uint8_t {
  kF32, kF16, kBF16, kF64,
  kI8, kI16, kI32, kI64, kU8, kU16, kU32, kU64, kBool,
  kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ8_0,
  kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K, kQ8_K,
};

struct DTypeTraits {
  std::string_view name;  // GGUF / llama.cpp spelling: "F32", "Q4_K", ...; "U32" etc. for safetensors ints
  uint32_t block_elems;
  uint32_t block_bytes;
  bool quantized;
};

const DTypeTraits& dtype_traits(DType t);
inline std::string_view dtype_name(DType t) { return dtype_traits(t).name; }
std::optional<DType> dtype_from_name(std::string_view name);  // case-insensitive "q8_0", "F16", ...

// Bytes taken by `n_elems` values; nullopt when n_elems is not a whole number of blocks or overflows.
std::optional<uint64_t> dtype_bytes(DType t, uint64_t n_elems);

// GGUF's numeric tensor-type ids (ggml_type), both ways.
std::optional<DType> dtype_from_gguf(uint32_t ggml_type);
std::optional<uint32_t> dtype_to_gguf(DType t);

constexpr uint32_t kQK_K = 256;  // super-block size of the K-quants

}  // namespace splash
