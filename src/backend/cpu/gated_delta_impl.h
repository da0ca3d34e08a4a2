// The gated delta rule (gated_delta.h), written once over a vector-ops policy `Ops` (axpy, dot,
// scale) and compiled per ISA: gated_delta.cpp (portable loops) and gated_delta_avx2.cpp (AVX2+FMA
// intrinsics). Everything here has internal linkage so the ISA copies never merge.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "backend/cpu/gated_delta.h"
#include "core/check.h"

namespace splash {
namespace {

constexpr int kMaxDeltaDim = 1024;  // dk, dv bound for the stack buffers of the recurrence

template <class Ops>
void recurrent_impl(const DeltaRuleHead& h, float* state) {
  const int dk = h.dk, dv = h.dv;
  SPLASH_CHECK(dv <= kMaxDeltaDim);
  float kv[kMaxDeltaDim];
  for (int64_t t = 0; t < h.n; ++t) {
    const float* q = h.q + t * h.q_stride;
    const float* k = h.k + t * h.k_stride;
    const float* v = h.v + t * h.v_stride;
    float* o = h.out + t * h.out_stride;
    const float decay = std::exp(h.g[t * h.gb_stride]);
    const float beta = h.beta[t * h.gb_stride];
    std::fill(kv, kv + dv, 0.0f);
    for (int d = 0; d < dk; ++d) {  // S *= decay; kv = S^T k
      float* s = state + int64_t{d} * dv;
      Ops::scale(s, decay, dv);
      Ops::axpy(k[d], s, kv, dv);
    }
    for (int j = 0; j < dv; ++j) kv[j] = beta * (v[j] - kv[j]);  // delta
    std::fill(o, o + dv, 0.0f);
    for (int d = 0; d < dk; ++d) {  // S += k delta^T; o = S^T q
      float* s = state + int64_t{d} * dv;
      Ops::axpy(k[d], kv, s, dv);
      Ops::axpy(q[d], s, o, dv);
    }
  }
}

template <class Ops>
void chunked_impl(const DeltaRuleHead& h, float* state, int chunk, std::vector<float>& scratch) {
  const int64_t dk = h.dk, dv = h.dv, C = chunk;
  SPLASH_CHECK(C > 0);
  // Scratch: kc, qc [C, dk]; w [C, dk]; u, vn [C, dv]; t, qk [C, C]; gc, e [C].
  const size_t need = static_cast<size_t>(3 * C * dk + 2 * C * dv + 2 * C * C + 2 * C);
  if (scratch.size() < need) scratch.resize(need);
  float* kc = scratch.data();
  float* qc = kc + C * dk;
  float* w = qc + C * dk;
  float* u = w + C * dk;
  float* vn = u + C * dv;
  float* tm = vn + C * dv;
  float* qk = tm + C * C;
  float* gc = qk + C * C;
  float* e = gc + C;

  for (int64_t t0 = 0; t0 < h.n; t0 += C) {
    const int64_t L = std::min<int64_t>(C, h.n - t0);
    float acc = 0.0f;
    for (int64_t i = 0; i < L; ++i) {
      const int64_t t = t0 + i;
      std::copy(h.k + t * h.k_stride, h.k + t * h.k_stride + dk, kc + i * dk);
      std::copy(h.q + t * h.q_stride, h.q + t * h.q_stride + dk, qc + i * dk);
      acc += h.g[t * h.gb_stride];
      gc[i] = acc;
      e[i] = std::exp(acc);
    }
    // T = (I + strict_lower(beta_i k_i.k_j e^{G_i - G_j}))^-1 by forward substitution; qk = causal
    // q_i.k_j e^{G_i - G_j}.
    for (int64_t i = 0; i < L; ++i) {
      const float beta_i = h.beta[(t0 + i) * h.gb_stride];
      float* ti = tm + i * C;
      for (int64_t j = 0; j < i; ++j)
        ti[j] = -beta_i * Ops::dot(kc + i * dk, kc + j * dk, dk) * std::exp(gc[i] - gc[j]);
      for (int64_t j = 0; j < i; ++j) {
        float s = ti[j];
        for (int64_t m = j + 1; m < i; ++m) s += ti[m] * tm[m * C + j];
        ti[j] = s;
      }
      ti[i] = 1.0f;
      float* qi = qk + i * C;
      for (int64_t j = 0; j <= i; ++j) qi[j] = Ops::dot(qc + i * dk, kc + j * dk, dk) * std::exp(gc[i] - gc[j]);
    }
    // U = T (beta v), W = T (beta e^G k); lower triangular, so row i sums j <= i.
    for (int64_t i = 0; i < L; ++i) {
      float* ui = u + i * dv;
      float* wi = w + i * dk;
      std::fill(ui, ui + dv, 0.0f);
      std::fill(wi, wi + dk, 0.0f);
      for (int64_t j = 0; j <= i; ++j) {
        const int64_t t = t0 + j;
        const float c = tm[i * C + j] * h.beta[t * h.gb_stride];
        Ops::axpy(c, h.v + t * h.v_stride, ui, dv);
        Ops::axpy(c * e[j], kc + j * dk, wi, dk);
      }
    }
    // V' = U - W S; o_i = e^{G_i} q_i S + sum_{j<=i} qk_ij V'_j.
    for (int64_t i = 0; i < L; ++i) {
      float* vi = vn + i * dv;
      std::copy(u + i * dv, u + (i + 1) * dv, vi);
      const float* wi = w + i * dk;
      for (int64_t d = 0; d < dk; ++d) Ops::axpy(-wi[d], state + d * dv, vi, dv);
    }
    for (int64_t i = 0; i < L; ++i) {
      float* o = h.out + (t0 + i) * h.out_stride;
      std::fill(o, o + dv, 0.0f);
      const float* qi = qc + i * dk;
      for (int64_t d = 0; d < dk; ++d) Ops::axpy(qi[d] * e[i], state + d * dv, o, dv);
      for (int64_t j = 0; j <= i; ++j) Ops::axpy(qk[i * C + j], vn + j * dv, o, dv);
    }
    // S = e^{G_L} S + sum_j e^{G_L - G_j} k_j V'_j^T.
    const float g_last = gc[L - 1];
    for (int64_t j = 0; j < L; ++j) e[j] = std::exp(g_last - gc[j]);
    for (int64_t d = 0; d < dk; ++d) {
      float* s = state + d * dv;
      Ops::scale(s, std::exp(g_last), dv);
      for (int64_t j = 0; j < L; ++j) Ops::axpy(kc[j * dk + d] * e[j], vn + j * dv, s, dv);
    }
  }
}

}  // namespace
}  // namespace splash
