// One model configuration type for every source format: HF config.json (+ generation_config.json),
// GGUF metadata and llama2.c headers all fill this struct; the model registry reads only this.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace splash {

enum class LayerKind : uint8_t { kFullAttention, kLinearAttention };

struct RopeScalingConfig {  // not RopeScaling: backend/cpu/rope.h has that enum
  std::string type;  // "" (none), "linear", "yarn", "llama3", ...
  float factor = 1.0f;
  float low_freq_factor = 0.0f;
  float high_freq_factor = 0.0f;
  uint32_t original_max_position = 0;
};

struct ModelConfig {
  std::string architecture;  // registry key: "llama", "qwen2", "qwen3", "qwen3_moe", "qwen3_next", "qwen3_5"
  uint32_t n_vocab = 0;
  uint32_t n_embd = 0;        // hidden size
  uint32_t n_layer = 0;
  uint32_t n_head = 0;        // query heads
  uint32_t n_head_kv = 0;     // key/value heads (GQA)
  uint32_t head_dim = 0;      // n_embd / n_head unless the config says otherwise (qwen3)
  uint32_t n_ff = 0;          // dense MLP intermediate size
  uint32_t max_position = 0;  // the model's own context window (max_position_embeddings)
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  float partial_rotary_factor = 1.0f;  // fraction of head_dim rotated (hybrid models: 0.25)
  RopeScalingConfig rope_scaling;
  // Multimodal RoPE sections (Qwen3.5 `mrope_section`, GGUF rope.dimension_sections): text tokens
  // carry one position in every section, so the rotation is plain RoPE; kept to write it back.
  std::vector<uint32_t> rope_sections;
  bool tie_embeddings = false;   // output projection shares the token embedding
  bool attention_bias = false;   // q/k/v projections carry biases (qwen2)
  bool qk_norm = false;          // per-head RMSNorm on q and k (qwen3)
  bool attn_output_gate = false; // gated full attention (qwen3_next / qwen3_5)

  // Mixture of experts (0 = dense).
  uint32_t n_expert = 0;
  uint32_t n_expert_used = 0;
  uint32_t n_ff_expert = 0;         // moe_intermediate_size
  uint32_t n_ff_shared_expert = 0;  // shared_expert_intermediate_size (0 = none)
  bool norm_topk_prob = true;
  std::vector<bool> moe_layer;      // per layer: MoE block (true) or dense MLP; empty = all MoE when n_expert > 0

  // Hybrid Gated-DeltaNet models. layer_kinds is empty for attention-only models.
  std::vector<LayerKind> layer_kinds;
  uint32_t linear_n_key_heads = 0;
  uint32_t linear_key_head_dim = 0;
  uint32_t linear_n_value_heads = 0;
  uint32_t linear_value_head_dim = 0;
  uint32_t linear_conv_kernel = 0;

  uint32_t n_mtp_layers = 0;  // multi-token-prediction heads shipped with the model

  // Special tokens and generation defaults (generation_config.json / GGUF tokenizer.ggml.*).
  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;
  std::optional<float> default_temperature;
  std::optional<float> default_top_p;
  std::optional<int32_t> default_top_k;
};

}  // namespace splash
