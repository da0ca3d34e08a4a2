// The architecture registry. An architecture file (arch/<name>.cpp) defines one Architecture:
// which config it accepts, how it loads a layer's tensors, and the layer's forward built from the
// shared blocks (blocks/). registry.cpp lists them; adding one is that file plus one registry line
// (docs/ADDING_A_MODEL.md).
#pragma once

#include <string_view>
#include <vector>

#include "core/result.h"
#include "formats/architecture_facts.h"
#include "formats/model_config.h"
#include "model/layer_context.h"
#include "model/weights.h"

namespace splash {

struct Architecture {
  std::string_view name;  // ModelConfig::architecture
  // Rejects configs this architecture cannot run; the message names the field.
  Status (*check_config)(const ModelConfig& config) = nullptr;
  // Loads layer il's tensors.
  Result<LayerWeights> (*load_layer)(const WeightLoader& loader, int il) = nullptr;
  // One layer over every row of the pass: updates ctx.x in place.
  void (*layer_forward)(const LayerWeights& layer, LayerContext& ctx) = nullptr;
  // What the file formats know of it (names, config defaults, quirks, tensor layouts) is its
  // ArchitectureFacts entry (formats/architecture_facts.cpp), looked up by `name`.
};

// Adds 1 to a zero-centred norm weight unless the file holds 1 + w already (mlx-lm and llama.cpp
// conversions: ModelFiles::zero_centred_gains_shifted()).
void fold_zero_centred_norm(const WeightLoader& loader, std::vector<float>& w);

// nullptr for an unknown name.
const Architecture* find_architecture(std::string_view name);
std::vector<std::string_view> architecture_names();

// Checks shared by the dense decoder architectures: positive sizes, GQA divisibility, even
// head_dim, no MoE or linear-attention layers. `name` goes into the message.
Status check_dense_decoder_config(const ModelConfig& c, std::string_view name);
// The same for mixture-of-experts decoders (qwen3_moe): experts required, top-k within range, an
// intermediate size for the experts, and for the dense MLP layers when there are any.
Status check_moe_decoder_config(const ModelConfig& c, std::string_view name);

}  // namespace splash
