#include "model/arch/qwen3_hybrid.h"

#include "model/blocks/attention_block.h"
#include "model/blocks/gated_deltanet_block.h"
#include "model/blocks/mlp_block.h"
#include "model/blocks/moe_block.h"

namespace splash::qwen3_hybrid {

namespace {

// MoE variants (Qwen3-Next, Qwen3.5-MoE): every layer's MLP is sparse unless config.moe_layer
// (decoder_sparse_step / mlp_only_layers, or a GGUF layer without ffn_gate_inp) says otherwise.
bool is_moe_layer(const ModelConfig& c, int il) {
  return c.n_expert > 0 && (c.moe_layer.empty() || c.moe_layer[static_cast<size_t>(il)]);
}

}  // namespace

Status check(const ModelConfig& c, std::string_view name) {
  auto positive = [&](uint32_t v, const char* field) -> Status {
    if (v == 0) return make_error(name, ": config field ", field, " is 0");
    return {};
  };
  SPLASH_TRY_STATUS(positive(c.n_vocab, "n_vocab (vocab_size)"));
  SPLASH_TRY_STATUS(positive(c.n_embd, "n_embd (hidden_size)"));
  SPLASH_TRY_STATUS(positive(c.n_layer, "n_layer (num_hidden_layers)"));
  SPLASH_TRY_STATUS(positive(c.n_head, "n_head (num_attention_heads)"));
  SPLASH_TRY_STATUS(positive(c.n_head_kv, "n_head_kv (num_key_value_heads)"));
  SPLASH_TRY_STATUS(positive(c.head_dim, "head_dim"));
  SPLASH_TRY_STATUS(positive(c.linear_n_key_heads, "linear_num_key_heads"));
  SPLASH_TRY_STATUS(positive(c.linear_key_head_dim, "linear_key_head_dim"));
  SPLASH_TRY_STATUS(positive(c.linear_n_value_heads, "linear_num_value_heads"));
  SPLASH_TRY_STATUS(positive(c.linear_value_head_dim, "linear_value_head_dim"));
  SPLASH_TRY_STATUS(positive(c.linear_conv_kernel, "linear_conv_kernel_dim"));
  bool any_dense = c.n_expert == 0;
  if (c.n_expert > 0) {
    if (c.n_expert_used == 0 || c.n_expert_used > c.n_expert)
      return make_error(name, ": num_experts_per_tok ", c.n_expert_used, " must be in [1, num_experts = ", c.n_expert,
                        "]");
    SPLASH_TRY_STATUS(positive(c.n_ff_expert, "n_ff_expert (moe_intermediate_size)"));
    if (!c.moe_layer.empty() && c.moe_layer.size() != c.n_layer)
      return make_error(name, ": ", c.moe_layer.size(), " MoE layer flags for ", c.n_layer, " layers");
    for (uint32_t il = 0; il < c.n_layer; ++il) any_dense |= !is_moe_layer(c, static_cast<int>(il));
  }
  // The MoE variants have no dense MLP (intermediate_size may be absent) unless a layer is dense.
  if (any_dense) SPLASH_TRY_STATUS(positive(c.n_ff, "n_ff (intermediate_size)"));
  if (c.n_head % c.n_head_kv != 0)
    return make_error(name, ": num_attention_heads ", c.n_head, " is not a multiple of num_key_value_heads ",
                      c.n_head_kv);
  if (c.head_dim % 2 != 0) return make_error(name, ": head_dim ", c.head_dim, " is odd (RoPE rotates pairs)");
  if (c.linear_n_value_heads % c.linear_n_key_heads != 0)
    return make_error(name, ": linear_num_value_heads ", c.linear_n_value_heads,
                      " is not a multiple of linear_num_key_heads ", c.linear_n_key_heads);
  if (c.linear_key_head_dim > 1024 || c.linear_value_head_dim > 1024)
    return make_error(name, ": linear key/value head dims above 1024 are not supported");
  if (c.layer_kinds.size() != c.n_layer)
    return make_error(name, ": ", c.layer_kinds.size(), " layer types for ", c.n_layer, " layers");
  bool any_full = false;
  for (LayerKind k : c.layer_kinds) any_full |= k == LayerKind::kFullAttention;
  if (!any_full) return make_error(name, ": no full-attention layer (layer_types / full_attention_interval)");
  if (!(c.rms_eps > 0.0f)) return make_error(name, ": rms_norm_eps ", c.rms_eps, " must be > 0");
  return {};
}

Result<LayerWeights> load(const WeightLoader& loader, int il) {
  const ModelConfig& c = loader.config();
  LayerWeights w;
  if (c.layer_kinds[static_cast<size_t>(il)] == LayerKind::kLinearAttention) {
    SPLASH_TRY(GatedDeltaNetWeights g, load_gated_deltanet(loader, il));
    w.gdn = std::make_unique<GatedDeltaNetWeights>(std::move(g));
  } else {
    SPLASH_TRY(w.attn, load_attention(loader, il, {.qk_norm = true, .output_gate = c.attn_output_gate}));
    fold_zero_centred_norm(loader, w.attn.norm);
    fold_zero_centred_norm(loader, w.attn.q_norm);
    fold_zero_centred_norm(loader, w.attn.k_norm);
  }
  if (is_moe_layer(c, il)) {
    SPLASH_TRY(w.moe, load_moe(loader, il));
    fold_zero_centred_norm(loader, w.moe->norm);
  } else {
    SPLASH_TRY(w.mlp, load_swiglu_mlp(loader, il));
    fold_zero_centred_norm(loader, w.mlp.norm);
  }
  return w;
}

void forward(const LayerWeights& w, LayerContext& ctx) {
  if (w.gdn)
    gated_deltanet_block(*w.gdn, ctx);
  else
    attention_block(w.attn, ctx);
  if (w.moe)
    moe_block(*w.moe, ctx);
  else
    swiglu_mlp_block(w.mlp, ctx);
}

}  // namespace splash::qwen3_hybrid
