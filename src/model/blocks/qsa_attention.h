// QSA attention of qwen4_exp (Flash-Next; transformers' Qwen4ExpTextQwenSparseAttention): gated
// attention whose queries see only the key blocks a small indexer picks.
//   q | gate = q_proj(x) per head (head_dim q rows, then head_dim gate rows)
//   q, k     = rope(rms_norm(q) * q_norm), rope(rms_norm(k) * k_norm)   (1-centred gains folded;
//              partial RoPE, rotate-half, on the first n_rot dims)
//   indexer  = index_qk_proj(x): index_heads query heads, then one raw key [index_dim]
//     block b of `block` tokens (complete blocks only) has the key rope(rms_norm(mean of its raw
//     keys) * index_k_norm) at position b * block; query heads are rope(rms_norm(q) * index_q_norm)
//     score[b] = sum_h relu(q_h . key_b) / sqrt(index_dim)
//     a query at position p attends to the top_blocks best complete blocks (ties: lower block
//     first) plus the incomplete tail [block * floor((p + 1) / block), p]; with at most top_blocks
//     complete blocks visible that is every token (exactly dense).
//   out = o_proj(softmax attention over the selected tokens * sigmoid(gate))
// As in transformers, a query whose own complete block is not selected does not attend to itself.
//
// K and V live in the paged KV pool like every other attention layer's (int8 / bf16 / f32 pages),
// so their prefix sharing and truncation work unchanged; the indexer state below is per sequence and
// travels with the sequence's other recurrent-like state (qsa_truncate rolls it back). Rows whose query sees at most top_blocks complete
// blocks run the paged attention kernel (dense); later rows gather the K/V of their selected tokens
// from the pages. The indexer keeps its own per-sequence state (QsaIndexerCache): the raw keys and
// each complete block's pooled, normed, rotated key, computed once when the block completes (it
// depends only on that block's raw keys). A chunk of n rows continues the sequence at position
// cache.n_tokens, so a prefill equals the same tokens one at a time.
//
// Thread-safety: one call per sequence at a time; the weights are read-only; work runs on the pool.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/rope.h"
#include "cache/kv_pages.h"
#include "core/thread_pool.h"

namespace splash {

struct QsaShape {
  int64_t n_embd = 0;
  int64_t n_head = 0;     // query heads
  int64_t n_kv_head = 0;  // key/value heads (n_head a multiple of it)
  int64_t head_dim = 0;
  int64_t index_heads = 0;  // indexer_n_heads
  int64_t index_dim = 0;    // indexer_head_dim
  int64_t block = 4;        // indexer_compress_ratio: tokens per block
  int64_t top_blocks = 0;   // indexer_budget / indexer_compress_ratio: blocks kept per query
  float eps = 1e-6f;
};

struct QsaWeights {
  PackedWeights q;                  // [n_head 2 head_dim, n_embd] per head: q rows, then gate rows
  PackedWeights k;                  // [n_kv_head head_dim, n_embd]
  PackedWeights v;                  // [n_kv_head head_dim, n_embd]
  PackedWeights o;                  // [n_embd, n_head head_dim]
  std::vector<float> q_norm;        // [head_dim] effective gain
  std::vector<float> k_norm;        // [head_dim]
  PackedWeights index_qk;           // [(index_heads + 1) index_dim, n_embd] query heads, then the key
  std::vector<float> index_q_norm;  // [index_dim]
  std::vector<float> index_k_norm;  // [index_dim]
};

// One sequence's indexer state of one QSA layer (K and V are in the KV pages). Owned by the
// caller; grows with the sequence; qsa_truncate rolls it back.
struct QsaIndexerCache {
  int64_t n_tokens = 0;
  std::vector<float> index_keys;  // [n_tokens, index_dim] raw indexer keys
  std::vector<float> block_keys;  // [n_tokens / block, index_dim] pooled, normed, rotated
};

// Drops positions >= n_tokens (speculative rollback, a shorter prefix): the raw keys past it and
// the keys of blocks no longer complete. A no-op when n_tokens >= cache.n_tokens.
void qsa_truncate(const QsaShape& s, QsaIndexerCache& cache, int64_t n_tokens);

struct QsaScratch {
  std::vector<float> qg;                         // [n, n_head 2 head_dim] q_proj output
  std::vector<float> q;                          // [n, n_head, head_dim]
  std::vector<float> gate;                       // [n, n_head head_dim]
  std::vector<float> k;                          // [n, n_kv_head, head_dim]
  std::vector<float> v;                          // [n, n_kv_head, head_dim]
  std::vector<float> iqk;                        // [n, (index_heads + 1) index_dim]
  std::vector<float> iq;                         // [n, index_heads, index_dim]
  std::vector<float> att;                        // [n, n_head head_dim]
  AttentionScratch dense;                        // the paged kernel's tiles (rows within the budget)
  std::vector<float> block_scores;               // [rows of a group, blocks] indexer scores
  std::vector<float> index_products;             // [rows of a group, index_heads, blocks]
  std::vector<std::vector<float>> scores;        // per thread: one head's token scores
  std::vector<std::vector<int32_t>> row_tokens;  // per row of a group: its selected tokens
  std::vector<std::vector<float>> kv_rows;       // per thread: [2, selected, head_dim] gathered K, V
};

// Where a QSA layer's K and V go: the pool, the sequence's page table (reserved up to
// cache.n_tokens + n before the call) and the layer's index in the pool.
struct QsaKv {
  KvPagePool* pool = nullptr;
  const KvPageTable* table = nullptr;
  int layer = 0;
};

// x: [n, n_embd] (the hyper-connection mix of the rows); out: [n, n_embd] (not added to anything).
// rope / index_rope: tables for head_dim and for index_dim, both with the model's n_rot and theta,
// covering positions [0, cache.n_tokens + n). The pool's geometry must match the shape (CHECK).
void qsa_attention(const QsaWeights& w, const QsaShape& s, const RopeTable& rope, const RopeTable& index_rope,
                   const QsaKv& kv, QsaIndexerCache& cache, const float* x, int64_t n, float* out, QsaScratch& scratch,
                   ThreadPool& pool, IsaLevel isa);

// The indexer's block scores of n rows: scores[r, b] = sum_h relu(index_q[r, h] . block_keys[b]) /
// sqrt(index_dim) for the nb blocks given (a row reads only the blocks complete before it). index_q:
// [n, index_heads, index_dim] normed, rotated; block_keys: [nb, index_dim]; scores: [n, nb];
// products: working memory. One matrix product over the block keys (on the pool).
void qsa_index_scores(const QsaShape& s, const float* index_q, int64_t n, const float* block_keys, int64_t nb,
                      float* scores, std::vector<float>& products, ThreadPool& pool);

// The token positions query position p attends to, ascending, into tokens: every token while at
// most top_blocks blocks are complete, else the top_blocks best of the (p + 1) / block complete
// blocks by scores (ties: the lower block) and the incomplete tail.
void qsa_select(const QsaShape& s, const float* scores, int64_t p, std::vector<int32_t>& tokens);

}  // namespace splash
