// qwen3_moe (Qwen3-30B-A3B, Qwen3-235B-A22B): qwen3's attention (q/k norms, explicit head_dim) and
// a mixture-of-experts feed-forward block (blocks/moe_block.h) on the layers the config marks as
// sparse (decoder_sparse_step, mlp_only_layers), a dense SwiGLU MLP on the others. A shared expert
// is used when the config gives shared_expert_intermediate_size (Qwen3 itself has none).
#include "model/architecture.h"
#include "model/blocks/attention_block.h"
#include "model/blocks/mlp_block.h"
#include "model/blocks/moe_block.h"

namespace splash {

namespace {

bool is_moe_layer(const ModelConfig& c, int il) { return c.moe_layer.empty() || c.moe_layer[il]; }

Status check(const ModelConfig& c) { return check_moe_decoder_config(c, "qwen3_moe"); }

Result<LayerWeights> load(const WeightLoader& loader, int il) {
  LayerWeights w;
  SPLASH_TRY(w.attn, load_attention(loader, il, {.bias = loader.config().attention_bias, .qk_norm = true}));
  if (is_moe_layer(loader.config(), il)) {
    SPLASH_TRY(w.moe, load_moe(loader, il));
  } else {
    SPLASH_TRY(w.mlp, load_swiglu_mlp(loader, il));
  }
  return w;
}

void forward(const LayerWeights& w, LayerContext& ctx) {
  attention_block(w.attn, ctx);
  if (w.moe)
    moe_block(*w.moe, ctx);
  else
    swiglu_mlp_block(w.mlp, ctx);
}

}  // namespace

extern const Architecture kArchitecture_qwen3_moe{"qwen3_moe", check, load, forward};

}  // namespace splash
