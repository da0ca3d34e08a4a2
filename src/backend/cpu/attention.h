// Causal multi-head attention with grouped KV heads (GQA) over a paged KV cache
// (attention_kv.h). One entry point serves both regimes:
//   prefill: a chunk of n_q new queries whose K/V were already appended to the cache; each query
//            attends to the cached prefix and to the chunk up to itself.
//   decode:  n_q = 1 (or a few speculative rows) over a long cached context.
// Flash-attention style: tiles of (queries x the g = n_head / n_kv_head heads of one KV group, ~32
// rows) meet key tiles of one page (32 positions) converted once into f32 codes; int8 per-token
// scales are folded into the scores (keys) and the probabilities (values) instead of the elements.
// Scores are register-blocked [rows x 4 keys], the weighted sum [4 rows x 16-64 dims], and an
// online softmax keeps a running max and sum per row, so the [n_q, n_kv] score matrix never exists.
// Work items are (KV head, query tile, KV split), longest query tiles first; long contexts with few
// query tiles are split over the KV length and the partial results combined (split-K), so every
// thread of the pool stays busy in decode.
//
// Thread-safety: reads q and the pages, writes out; runs on the given pool. Concurrent calls on the
// same pool are serialized by the pool; an AttentionScratch must not be shared by concurrent calls.
#pragma once

#include <cstdint>
#include <vector>

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
  // Long prefill calls (more than 32 query tokens, context >= 256) on int8 / bf16 KV may compute
  // QK^T and PV with bf16 products (vdpbf16ps, where the CPU has AVX512_BF16): the queries and the
  // probabilities are rounded to bf16 (the KV codes are exact in bf16). Off: f32 products throughout.
  bool prefill_bf16 = false;
};

// Per-call working memory, kept by the caller across calls so attention() allocates nothing once it
// has grown to the largest shape seen.
struct AttentionScratch {
  std::vector<float> per_thread;  // [threads, per-thread tiles]: queries, accumulators, K/V tiles, scores
  std::vector<int32_t> valid;     // [threads, rows]
  std::vector<float> parts;       // split-K partials [tasks, rows, head_dim + 2]
  std::vector<uint16_t> bf16;     // [threads, queries + converted K / V pages as bf16] (prefill_bf16 only)
  std::vector<float> bf16_scales; // [threads, 2, pages, 32] int8 scales of the converted pages
  std::vector<int64_t> bf16_held; // [threads, 2]: KV head and key positions the thread's pages hold
  // Bytes the bf16 prefill may spend on converted K/V pages, all threads together: each thread keeps
  // its KV head's pages when they fit (every query tile of the head reads them), else converts one
  // page per use (same results, slower).
  int64_t bf16_pages_budget = int64_t{64} << 20;
};

// q: [n_q, n_head, head_dim] f32; out: [n_q, n_head, head_dim] f32 (must not overlap q).
// Query t sits at position q_pos0 + t and sees keys [0, q_pos0 + t]; requires
// q_pos0 + n_q <= kv.n_tokens (the chunk's own K/V are already in the cache). Shapes that disagree
// with the view are caller bugs (CHECK).
// scratch: nullptr = a temporary one for this call.
void attention(const float* q, int64_t n_q, int64_t q_pos0, const PagedKvView& kv, const AttentionParams& p,
               float* out, ThreadPool& pool, AttentionScratch* scratch = nullptr);

// The naive reference the kernels are tested against: fp32, the full softmax row materialized,
// double accumulation. k, v: [n_kv, n_kv_head, head_dim] dense f32. Same masking as attention().
void attention_reference(const float* q, int64_t n_q, int64_t q_pos0, const float* k, const float* v,
                         int64_t n_kv, const AttentionParams& p, float* out);

}  // namespace splash
