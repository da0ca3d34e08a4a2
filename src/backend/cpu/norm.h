// RMSNorm: out[i] = x[i] / sqrt(mean(x[i]^2) + eps) * weight, per row, computed in fp32 with a
// sum of squares that stays accurate for wide rows (f32 partial sums per block of 1024, blocks summed
// in double; the scalar reference accumulates in double throughout).
//
// Thread-safety: pure functions over caller-owned buffers; single-threaded.
#pragma once

#include <cstdint>

#include "backend/cpu/cpu_features.h"

namespace splash {

// x: [n, d], weight: [d], out: [n, d]. out may alias x.
void rms_norm(const float* x, const float* weight, float eps, float* out, int64_t n, int64_t d,
              IsaLevel level = IsaLevel::kAvx512);

// The per-head form (qwen3 q_norm / k_norm): every head_dim-wide row of x is normalized with the
// same weight. x: [n_tokens, n_head, head_dim] viewed as [n_tokens * n_head, head_dim]; weight:
// [head_dim]; out may alias x.
inline void rms_norm_heads(const float* x, const float* weight, float eps, float* out, int64_t n_tokens,
                           int64_t n_head, int64_t head_dim, IsaLevel level = IsaLevel::kAvx512) {
  rms_norm(x, weight, eps, out, n_tokens * n_head, head_dim, level);
}

}  // namespace splash
