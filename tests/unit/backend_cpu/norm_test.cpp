#include "backend/cpu/norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace splash {
namespace {

std::vector<IsaLevel> levels() {
  std::vector<IsaLevel> out{IsaLevel::kScalar};
  if (best_isa_level() >= IsaLevel::kAvx2) out.push_back(IsaLevel::kAvx2);
  if (best_isa_level() >= IsaLevel::kAvx512) out.push_back(IsaLevel::kAvx512);
  return out;
}

TEST(RmsNorm, MatchesDirectFormulaAtEveryLevel) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  for (int64_t d : {1, 7, 16, 48, 100, 288, 1024, 4099}) {
    const int64_t n = 3;
    std::vector<float> x(static_cast<size_t>(n * d)), w(static_cast<size_t>(d));
    for (float& v : x) v = dist(rng);
    for (float& v : w) v = 1.0f + 0.1f * dist(rng);
    for (IsaLevel level : levels()) {
      std::vector<float> out(x.size());
      rms_norm(x.data(), w.data(), 1e-6f, out.data(), n, d, level);
      for (int64_t i = 0; i < n; ++i) {
        long double ss = 0;
        for (int64_t j = 0; j < d; ++j) ss += static_cast<long double>(x[i * d + j]) * x[i * d + j];
        const long double r = 1.0L / std::sqrt(ss / d + 1e-6L);
        for (int64_t j = 0; j < d; ++j) {
          const double want = static_cast<double>(x[i * d + j] * r * w[j]);
          ASSERT_NEAR(out[i * d + j], want, 2e-6 * std::fabs(want) + 1e-7)
              << "d " << d << " level " << isa_level_name(level) << " at " << i << "," << j;
        }
      }
    }
  }
}

TEST(RmsNorm, InPlaceAndPerHeadForm) {
  // qwen3 q_norm: each head_dim row normalized separately with one weight.
  const int64_t n_tok = 2, n_head = 3, hd = 64;
  std::vector<float> x(static_cast<size_t>(n_tok * n_head * hd)), w(static_cast<size_t>(hd));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37 % 101)) * 0.01f * (1.0f + (i / hd));
  for (size_t j = 0; j < w.size(); ++j) w[j] = 0.5f + 0.01f * j;
  std::vector<float> want(x.size());
  for (int64_t r = 0; r < n_tok * n_head; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < hd; ++j) ss += double(x[r * hd + j]) * x[r * hd + j];
    for (int64_t j = 0; j < hd; ++j) want[r * hd + j] = float(x[r * hd + j] / std::sqrt(ss / hd + 1e-6) * w[j]);
  }
  rms_norm_heads(x.data(), w.data(), 1e-6f, x.data(), n_tok, n_head, hd);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], want[i], 1e-5f * std::fabs(want[i]) + 1e-7f);
}

TEST(RmsNorm, StableForLargeRowsWithOffset) {
  // A long row of large values: a naive single float accumulator loses ~1e-4 relative here.
  const int64_t d = 1 << 16;
  std::vector<float> x(static_cast<size_t>(d)), w(static_cast<size_t>(d), 1.0f), out(x.size());
  for (int64_t j = 0; j < d; ++j) x[j] = 1000.0f + static_cast<float>(j % 3);
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  const double r = 1.0 / std::sqrt(ss / d + 1e-5);
  for (IsaLevel level : levels()) {
    rms_norm(x.data(), w.data(), 1e-5f, out.data(), 1, d, level);
    EXPECT_NEAR(out[0], x[0] * r, 2e-6 * x[0] * r) << isa_level_name(level);
    EXPECT_NEAR(out[d - 1], x[d - 1] * r, 2e-6 * x[d - 1] * r) << isa_level_name(level);
  }
}

}  // namespace
}  // namespace splash
