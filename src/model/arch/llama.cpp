// llama (Meta LLaMA 1/2/3, TinyLlama, stories15M): pre-norm RMSNorm, RoPE, GQA attention without
// biases, SwiGLU MLP.
#include "model/architecture.h"
#include "model/blocks/attention_block.h"
#include "model/blocks/mlp_block.h"

namespace splash {

namespace {

Status check(const ModelConfig& c) {
  SPLASH_TRY_STATUS(check_dense_decoder_config(c, "llama"));
  if (c.qk_norm) return make_error("llama: config has qk_norm set; llama has no q/k norms (is it qwen3?)");
  return {};
}

Result<LayerWeights> load(const WeightLoader& loader, int il) {
  LayerWeights w;
  // Some llama derivatives carry q/k/v biases (attention_bias in config.json).
  SPLASH_TRY(w.attn, load_attention(loader, il, {.bias = loader.config().attention_bias, .qk_norm = false}));
  SPLASH_TRY(w.mlp, load_swiglu_mlp(loader, il));
  return w;
}

void forward(const LayerWeights& w, LayerContext& ctx) {
  attention_block(w.attn, ctx);
  swiglu_mlp_block(w.mlp, ctx);
}

}  // namespace

extern const Architecture kArchitecture_llama{"llama", check, load, forward};

}  // namespace splash
