// ModelConfig from GGUF metadata (llama.cpp's `{arch}.*` keys) and, in reverse, the metadata a
// GGUF writer needs for a ModelConfig. Architecture names are translated between llama.cpp's
// spelling ("qwen3moe") and ours ("qwen3_moe").
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"
#include "formats/gguf.h"
#include "formats/model_config.h"

namespace splash {

// Reads `general.architecture` and the architecture's hyper-parameters. Unknown architectures and
// missing required keys give an error naming the file and the key.
Result<ModelConfig> model_config_from_gguf(const gguf::GgufFile& file);

// The `{arch}.*` and `general.architecture` metadata for `config`, in writing order.
Result<std::vector<std::pair<std::string, gguf::Value>>> gguf_metadata_for(const ModelConfig& config);

// llama.cpp's `{arch}.rope.dimension_sections` for a GGUF architecture whose loader requires it
// (qwen35, qwen35moe): `sections` padded to 4 entries, or Qwen3.5's [11, 11, 10, 0] when empty (what
// llama.cpp's converter writes for a config without mrope_section). nullopt for other architectures.
std::optional<gguf::Value> gguf_rope_sections(const std::string& gguf_arch, const std::vector<uint32_t>& sections);

// "qwen3_moe" -> "qwen3moe" (a MoE variant's own name when `moe`: "qwen3_5" -> "qwen35moe") and
// back; an error for names outside the supported set.
Result<std::string> gguf_arch_name(const std::string& architecture, bool moe);
Result<std::string> architecture_from_gguf_arch(const std::string& gguf_arch, const std::string& source);

}  // namespace splash
