#include "model/blocks/ple_layer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "model/blocks/block_util.h"

namespace splash {

void ple_layer(const PleLayerWeights& w, const PleLayerShape& s, const float* rows, const float* bank, int64_t n,
               float* state, float* out, PleLayerScratch& scratch, ThreadPool& pool, IsaLevel isa) {
  const HyperConnectionShape& hs = s.bank;
  const int64_t H = hs.n_embd, B = hs.bank(), K = s.kernel, d = s.dilation, n_state = s.state_rows();
  SPLASH_CHECK(w.key.rows() == B && w.key.cols() == s.ple_dim && w.value.rows() == H && w.value.cols() == s.ple_dim);
  SPLASH_CHECK(static_cast<int64_t>(w.conv.size()) == B * K && static_cast<int64_t>(w.norm_key.size()) == B);
  if (n == 0) return;
  grow(scratch.kn, n * B);
  grow(scratch.qn, n * B);
  grow(scratch.v, n * H);
  grow(scratch.hist, (n_state + n) * B);

  matmul(w.key, rows, scratch.kn.data(), n, pool);
  rms_norm_streams(scratch.kn.data(), w.norm_key.data(), hs.eps, scratch.kn.data(), n, hs, isa);
  matmul(w.value, rows, scratch.v.data(), n, pool);
  rms_norm_streams(bank, w.norm_query.data(), hs.eps, scratch.qn.data(), n, hs, isa);

  // Gated values: out = gv for now.
  const float inv_sqrt = 1.0f / std::sqrt(static_cast<float>(H));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t k = 0; k < hs.hc; ++k) {
      const float* kn = scratch.kn.data() + r * B + k * H;
      const float* qn = scratch.qn.data() + r * B + k * H;
      float dot = 0.0f;
      for (int64_t j = 0; j < H; ++j) dot += kn[j] * qn[j];
      const float a = dot * inv_sqrt;
      const float signed_root = a == 0.0f ? 0.0f : std::copysign(std::sqrt(std::max(std::fabs(a), 1e-6f)), a);
      const float g = sigmoid(signed_root);
      const float* v = scratch.v.data() + r * H;
      float* o = out + r * B + k * H;
      for (int64_t j = 0; j < H; ++j) o[j] = g * v[j];
    }

  // u rows after the carried history; the conv reads taps d apart, the last n_state rows carry on.
  float* hist = scratch.hist.data();
  std::memcpy(hist, state, static_cast<size_t>(n_state * B) * sizeof(float));
  rms_norm_streams(out, w.norm_conv.data(), hs.eps, hist + n_state * B, n, hs, isa);
  for (int64_t r = 0; r < n; ++r) {
    float* o = out + r * B;
    for (int64_t ch = 0; ch < B; ++ch) {
      const float* wc = w.conv.data() + ch * K;
      float acc = 0.0f;
      for (int64_t j = 0; j < K; ++j) acc += wc[j] * hist[(n_state + r - d * (K - 1 - j)) * B + ch];
      o[ch] += acc * sigmoid(acc);
    }
  }
  std::memcpy(state, hist + n * B, static_cast<size_t>(n_state * B) * sizeof(float));
}

}  // namespace splash
