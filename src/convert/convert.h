// `splash convert`: any model ModelFiles opens (GGUF, safetensors, MLX, llama2.c) into GGUF or
// (MLX-quantized) safetensors. Tensors are converted one at a time and streamed to the output, so
// peak memory is about one tensor in f32, never the whole model.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "core/dtype.h"
#include "core/result.h"
#include "formats/mlx_quant.h"
#include "formats/model_files.h"
#include "tokenizer/tokenizer.h"

namespace splash {

enum class ConvertTarget : uint8_t { kGguf, kSafetensors };

struct ConvertOptions {
  ConvertTarget target = ConvertTarget::kGguf;
  // GGUF: type of the matrices (norms and biases stay F32). A matrix whose rows are not whole
  // blocks of that type falls back to Q8_0, then F16 (reported through `log`).
  DType gguf_type = DType::kF32;
  // Safetensors: MLX affine quantization of the matrices, or nullopt for plain float tensors.
  // A module whose row length the group size does not divide gets group 32 (a per-module entry in
  // the quantization block) or, failing that, stays unquantized (`false`).
  std::optional<MlxQuantParams> mlx;
  DType float_type = DType::kF32;  // safetensors: unquantized tensors and MLX scales/biases (F32, F16, BF16)
  uint64_t max_shard_bytes = 4ull << 30;  // safetensors: 0 = one file
  std::string model_name;  // general.name; default: the output's base name
  // Progress and notices (one line each); may be empty.
  std::function<void(const std::string&)> log;
};

// What a conversion wrote, for the caller's summary line.
struct ConvertReport {
  uint64_t n_tensors = 0;
  uint64_t bytes_in = 0;   // stored bytes of the source tensors
  uint64_t bytes_out = 0;  // tensor bytes written
};

// Converts `in` to `out_path` (a .gguf file, or a directory for safetensors that must not exist or
// be empty). `tokenizer` is the model's tokenizer (written into the output); nullptr writes none.
Result<ConvertReport> convert_model(const ModelFiles& in, const Tokenizer* tokenizer, const std::string& out_path,
                                    const ConvertOptions& options);

}  // namespace splash
