// ModelConfig -> Hugging Face config.json / generation_config.json, the inverse of
// formats/hf_config.h for the architectures `splash convert` writes.
#pragma once

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "formats/model_config.h"

namespace splash {

// Errors for architectures the converter cannot describe yet (MoE and hybrid models).
Result<nlohmann::json> hf_config_json(const ModelConfig& config);
// {} when the config carries no generation defaults or special ids.
nlohmann::json hf_generation_config_json(const ModelConfig& config);

}  // namespace splash
