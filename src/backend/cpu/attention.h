// Causal multi-head attention with grouped KV heads (GQA) over a paged KV cache
// (attention_kv.h). One entry point serves both regimes:
//   prefill: a chunk of n_q new queries whose K/V were already appended to the cache; each query
//            attends to the cached prefix and to the chunk up to itself.
//   decode:  n_q = 1 (or a few speculative rows) over a long cached context.
// Flash-attention style: tiles of (queries x the g = n_head / n_kv_head heads of one KV group) meet
// key tiles of one page (32 positions) dequantized once into f32; an online softmax keeps a running
// max and sum per row, so the [n_q, n_kv] score matrix never exists. Work items are
// (KV head, query tile, KV split); long contexts with few query tiles are split over the KV length
// and the partial results combined (split-K), so every thread of the pool stays busy in decode.
//
// Thread-safety: reads q and the pages, writes out; runs on the given pool. Concurrent calls on the
// same pool are serialized by the pool.
#pragma once

#include <cstdint>

#include "backend/cpu/attention_kv.h"
#include "backend/cpu/cpu_features.h"
#include "core/thread_pool.h"

namespace splash {

struct AttentionParams {
  int n_head = 0;      // query heads; a multiple of n_kv_head
  int n_kv_head = 0;   // must equal the view's geometry
  int head_dim = 0;    // must equal the view's geometry
  float scale = 0.0f;  // score scale; 0 = 1 / sqrt(head_dim)
  IsaLevel level = IsaLevel::kAvx512;  // clamped to the CPU; lower it to force a kernel tier
};

// q: [n_q, n_head, head_dim] f32; out: [n_q, n_head, head_dim] f32 (must not overlap q).
// Query t sits at position q_pos0 + t and sees keys [0, q_pos0 + t]; requires
// q_pos0 + n_q <= kv.n_tokens (the chunk's own K/V are already in the cache). Shapes that disagree
// with the view are caller bugs (CHECK).
void attention(const float* q, int64_t n_q, int64_t q_pos0, const PagedKvView& kv, const AttentionParams& p,
               float* out, ThreadPool& pool);

// The naive reference the kernels are tested against: fp32, the full softmax row materialized,
// double accumulation. k, v: [n_kv, n_kv_head, head_dim] dense f32. Same masking as attention().
void attention_reference(const float* q, int64_t n_q, int64_t q_pos0, const float* k, const float* v,
                         int64_t n_kv, const AttentionParams& p, float* out);

}  // namespace splash
