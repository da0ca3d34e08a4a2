#include "backend/cpu/gated_delta.h"

#include <cmath>

#include "backend/cpu/gated_delta_impl.h"

namespace splash {

namespace cpu {
// gated_delta_avx2.cpp
void gated_delta_recurrent_avx2(const DeltaRuleHead& h, float* state);
void gated_delta_chunked_avx2(const DeltaRuleHead& h, float* state, int chunk, std::vector<float>& scratch);
}  // namespace cpu

namespace {

struct ScalarOps {
  static void axpy(float a, const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
  }
  static float dot(const float* x, const float* y, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; ++i) s += x[i] * y[i];
    return s;
  }
  static void scale(float* x, float a, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] *= a;
  }
};

void check_head(const DeltaRuleHead& h) {
  SPLASH_CHECK(h.n >= 0 && h.dk > 0 && h.dv > 0 && h.dk <= kMaxDeltaDim && h.dv <= kMaxDeltaDim);
}

}  // namespace

void gated_delta_recurrent(const DeltaRuleHead& h, float* state, IsaLevel level) {
  check_head(h);
  if (clamp_isa_level(level) >= IsaLevel::kAvx2) return cpu::gated_delta_recurrent_avx2(h, state);
  recurrent_impl<ScalarOps>(h, state);
}

void gated_delta_chunked(const DeltaRuleHead& h, float* state, int chunk, std::vector<float>& scratch,
                         IsaLevel level) {
  check_head(h);
  if (clamp_isa_level(level) >= IsaLevel::kAvx2) return cpu::gated_delta_chunked_avx2(h, state, chunk, scratch);
  chunked_impl<ScalarOps>(h, state, chunk, scratch);
}

void causal_conv_silu(const float* x, int64_t x_stride, float* state, const float* w, int kernel, int64_t n,
                      int64_t channels, float* out) {
  SPLASH_CHECK(kernel >= 1 && n >= 0 && channels > 0);
  const int64_t km1 = kernel - 1;
  // Input row r of x_ext = [state; x]: state row r for r < K-1, else x row r - (K-1).
  auto row = [&](int64_t r) { return r < km1 ? state + r * channels : x + (r - km1) * x_stride; };
  for (int64_t t = 0; t < n; ++t) {
    float* o = out + t * channels;
    std::fill(o, o + channels, 0.0f);
    for (int j = 0; j < kernel; ++j) {
      const float* in = row(t + j);
      for (int64_t c = 0; c < channels; ++c) o[c] += w[c * kernel + j] * in[c];
    }
    for (int64_t c = 0; c < channels; ++c) o[c] = o[c] / (1.0f + std::exp(-o[c]));
  }
  // New state: the last K-1 rows of x_ext (rows n .. n + K-2). Rows still in the old state are
  // shifted down first (ascending order never overwrites a row before reading it).
  for (int64_t r = 0; r < km1; ++r) {
    const int64_t src = n + r;
    if (src < km1) {
      std::copy(state + src * channels, state + (src + 1) * channels, state + r * channels);
    } else {
      const float* in = x + (src - km1) * x_stride;
      std::copy(in, in + channels, state + r * channels);
    }
  }
}

void l2_normalize_rows(float* x, int64_t stride, int64_t n, int64_t d, float eps, float scale) {
  for (int64_t i = 0; i < n; ++i) {
    float* r = x + i * stride;
    double ss = 0.0;
    for (int64_t j = 0; j < d; ++j) ss += static_cast<double>(r[j]) * r[j];
    const float f = static_cast<float>(scale / std::sqrt(ss + eps));
    for (int64_t j = 0; j < d; ++j) r[j] *= f;
  }
}

}  // namespace splash
