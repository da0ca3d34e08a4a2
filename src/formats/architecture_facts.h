// What each architecture is in the file formats: the names its files carry, the config defaults and
// quirks the readers need, and how each converter (transformers, mlx-lm, llama.cpp) stores its
// tensors. One entry per architecture in architecture_facts.cpp; readers, writers and the test-model
// generator ask these facts instead of testing architecture names, and the model registry
// (model/registry.cpp) pairs every entry with its forward (model/arch/<name>.cpp).
#pragma once

#include <span>
#include <string_view>

namespace splash {

// How mlx-lm marks a folder whose zero-centred norm gains are still raw (w, not 1 + w) when there
// is no conv1d to tell by (formats/norm_gains.cpp).
enum class RawGainMarker : uint8_t {
  kNone,
  kPerExpertTensors,  // qwen3_next: mlx-lm's sanitize() stacks mlp.experts.<e>.* and shifts in the same pass
  kMtpTensors,        // qwen3_5: mlx-lm's sanitize() drops mtp.* and shifts in the same pass
};

struct ArchitectureFacts {
  std::string_view name;  // ModelConfig::architecture, the registry key

  // --- names in the files
  // config.json `architectures` entries read as this architecture; [0] is the one written.
  std::span<const std::string_view> hf_classes;
  std::string_view hf_moe_class;       // written when the config has experts, if the family names its MoE variant
  std::string_view hf_model_type;      // config.json model_type written (the text model's, when nested)
  std::string_view hf_moe_model_type;  // the same for the MoE variant; empty: hf_model_type
  // Released as a multimodal class whose config nests the text model's under `text_config` and
  // whose text weights sit under model.language_model.* (transformers) / language_model.model.*
  // (mlx-lm): the wrapper's class and model_type, dense and MoE. Empty: a plain text model.
  std::string_view hf_wrapper_class, hf_moe_wrapper_class;
  std::string_view hf_wrapper_model_type, hf_moe_wrapper_model_type;
  std::string_view gguf_name;      // general.architecture
  std::string_view gguf_moe_name;  // llama.cpp's separate name for the MoE variant; empty: gguf_name

  // --- config defaults and the model's structure
  bool attention_bias = false;  // q/k/v biases when config.json does not say (qwen2)
  bool qk_norm = false;         // per-head RMSNorm of q and k (not a config key)
  bool explicit_head_dim = false;  // head_dim may differ from hidden_size / heads (config head_dim)
  bool experts_required = false;   // a MoE-only family (qwen3_moe); hybrids take experts optionally
  // Gated DeltaNet hybrid: layer_types / full_attention_interval (default 4), the linear_* sizes
  // and ssm.* GGUF keys, gated full attention by default, partial RoPE (default 0.25 of head_dim),
  // post-attention norm named post_attention_norm in GGUF, an optional MTP head (mtp.*).
  bool hybrid = false;
  float partial_rotary_factor = 1.0f;  // default when config.json does not say
  // RMSNorm gains stored zero-centred (the model scales by 1 + w); mlx-lm and llama.cpp store 1 + w.
  bool zero_centred_norms = false;
  RawGainMarker raw_gain_marker = RawGainMarker::kNone;

  // --- tensor layouts per format
  // Hugging Face / mlx-lm: in_proj_qkvz and in_proj_ba interleaved per key head (Qwen3-Next);
  // otherwise split in_proj_qkv / in_proj_z / in_proj_b / in_proj_a.
  bool hf_fused_qkvz = false;
  // Hugging Face: one tensor per expert (mlp.experts.<e>.*), as Qwen3-Next ships; otherwise the
  // transformers-5 fused gate_up_proj / down_proj stacks (Qwen3.5-MoE) when the family has experts.
  bool hf_per_expert_tensors = false;
  // config.json carries attention_bias and mlp_bias (transformers' LlamaConfig).
  bool hf_bias_keys = false;
  // mlx-lm's ModelArgs requires the MoE keys even when the model has no experts (qwen3_next).
  bool hf_moe_keys_always = false;
  // llama.cpp permutes q/k projection rows for interleaved RoPE (llama); Splash un-permutes at load.
  bool gguf_qk_rope_interleaved = false;
  // llama.cpp tiles the Gated DeltaNet value heads (qwen35 / qwen35moe; qwen3next keeps the grouping).
  bool gguf_v_heads_tiled = false;
  // llama.cpp requires {arch}.rope.dimension_sections (Qwen3.5's multimodal RoPE).
  bool gguf_rope_sections = false;
};

// The facts of `name`; an architecture nothing is known of gets all defaults (no quirks) and an
// empty name.
const ArchitectureFacts& architecture_facts(std::string_view name);
bool is_known_architecture(std::string_view name);
// nullptr when no architecture reads that config.json class / GGUF general.architecture.
const ArchitectureFacts* architecture_facts_for_hf_class(std::string_view hf_class);
const ArchitectureFacts* architecture_facts_for_gguf(std::string_view gguf_arch);
std::span<const ArchitectureFacts> all_architecture_facts();

// The names written for a model of this architecture with or without experts.
std::string_view gguf_arch_name_of(const ArchitectureFacts& a, bool moe);
std::string_view hf_class_of(const ArchitectureFacts& a, bool moe);  // the text model's class

}  // namespace splash
