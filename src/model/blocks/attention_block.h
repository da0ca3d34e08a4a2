// The attention block of a pre-norm decoder layer: x += o(attention(rope(norm_qk(qkv(rms_norm(x))))))
// over every row of the pass, with each sequence's K/V stored into and read from its KV pages.
// Optional parts follow the weights: q/k/v biases (qwen2), per-head q/k RMSNorm (qwen3), a sigmoid
// output gate (qwen3_next / qwen3_5). The KV pool layer is ctx.kv_layer.
#pragma once

#include "model/layer_context.h"
#include "model/weights.h"

namespace splash {

struct AttentionLoadSpec {
  bool bias = false;     // q/k/v biases
  bool qk_norm = false;  // q_norm / k_norm weights [head_dim]
  bool output_gate = false;  // q_proj holds [q | gate] per head (qwen3_next / qwen3_5)
};

Result<AttentionWeights> load_attention(const WeightLoader& loader, int il, const AttentionLoadSpec& spec);

void attention_block(const AttentionWeights& w, LayerContext& ctx);

}  // namespace splash
