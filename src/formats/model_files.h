// A model as the user hands it to us: a GGUF file, a Hugging Face / MLX safetensors directory, or a
// llama2.c checkpoint. ModelFiles opens any of them behind one interface: the ModelConfig, every
// tensor under its Hugging Face name with a row-major shape, what the tokenizer and chat template
// are, and a way to read any tensor as f32 in the Hugging Face layout (used by the converter and the
// tests; the engine packs weights straight from the mapped bytes instead).
//
// Ownership: ModelFiles owns the mappings; ModelTensor::data views stay valid while it lives.
// Immutable after open(); safe to read from many threads.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "formats/model_config.h"

namespace splash {

namespace gguf {
class GgufFile;
}
class SafeTensorsModel;

enum class ModelFormat : uint8_t { kGguf, kSafetensors, kMlx, kLlama2c };
std::string_view model_format_name(ModelFormat f);  // "GGUF", "safetensors", "MLX safetensors", "llama2.c"

// MLX affine quantization of one weight: `data` of the tensor holds the packed codes.
struct MlxQuantView {
  int bits = 0;
  int group_size = 0;
  DType scale_dtype = DType::kF16;     // scales and biases share it
  std::span<const uint8_t> scales;     // [rows, cols / group_size]
  std::span<const uint8_t> biases;     // [rows, cols / group_size]
};

struct ModelTensor {
  std::string name;         // Hugging Face name: "model.layers.0.self_attn.q_proj.weight"
  std::string stored_name;  // the name inside the file ("blk.0.attn_q.weight" in GGUF)
  DType dtype = DType::kF32;  // storage type; U32 for MLX packed codes
  std::vector<uint64_t> shape;  // logical row-major shape of the values: [rows, cols] for a matrix
  std::span<const uint8_t> data;  // the stored bytes, inside the mapping
  std::optional<MlxQuantView> mlx;
  // q/k projection rows stored for interleaved RoPE (GGUF llama, llama2.c) instead of rotate-half.
  bool rope_interleaved = false;

  uint64_t n_elems() const;
  uint64_t n_bytes() const;  // stored bytes including MLX scales and biases
};

struct TokenizerInfo {
  std::string kind;            // "tokenizer.json", "gguf:llama", "gguf:gpt2", "llama2.c", "" (none)
  std::string path;            // tokenizer.json / tokenizer.bin path; the model file for GGUF
  uint32_t n_vocab = 0;        // entries in the tokenizer's vocabulary (0 when unknown)
  std::string chat_template;   // empty when the model ships none
};

struct ModelFilesOptions {
  // llama2.c checkpoints keep the tokenizer in a separate tokenizer.bin; default: tokenizer.bin
  // beside the checkpoint.
  std::string tokenizer_path;
};

class ModelFiles {
 public:
  ModelFiles();
  ~ModelFiles();
  ModelFiles(ModelFiles&&) noexcept;
  ModelFiles& operator=(ModelFiles&&) noexcept;

  // `path`: a .gguf file, a .bin llama2.c checkpoint, or a directory with config.json and
  // safetensors (MLX when config.json has a quantization block).
  static Result<ModelFiles> open(const std::string& path, const ModelFilesOptions& options = {});

  ModelFormat format() const { return format_; }
  const std::string& path() const { return path_; }
  const ModelConfig& config() const { return config_; }
  const std::vector<ModelTensor>& tensors() const { return tensors_; }
  const ModelTensor* find(std::string_view hf_name) const;
  const TokenizerInfo& tokenizer() const { return tokenizer_; }
  // The GGUF file behind a GGUF model (nullptr otherwise): tokenizer metadata lives there.
  const gguf::GgufFile* gguf() const;

  // Whether the zero-centred RMSNorm gains (qwen3_next, qwen3_5) are stored as 1 + w (mlx-lm and
  // llama.cpp conversions) rather than w (Hugging Face originals): decided once at open from the
  // file's layout by zero_centred_gains_stored_shifted() (formats/norm_gains.h).
  bool zero_centred_gains_shifted() const { return zero_centred_gains_shifted_; }

  // The tensor's values as f32, row-major, q/k rows in the rotate-half (HF) layout.
  Result<std::vector<float>> read_f32(const ModelTensor& t) const;

  struct Storage;  // the open files behind the views (defined in model_files.cpp)

 private:
  void index_tensors();  // fills by_name_ and the layout facts once tensors_ is complete

  std::unique_ptr<Storage> storage_;
  ModelFormat format_ = ModelFormat::kGguf;
  std::string path_;
  ModelConfig config_;
  std::vector<ModelTensor> tensors_;
  // name -> index in tensors_: MoE checkpoints hold one tensor per expert (18K+ for a 30B-A3B),
  // and a linear find() per load made loading quadratic.
  std::unordered_map<std::string, size_t> by_name_;
  TokenizerInfo tokenizer_;
  bool zero_centred_gains_shifted_ = false;
};

}  // namespace splash
