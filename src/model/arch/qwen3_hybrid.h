// What qwen3_next (Qwen3-Next) and qwen3_5 (Qwen3.5) share: the hybrid layer schedule
// (config.layer_kinds: Gated DeltaNet layers, gated full-attention layers every
// full_attention_interval-th), zero-centred RMSNorms (1 + w, folded at load), gated attention
// with q/k norms and partial RoPE, and a SwiGLU MLP after every mixer. The two differ in the
// Gated DeltaNet projections' storage (blocks/gated_deltanet_block.h reads both) and in GGUF
// value-head order.
#pragma once

#include "model/architecture.h"

namespace splash::qwen3_hybrid {

Status check(const ModelConfig& c, std::string_view name);
Result<LayerWeights> load(const WeightLoader& loader, int il);
void forward(const LayerWeights& w, LayerContext& ctx);

}  // namespace splash::qwen3_hybrid
