// Model weights as the kernels take them, built once at load from ModelFiles and never changed
// afterwards. Matrices are PackedWeights (zero-copy views of the mapping for float types, owned
// repacks for Q4_0 / Q8_0 / K-quants at AVX2 and above, for MLX and for fused projections);
// norms and biases are f32 copies.
//
// WeightLoader is what architecture files use to fetch their tensors by Hugging Face name with the
// shape they expect; every error names the model file, the tensor and what was wrong.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cpu/matmul.h"
#include "backend/cpu/rope.h"
#include "core/result.h"
#include "formats/model_files.h"

namespace splash {

// A matrix y = x W^T (+ bias), possibly several logical matrices fused along the rows.
struct Projection {
  PackedWeights w;             // [rows, cols]
  std::vector<float> bias;     // [rows], empty when the projection has none
};

struct AttentionWeights {
  std::vector<float> norm;     // [n_embd] input_layernorm
  // Fused: qkv holds one Projection [q_dim + 2 kv_dim, n_embd]. Separate: three, q [q_dim, n_embd],
  // k [kv_dim, n_embd], v [kv_dim, n_embd].
  std::vector<Projection> qkv;
  std::vector<float> q_norm;   // [head_dim] (qwen3), empty otherwise
  std::vector<float> k_norm;   // [head_dim] (qwen3), empty otherwise
  Projection o;                // [n_embd, q_dim]
  // Gated attention (qwen3_next / qwen3_5): q_proj has 2 head_dim rows per head, [q | gate], and
  // the attention output is multiplied by sigmoid(gate) before o.
  bool output_gate = false;
};

// A Gated DeltaNet (linear attention) layer of the hybrid models (blocks/gated_deltanet_block.h).
// nk/dk: key heads and their dim, nv/dv: value heads and theirs; conv_dim = 2 nk dk + nv dv.
struct GatedDeltaNetWeights {
  std::vector<float> norm;     // [n_embd] input_layernorm (zero-centred weight: 1 + w folded at load)
  // Input projections, rows in the file's order. Split layout (qwen3_5): qkv [conv_dim], z [nv dv],
  // b [nv], a [nv]; grouped layout (qwen3_next in_proj_qkvz / in_proj_ba): per key head
  // [q k v z] then per key head [b a]. Fused into one Projection when the storage types agree.
  std::vector<Projection> in;
  bool grouped = false;
  // Split q/k/v and z with b/a still grouped per key head ([b_g a_g], one in_proj_ba): llama.cpp's
  // current qwen3next GGUF layout.
  bool ba_grouped = false;
  // Value head h reads key head h % nk (GGUF qwen35: value heads tiled) instead of h / (nv / nk).
  bool v_heads_tiled = false;
  std::vector<float> conv;     // [conv_dim, kernel] depthwise conv weight
  std::vector<float> a;        // [nv] A = -exp(A_log)
  std::vector<float> dt_bias;  // [nv]
  std::vector<float> out_norm; // [dv] gated RMSNorm weight (plain, not zero-centred)
  Projection out;              // [n_embd, nv dv]
  // Output gate sigmoid(z) (qwen4_exp's output_gate_type "sigmoid") instead of silu(z).
  bool output_gate_sigmoid = false;
};

struct MlpWeights {
  std::vector<float> norm;     // [n_embd] post_attention_layernorm
  // Fused: one Projection [2 n_ff, n_embd] (gate rows, then up rows). Separate: gate, up [n_ff, n_embd].
  std::vector<Projection> gate_up;
  Projection down;             // [n_embd, n_ff]
};

// A mixture-of-experts feed-forward block (blocks/moe_block.h). Expert matrices are per-expert
// views: for stacked [n_expert, rows, cols] file tensors each one addresses its expert's slice of
// the mapping (zero-copy where the kernels read the file's layout, a per-expert repack otherwise).
struct MoeWeights {
  std::vector<float> norm;          // [n_embd] post_attention_layernorm
  PackedWeights router;             // [n_expert, n_embd] f32: a view of the file or of router_f32
  std::vector<float> router_f32;    // [n_expert, n_embd] dequantized router when the file's is not f32
  std::vector<PackedWeights> gate;  // [n_expert] x [n_ff_expert, n_embd]
  std::vector<PackedWeights> up;    // [n_expert] x [n_ff_expert, n_embd]
  std::vector<PackedWeights> down;  // [n_expert] x [n_embd, n_ff_expert]
  // Shared expert (n_ff_shared_expert > 0): always applied, scaled by sigmoid(shared_gate . h)
  // when shared_gate is present. gate_up fused like the dense MLP's; norm unused.
  MlpWeights shared;
  std::vector<float> shared_gate;   // [n_embd] shared_expert_gate; empty = no gate
};

struct LayerWeights {
  AttentionWeights attn;
  MlpWeights mlp;
  std::unique_ptr<MoeWeights> moe;  // MoE layers only (then mlp is empty)
  std::unique_ptr<GatedDeltaNetWeights> gdn;  // linear-attention layers only (then attn is empty)
};

struct ModelWeights {
  PackedWeights embed;          // [n_vocab, n_embd]
  std::vector<float> out_norm;  // [n_embd]
  PackedWeights output;         // [n_vocab, n_embd]; empty (rows() == 0) when tied to embed
  std::vector<LayerWeights> layers;
  RopeTable rope;               // positions [0, max_context)

