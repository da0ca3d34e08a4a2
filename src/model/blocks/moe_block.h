// The mixture-of-experts feed-forward block of a pre-norm decoder layer (Qwen3-MoE, Qwen3-Next,
// Qwen3.5-MoE):
//   h = rms_norm(x)
//   p = softmax(router h)                      over all n_expert experts, f32
//   top = the n_expert_used largest p          (ties: the lower expert index)
//   w_e = p_e / sum_{top} p  if norm_topk_prob, else p_e
//   y = sum_{e in top} w_e * down_e(silu(gate_e h) * up_e h)
//     + [shared expert] sigmoid(shared_gate . h) * down_s(silu(gate_s h) * up_s h)
//   x += y
//
// Rows are grouped by expert (a counting sort of the routed (row, expert) slots), so each selected
// expert's matmuls run once over all the rows routed to it, and an expert no row selected is never
// read: a decode step reads only n_expert_used experts' weights per layer. Contributions are added
// to a row in increasing expert order whatever the batch, so a row's result does not depend on the
// other rows of the pass beyond the matmul kernels' own rounding. In passes of at most
// kMoeBatchedMaxRows rows (decode, speculative verification) the selected and shared experts' gate
// and up products run as one task set of the pool and their down products as a second
// (matmul_batch): two waits per layer instead of three per expert; the bits are the same.
//
// Weights (MoeWeights, model/weights.h) come either from stacked [n_expert, rows, cols] tensors
// (GGUF `ffn_*_exps`, MLX `switch_mlp.*`: one view per expert slice) or from one tensor per expert
// (Hugging Face `mlp.experts.<e>.*`).
#pragma once

#include <memory>

#include "model/layer_context.h"
#include "model/weights.h"

namespace splash {

// The longest pass whose experts run batched (matmul_batch takes products of up to 8 rows).
inline constexpr int64_t kMoeBatchedMaxRows = 8;

// Layer il's MoE weights: post_attention_layernorm, mlp.gate (router), the experts, and when
// config.n_ff_shared_expert > 0 mlp.shared_expert.* (+ mlp.shared_expert_gate if present).
Result<std::unique_ptr<MoeWeights>> load_moe(const WeightLoader& loader, int il);

void moe_block(const MoeWeights& w, LayerContext& ctx);

// The routing of one row: softmax over `logits` [n_expert] (in place, becomes the probabilities),
// then the k most probable experts in `expert` [k] (descending probability, ties to the lower
// index) and their weights in `weight` [k], renormalized to sum 1 when `normalize`.
void moe_route(float* logits, int n_expert, int k, bool normalize, int32_t* expert, float* weight);

}  // namespace splash
