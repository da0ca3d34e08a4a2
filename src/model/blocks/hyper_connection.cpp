#include "model/blocks/hyper_connection.h"

#include <cmath>

#include "backend/cpu/norm.h"
#include "core/check.h"
#include "model/blocks/block_util.h"

namespace splash {

void rms_norm_streams(const float* x, const float* gain, float eps, float* out, int64_t n,
                      const HyperConnectionShape& s, IsaLevel isa) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t k = 0; k < s.hc; ++k) {
      const int64_t off = r * s.bank() + k * s.n_embd;
      rms_norm(x + off, gain + k * s.n_embd, eps, out + off, 1, s.n_embd, isa);
    }
}

void hc_mix(const HyperConnectionWeights& w, const HyperConnectionShape& s, const float* bank, int64_t n, float* m,
            float* inject, HyperConnectionScratch& scratch, ThreadPool& pool, IsaLevel isa) {
  const int64_t B = s.bank(), rank = w.down.rows();
  SPLASH_CHECK(w.down.cols() == B && w.up.rows() == B && w.up.cols() == rank &&
               static_cast<int64_t>(w.norm.size()) == B);
  SPLASH_CHECK(!w.has_inject() || (w.inject.rows() == s.hc && w.inject.cols() == B && inject != nullptr));
  if (n == 0) return;
  grow(scratch.xn, n * B);
  grow(scratch.low, n * rank);
  grow(scratch.w, n * B);
  rms_norm_streams(bank, w.norm.data(), s.eps, scratch.xn.data(), n, s, isa);

  matmul(w.down, scratch.xn.data(), scratch.low.data(), n, pool);
  const float inv_hc = 1.0f / static_cast<float>(s.hc);
  for (int64_t i = 0; i < n * rank; ++i) {
    const float v = scratch.low[static_cast<size_t>(i)] * inv_hc;
    scratch.low[static_cast<size_t>(i)] = v * sigmoid(v);
  }
  matmul(w.up, scratch.low.data(), scratch.w.data(), n, pool);
  for (int64_t r = 0; r < n; ++r) {
    const float* xn = scratch.xn.data() + r * B;
    const float* wr = scratch.w.data() + r * B;
    float* mr = m + r * s.n_embd;
    for (int64_t j = 0; j < s.n_embd; ++j) {
      float acc = 0.0f;
      for (int64_t k = 0; k < s.hc; ++k) acc += sigmoid(wr[k * s.n_embd + j]) * xn[k * s.n_embd + j];
      mr[j] = acc * inv_hc;
    }
  }
  if (!w.has_inject()) return;
  grow(scratch.inj, n * s.hc);
  matmul(w.inject, scratch.xn.data(), scratch.inj.data(), n, pool);
  for (int64_t i = 0; i < n * s.hc; ++i) inject[i] = 2.0f * sigmoid(scratch.inj[static_cast<size_t>(i)] * inv_hc);
}

void hc_add(float* bank, const float* y, const float* inject, int64_t n, const HyperConnectionShape& s) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t k = 0; k < s.hc; ++k) {
      float* dst = bank + r * s.bank() + k * s.n_embd;
      const float* yr = y + r * s.n_embd;
      const float a = inject[r * s.hc + k];
      for (int64_t j = 0; j < s.n_embd; ++j) dst[j] += a * yr[j];
    }
}

}  // namespace splash
