// Internal to backend/cpu: the per-ISA inner loops of attention.cpp, one set per tier (scalar in
// attention_scalar.cpp; AVX2 and AVX-512 from one template, attention_simd_impl.h). A tile is up to
// kKvPageTokens keys of one KV head (one page); rows are query rows (token x head of the KV group),
// already multiplied by the score scale. Per-row score and probability rows are kKvPageTokens
// floats apart.
#pragma once

#include <cstdint>

#include "backend/cpu/attention_kv.h"

namespace splash::cpu {

struct AttentionKernels {
  // dst[j][hd] = the stored codes of key/value j of head h of the block as f32, for j < n; rows n up
  // to the next multiple of 4 are zero. scale[j] = the int8 per-token scale (1 for bf16 / f32), 1
  // past n. The scale is not applied: the scores and the probabilities take it instead (32 products
  // per row instead of one per element).
  void (*load_tile)(const KvPageGeometry& geo, const uint8_t* block, int h, int n, float* dst, float* scale);
  // s[r * kKvPageTokens + j] = dot(q[r], k[j]) for r < n_rows, j < n_keys rounded up to 4 (k has
  // those rows). q: [n_rows, hd], k: [n_keys, hd].
  void (*scores)(const float* q, int n_rows, const float* k, int n_keys, int hd, float* s);
  // One online-softmax step per row: x[j] = s[j] * kscale[j] for j < valid[r] (keys past it are
  // masked), m' = max(m, max_j x[j]), alpha = exp(m - m') (1 while m' is still -inf),
  // l = l * alpha + sum_j exp(x[j] - m'); s[j] becomes exp(x[j] - m') * vscale[j] (0 when masked).
  void (*softmax_tile)(float* s, int n_rows, const int32_t* valid, const float* kscale, const float* vscale,
                       float* m, float* l, float* alpha);
  // acc[r][:] = acc[r][:] * alpha[r] + sum_{j < n_keys} p[r * kKvPageTokens + j] * v[j][:].
  // acc: [n_rows, hd], v: [n_keys, hd].
  void (*accumulate)(float* acc, int n_rows, const float* p, const float* alpha, const float* v, int n_keys, int hd);

  // Prefill tier (calls of more than 32 query tokens), transposed: query rows sit in vector lanes, so
  // scores need no horizontal reductions and the softmax is one vector op per (16 rows, key). rp =
  // rows padded to a multiple of 16, at most 64; padding rows are zero queries with valid = 1.
  // nullptr where the ISA has no such tier (the driver then uses the row-major kernels above).
  // s[j * rp + r] = dot(qt[:, r], k[j]) for j < n_keys; qt: [hd, rp], k: [32, hd] (rows past n_keys
  // up to 32 zero).
  void (*scores_t)(const float* qt, int rp, const float* k, int n_keys, int hd, float* s);
  // softmax_tile on the transposed scores (s: [n_keys, rp]; m, l, alpha, end: [rp]); row r sees the
  // keys j with kbase + j < end[r] (its position + 1; the tile's first key is at position kbase).
  void (*softmax_t)(float* s, int rp, int n_keys, const int32_t* end, int32_t kbase, const float* kscale,
                    const float* vscale, float* m, float* l, float* alpha);
  // acct[:, r] = acct[:, r] * alpha[r] + sum_{j < n_keys} p[j * rp + r] * v[j][:]; acct: [hd, rp].
  void (*accumulate_t)(float* acct, int rp, const float* p, const float* alpha, const float* v, int n_keys, int hd);

  // Query rows into the transposed tile: row r (r < rows) is q + (r / g) * token_stride + (r % g) * hd,
  // times scale; rows up to rp are zero. qt: [hd, rp] f32, or with bf16 words [hd / 2, rp] =
  // (q[r][2e], q[r][2e + 1]) rounded to bf16 (qt_bf16 non-null: then qt is not written).
  void (*load_q_t)(const float* q, int64_t token_stride, int g, int rows, int rp, int hd, float scale, float* qt,
                   uint16_t* qt_bf16);
  // out row r (same addressing as load_q_t) = acct[:, r] / l[r] for r < rows.
  void (*store_out_t)(const float* acct, int rp, const float* l, int rows, int hd, int g, int64_t token_stride,
                      float* out);

  // bf16 variant of the prefill tier (vdpbf16ps; only where cpu_features().avx512bf16, int8 or bf16
  // KV, whose codes bf16 holds exactly): the queries and the probabilities are rounded to bf16, the
  // products summed in f32. Word = two bf16 in one uint32 (lower half first).
  // K: dst[j][hd] bf16 codes (rows past n up to 32 zero). V (pair_keys): dst words [16][hd] =
  // (v[2i][d], v[2i + 1][d]) (v[n] zero when n is odd). scale as load_tile.
  void (*load_tile_bf16)(const KvPageGeometry& geo, const uint8_t* block, int h, int n, bool pair_keys, uint16_t* dst,
                         float* scale);
  // s[j * rp + r] = sum_d q[r][d] k[j][d]; qt: words [hd / 2, rp] = (q[r][2e], q[r][2e + 1]).
  void (*scores_bf16)(const uint16_t* qt, int rp, const uint16_t* k, int n_keys, int hd, float* s);
  // accumulate_t with p rounded to bf16 and v as load_tile_bf16's key pairs; p keeps kKvPageTokens rows.
  void (*accumulate_bf16)(float* acct, int rp, const float* p, const float* alpha, const uint16_t* v, int n_keys,
                          int hd);

  // scores and accumulate over int8 KV read in place: k / v are one head's codes in the page (rows
  // of hd int8, head_dim apart; scores reads up to n_keys rounded up to 4 rows, all inside the page).
  // The scales are applied by softmax_tile as for a loaded tile. nullptr: load_tile first.
  // pf (nullptr: none): codes laid out as k / v that the caller reads next (another head or page),
  // prefetched a few lines per step of this pass, so they arrive while this head computes instead of
  // in a burst of prefetches that holds the core's miss buffers.
  void (*scores_i8)(const float* q, int n_rows, const int8_t* k, int n_keys, int hd, float* s, const int8_t* pf);
  void (*accumulate_i8)(float* acc, int n_rows, const float* p, const float* alpha, const int8_t* v, int n_keys,
                        int hd, const int8_t* pf);
  // The same over bf16 KV codes read in place.
  void (*scores_bf16kv)(const float* q, int n_rows, const uint16_t* k, int n_keys, int hd, float* s,
                        const uint16_t* pf);
  void (*accumulate_bf16kv)(float* acc, int n_rows, const float* p, const float* alpha, const uint16_t* v,
                            int n_keys, int hd, const uint16_t* pf);
};

// The int8 KV codec of one head row (hd values): q[d] = round-to-nearest-even(x[d] / scale) with
// scale = max|x| / 127 (0 codes for an all-zero row); returns the scale. The AVX2 version gives the
// scalar one's bytes exactly (same products, same rounding); it needs hd % 8 == 0.
float kv_quantize_int8_scalar(const float* x, int hd, int8_t* q);
float kv_quantize_int8_avx2(const float* x, int hd, int8_t* q);

const AttentionKernels& attention_kernels_scalar();
const AttentionKernels& attention_kernels_avx2();
const AttentionKernels& attention_kernels_avx512();

}  // namespace splash::cpu
