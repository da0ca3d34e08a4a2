// The Gated DeltaNet (linear attention) block of the hybrid Qwen3-Next / Qwen3.5 layers:
//   h = rms_norm(x); [q k v] z b a = projections(h)
//   q, k, v = silu(causal_conv(q k v))      (depthwise, kernel linear_conv_kernel, state per sequence)
//   q, k = l2norm(q) / sqrt(dk), l2norm(k); beta = sigmoid(b); g = A softplus(a + dt_bias)
//   o = gated delta rule(q, k, v, g, beta)  (state S [nv, dk, dv] per sequence, gated_delta.h)
//   x += out(rms_norm(o) * w_norm * silu(z))  (per value head; sigmoid(z) when output_gate_sigmoid, qwen4_exp)
// Runs of more than kGdnRecurrentMaxRows tokens use the chunked delta rule, shorter ones the
// recurrence (the two agree within rounding).
//
// Per-sequence state of one layer, inside SequenceState::recurrent at ctx.recurrent_offset:
// [K-1, conv_dim] conv window (the last K-1 inputs, time-major), then [nv, dk, dv] delta-rule
// matrices; gdn_state_floats() of them. A fresh sequence's state is all zeros.
#pragma once

#include "model/layer_context.h"
#include "model/weights.h"

namespace splash {

inline constexpr int kGdnChunk = 64;
inline constexpr int64_t kGdnRecurrentMaxRows = 8;

// Floats of one linear-attention layer's state per sequence.
int64_t gdn_state_floats(const ModelConfig& c);

// Loads layer il's linear_attn.* tensors: the split names (in_proj_qkv, in_proj_z, in_proj_b,
// in_proj_a) or the Qwen3-Next grouped ones (in_proj_qkvz, in_proj_ba). GGUF files: ssm_a holds
// A itself and the qwen35 value heads are tiled (`v_heads_tiled`); safetensors hold A_log.
Result<GatedDeltaNetWeights> load_gated_deltanet(const WeightLoader& loader, int il);

void gated_deltanet_block(const GatedDeltaNetWeights& w, LayerContext& ctx);

}  // namespace splash