  const PackedWeights& output_matrix() const { return output.rows() > 0 ? output : embed; }
};

class WeightLoader {
 public:
  WeightLoader(const ModelFiles& files, IsaLevel isa, bool fuse) : files_(files), isa_(isa), fuse_(fuse) {}
  // `layer_prefix` replaces "model.layers." in layer_name(): "mtp.layers." loads a Qwen3-Next MTP
  // head's decoder layer with the same block loaders (spec/mtp/).
  WeightLoader(const ModelFiles& files, IsaLevel isa, bool fuse, std::string layer_prefix)
      : files_(files), isa_(isa), fuse_(fuse), layer_prefix_(std::move(layer_prefix)) {}

  const ModelFiles& files() const { return files_; }
  const ModelConfig& config() const { return files_.config(); }
  bool fuse() const { return fuse_; }
  // "<layer prefix><il>.<suffix>" ("model.layers.0.mlp.up_proj.weight" by default).
  std::string layer_name(int il, std::string_view suffix) const;

  const ModelTensor* find(std::string_view name) const { return files_.find(name); }
  // The tensor, or an error naming it as missing.
  Result<const ModelTensor*> require(std::string_view name) const;

  // A [rows, cols] matrix packed for matmul.
  Result<PackedWeights> matrix(std::string_view name, int64_t rows, int64_t cols) const;
  // An f32 vector of n values (norm weights, biases), in the file's row layout.
  Result<std::vector<float>> vector(std::string_view name, int64_t n) const;
  // Expert `expert` of a stacked [n_expert, rows, cols] tensor as a [rows, cols] matrix: a view of
  // that expert's slice of the mapping (or a repack of that slice alone); the other experts' bytes
  // are not touched. With n_rows >= 0, only rows [row_begin, row_begin + n_rows) of that expert's
  // [rows, cols] slice (Hugging Face's fused gate_up_proj: gate rows, then up rows).
  Result<PackedWeights> expert_matrix(std::string_view name, int64_t expert, int64_t n_expert, int64_t rows,
                                      int64_t cols, int64_t row_begin = 0, int64_t n_rows = -1) const;

  // Several [rows_i, cols] matrices stacked into one [sum rows_i, cols] projection when fusing is on
  // and they share a storage type (and MLX bits/group); otherwise one Projection each. Biases:
  // names of [rows_i] vectors (all present or all empty strings).
  Result<std::vector<Projection>> projections(const std::vector<std::string>& names, const std::vector<int64_t>& rows,
                                              int64_t cols, const std::vector<std::string>& bias_names) const;

 private:
  Result<const ModelTensor*> checked(std::string_view name, int64_t rows, int64_t cols) const;
  Result<Projection> fused(const std::vector<const ModelTensor*>& parts, const std::vector<int64_t>& rows,
                           int64_t cols) const;

  const ModelFiles& files_;
  IsaLevel isa_;
  bool fuse_;
  std::string layer_prefix_ = "model.layers.";
};

// "model.layers.<il>.<suffix>"
std::string layer_tensor_name(int il, std::string_view suffix);

}  // namespace splash
