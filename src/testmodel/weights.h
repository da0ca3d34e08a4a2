// The tensors of a test model and their deterministic values. A value depends only on
// (seed, Hugging Face tensor name, element index), so any row range of any tensor can be generated
// on its own, in any order, by any writer, and every format gets bit-identical f32 weights.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "testmodel/test_model.h"

namespace splash::testmodel {

enum class TensorKind : uint8_t {
  kMatrix,
  kNorm,      // values around 1
  kBias,      // values around 0 (also A_log, dt_bias)
  kNormZero,  // zero-centred norm weight w (the model multiplies by 1 + w): values around 0
  kConv,      // depthwise conv weight [channels, 1, kernel], never quantized
};

// How the GGUF writer changes a tensor's values the way llama.cpp's converter does.
enum class GgufTransform : uint8_t {
  kNone,
  kPlusOne,  // zero-centred norms are stored as 1 + w
  kNegExp,   // A_log is stored as A = -exp(A_log)
};

struct TensorPlan {
  std::string hf_name;           // "model.layers.0.self_attn.q_proj.weight"
  std::vector<uint64_t> shape;   // row-major: [rows, cols] for matrices, [n] for norms and biases
  TensorKind kind = TensorKind::kMatrix;
  float scale = 0.0f;            // matrices/biases: standard deviation; norms: spread around 1
  // For q/k projections of llama-family GGUF files: heads whose rows are permuted for interleaved
  // RoPE (0 = no permutation).
  uint32_t rope_heads = 0;
  // GGUF only: a name other than hf_to_gguf_name's, a value transform, and row / column
  // permutations (GGUF row i = HF row gguf_row_perm[i]; empty = identity) for the value-head
  // tiling of qwen35 files; a row list shorter than the tensor writes those rows only (the GGUF
  // parts of a fused tensor, write_gguf.cpp).
  std::string gguf_name;
  GgufTransform gguf_transform = GgufTransform::kNone;
  std::vector<uint32_t> gguf_row_perm;
  std::vector<uint32_t> gguf_col_perm;
  uint32_t mlx_bits = 0;  // MLX: this tensor's bits when they differ from the spec's (mixed bits)

  // Mixture of experts: GGUF stores routers in F32 whatever the file type (as llama.cpp does) and
  // the shared-expert gate as a vector; a stacked [n_expert, rows, cols] expert tensor
  // (`mlp.switch_mlp.*`) is written as one tensor per expert (`mlp.experts.<e>.*`) in plain
  // safetensors, with the same values.
  bool gguf_f32 = false;
  bool gguf_flat = false;
  bool stacked_experts = false;

  uint64_t n_elems() const;
  uint64_t rows() const { return n_elems() / cols(); }
  uint64_t cols() const { return shape.back(); }
};

// The MoE feed-forward tensors of layer il (router, experts, shared expert), appended to `out`.
void plan_moe_mlp(const TestModelSpec& spec, uint32_t il, std::vector<TensorPlan>& out);
// The same under another layer prefix ("mtp.layers.0." for an MTP head's layer).
void plan_moe_mlp(const TestModelSpec& spec, const std::string& layer_prefix, std::vector<TensorPlan>& out);
// "model.layers.3.mlp.switch_mlp.up_proj.weight", 5 -> "model.layers.3.mlp.experts.5.up_proj.weight"
std::string expert_tensor_name(const std::string& stacked_name, uint64_t expert);

// Every tensor of the model in HF order (embeddings, layers, final norm, lm_head unless tied).
std::vector<TensorPlan> plan_tensors(const TestModelSpec& spec, uint32_t n_vocab);

// Fills `out` with elements [first, first + out.size()) of the tensor, row-major, HF layout.
void generate_values(const TensorPlan& t, uint64_t seed, uint64_t first, std::span<float> out);

}  // namespace splash::testmodel
