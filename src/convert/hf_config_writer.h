// ModelConfig -> Hugging Face config.json / generation_config.json, the inverse of
// formats/hf_config.h for the architectures `splash convert` writes.
#pragma once

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "formats/model_config.h"

namespace splash {

// Errors for architectures the converter cannot describe yet. Qwen3.5 (qwen3_5, and its MoE
// variant) is written as the multimodal class's config with the text model's under text_config.
Result<nlohmann::json> hf_config_json(const ModelConfig& config);
// {} when the config carries no generation defaults or special ids.
nlohmann::json hf_generation_config_json(const ModelConfig& config);

}  // namespace splash
