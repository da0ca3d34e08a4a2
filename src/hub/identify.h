// Identification before download (spec 8.2): the model's own metadata only (config.json, or the
// GGUF header fetched with range requests), never the repository's name. Refuses architectures the
// model registry does not run, configs its check rejects, MLX quantizations and GGUF tensor types the
// weight loader cannot pack, and models without a tokenizer, each with one message.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "formats/model_config.h"

namespace splash::hub {

// Tensor types the weight loader packs (backend/cpu pack_weights); tests/unit/hub checks the list
// against it so the two cannot drift.
const std::vector<DType>& loadable_tensor_types();
// "F32, F16, ..." for messages.
std::string loadable_tensor_type_names();
// ggml's name for a tensor type id, also for ids Splash has no DType for ("IQ2_XXS"); "type 99" else.
std::string ggml_type_name(uint32_t type_id);

// The architecture is in the registry and its check_config accepts the config.
Status check_model_config(const ModelConfig& config);

// --- GGUF header
struct GgufTensorType {
  std::string name;
  uint32_t type_id = 0;
};
struct GgufHeaderScan {
  bool complete = false;     // the prefix held the whole header (metadata and tensor infos)
  uint64_t bytes_needed = 0; // !complete: fetch at least this many bytes from the start next
  uint64_t metadata_end = 0; // offset just past the last metadata value
  std::vector<GgufTensorType> tensors;
};
// Walks the header in `prefix` (the first bytes of a file of `file_size` bytes) without needing the
// tensor data. Errors: not GGUF, an unsupported version, counts or lengths that cannot fit the file.
Result<GgufHeaderScan> scan_gguf_header(std::span<const uint8_t> prefix, uint64_t file_size,
                                        const std::string& source);
// ModelConfig and tokenizer presence from a complete scan's prefix, then every check above: the
// architecture, the config, and one error listing every tensor type the loader cannot pack.
Result<ModelConfig> identify_gguf(std::span<const uint8_t> prefix, const GgufHeaderScan& scan,
                                  const std::string& source);

// --- config.json (MLX / safetensors repositories)
// Parses config.json, checks the architecture and config, and screens the MLX quantization block:
// the loader packs affine 4 and 8 bits with groups of 32, 64 or 128 (the message names the module).
Result<ModelConfig> identify_hf_config(std::string_view config_json, const std::string& source);

}  // namespace splash::hub
