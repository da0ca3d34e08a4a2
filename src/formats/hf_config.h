// Hugging Face `config.json` (+ `generation_config.json`) -> ModelConfig.
//
// Supported `architectures` entries and the registry key they map to:
//   LlamaForCausalLM -> "llama"; Qwen2ForCausalLM -> "qwen2" (attention_bias);
//   Qwen3ForCausalLM -> "qwen3" (qk_norm, explicit head_dim); Qwen3MoeForCausalLM -> "qwen3_moe";
//   Qwen3NextForCausalLM -> "qwen3_next"; Qwen3_5ForCausalLM / Qwen3_5ForConditionalGeneration /
//   Qwen3_5MoeForCausalLM / Qwen3_5MoeForConditionalGeneration -> "qwen3_5" (MoE when n_expert > 0).
// Multimodal configs nest the language model under `text_config`; its keys win over top-level ones.
// Hybrid layer schedules come from `layer_types` or, failing that, `full_attention_interval`
// (layer il is full attention iff (il + 1) % interval == 0).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "formats/model_config.h"

namespace splash {

// Parses config.json text; `generation_json` (generation_config.json text) is optional. The source
// names appear in error messages.
Result<ModelConfig> parse_hf_config(std::string_view config_json, const std::string& config_source,
                                    std::optional<std::string_view> generation_json = std::nullopt,
                                    const std::string& generation_source = "generation_config.json");

// Reads `<dir>/config.json` and, when present, `<dir>/generation_config.json`.
Result<ModelConfig> load_hf_config(const std::string& dir);

// The architecture names accepted above, comma-separated (for messages).
std::string hf_supported_architectures();

}  // namespace splash
