// Kernels of the Gated DeltaNet (linear attention) layers of the hybrid Qwen3-Next / Qwen3.5 models.
//
// Gated delta rule, one value head, token t (S: [dk, dv] state, q/k l2-normalized, q scaled by
// 1/sqrt(dk) by the caller, g_t <= 0 the log decay, beta_t in (0, 1)):
//   S = exp(g_t) S;   S += k_t (beta_t (v_t - S^T k_t))^T;   o_t = S^T q_t
// Two evaluations of the same function:
//   * recurrent: token by token (decode, short runs);
//   * chunked: blocks of `chunk` tokens with matrix products (prefill). Inside a block, with
//     G_i = sum_{m<=i} g_m, the WY form T = (I + strict_lower(beta_i k_i.k_j e^{G_i - G_j}))^-1
//     gives U = T (beta v), W = T (beta e^G k); then V' = U - W S, o_i = e^{G_i} q_i S +
//     sum_{j<=i} (q_i.k_j) e^{G_i - G_j} V'_j, and S = e^{G_L} S + sum_j e^{G_L - G_j} k_j V'_j^T.
//     Equal to the recurrence within rounding (tests/unit/backend_cpu/gated_delta_test.cpp).
// Every exponent is of a non-positive number, so nothing overflows for any decay.
//
// Each kernel has a portable version and an AVX2+FMA one compiled from the same source
// (gated_delta_impl.h); `level` picks (clamped to the CPU).
//
// Thread-safety: pure functions over caller-owned buffers; single-threaded (the caller spreads
// sequences x heads over its thread pool).
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/cpu_features.h"

namespace splash {

// One value head's inputs over n tokens; rows are strided so the head can be read in place from
// [n, n_head, dim] buffers.
struct DeltaRuleHead {
  const float* q = nullptr;     // [n, dk] at q_stride
  const float* k = nullptr;     // [n, dk] at k_stride
  const float* v = nullptr;     // [n, dv] at v_stride
  const float* g = nullptr;     // [n] at gb_stride: log decay, <= 0
  const float* beta = nullptr;  // [n] at gb_stride
  float* out = nullptr;         // [n, dv] at out_stride
  int64_t q_stride = 0, k_stride = 0, v_stride = 0, gb_stride = 1, out_stride = 0;
  int64_t n = 0;
  int dk = 0, dv = 0;
};

// state: [dk, dv], updated in place.
void gated_delta_recurrent(const DeltaRuleHead& h, float* state, IsaLevel level = IsaLevel::kAvx512);

// Same result; `scratch` is grown as needed and may be reused across calls.
void gated_delta_chunked(const DeltaRuleHead& h, float* state, int chunk, std::vector<float>& scratch,
                         IsaLevel level = IsaLevel::kAvx512);

// Causal depthwise convolution with SiLU, kernel K, no bias: for each channel c,
// out[t, c] = silu(sum_j w[c, j] * x_ext[t + j, c]), x_ext = [state; x] ([K-1 + n, channels]).
// state: [K-1, channels], the last K-1 inputs before x; replaced by the last K-1 rows of x_ext.
// x: [n, channels] at x_stride; w: [channels, K]; out: [n, channels] (contiguous).
void causal_conv_silu(const float* x, int64_t x_stride, float* state, const float* w, int kernel, int64_t n,
                      int64_t channels, float* out);

// x[i, :] /= sqrt(sum(x[i, :]^2) + eps) * (1 / scale), i.e. l2-normalize rows of d and multiply by
// scale. x: [n, d] at stride.
void l2_normalize_rows(float* x, int64_t stride, int64_t n, int64_t d, float eps, float scale);

}  // namespace splash
