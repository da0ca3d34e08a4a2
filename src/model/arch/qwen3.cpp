// qwen3 (Qwen3 dense): no q/k/v biases, per-head RMSNorm on q and k before RoPE, and an explicit
// head_dim (n_head * head_dim may differ from n_embd).
#include "model/architecture.h"
#include "model/blocks/attention_block.h"
#include "model/blocks/mlp_block.h"

namespace splash {

namespace {

Status check(const ModelConfig& c) { return check_dense_decoder_config(c, "qwen3"); }

Result<LayerWeights> load(const WeightLoader& loader, int il) {
  LayerWeights w;
  SPLASH_TRY(w.attn, load_attention(loader, il, {.bias = loader.config().attention_bias, .qk_norm = true}));
  SPLASH_TRY(w.mlp, load_swiglu_mlp(loader, il));
  return w;
}

void forward(const LayerWeights& w, LayerContext& ctx) {
  attention_block(w.attn, ctx);
  swiglu_mlp_block(w.mlp, ctx);
}

}  // namespace

extern const Architecture kArchitecture_qwen3{"qwen3", check, load, forward};

}  // namespace splash
