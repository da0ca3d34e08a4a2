// qwen2 (Qwen2 / Qwen2.5 dense): llama plus biases on the q/k/v projections.
#include "model/architecture.h"
#include "model/blocks/attention_block.h"
#include "model/blocks/mlp_block.h"

namespace splash {

namespace {

Status check(const ModelConfig& c) { return check_dense_decoder_config(c, "qwen2"); }

Result<LayerWeights> load(const WeightLoader& loader, int il) {
  LayerWeights w;
  SPLASH_TRY(w.attn, load_attention(loader, il, {.bias = true, .qk_norm = false}));
  SPLASH_TRY(w.mlp, load_swiglu_mlp(loader, il));
  return w;
}

void forward(const LayerWeights& w, LayerContext& ctx) {
  attention_block(w.attn, ctx);
  swiglu_mlp_block(w.mlp, ctx);
}

}  // namespace

extern const Architecture kArchitecture_qwen2{"qwen2", check, load, forward};

}  // namespace splash
