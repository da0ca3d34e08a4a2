// Internal to backend/cpu: the per-ISA inner loops of attention.cpp. A tile is up to kKvPageTokens
// keys of one KV head; rows are query rows (token x head of the KV group), already scaled.
#pragma once

#include <cstdint>

#include "backend/cpu/attention_kv.h"

namespace splash::cpu {

struct AttentionKernels {
  // dst[j][hd] = key/value j of head h of the block, for j < n (f32).
  void (*load_tile)(const KvPageGeometry& geo, const uint8_t* block, int h, int n, float* dst);
  // s[r * kKvPageTokens + j] = dot(q[r], k[j]) for r < n_rows, j < n_keys. q: [n_rows, hd].
  void (*scores)(const float* q, int n_rows, const float* k, int n_keys, int hd, float* s);
  // acc[hd] += sum_j p[j] * v[j] for j < n_keys. v: [n_keys, hd].
  void (*accumulate)(float* acc, const float* p, const float* v, int n_keys, int hd);
  // x[j] = exp(x[j] - m), returns the sum.
  float (*exp_sum)(float* x, int64_t n, float m);
};

const AttentionKernels& attention_kernels_scalar();
const AttentionKernels& attention_kernels_avx2();
const AttentionKernels& attention_kernels_avx512();

}  // namespace splash::cpu
