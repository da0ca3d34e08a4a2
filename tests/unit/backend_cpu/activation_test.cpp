#include "backend/cpu/activation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
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

TEST(Swiglu, MatchesFormulaIncludingFusedStrideAndExtremes) {
  const int64_t n = 3, f = 37;  // odd width exercises the vector tails
  std::vector<float> fused(static_cast<size_t>(n * 2 * f));
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-12.0f, 12.0f);
  for (float& v : fused) v = dist(rng);
  fused[0] = -100.0f;  // exp overflow territory for silu
  fused[1] = 100.0f;
  fused[2] = -88.0f;
  for (IsaLevel level : levels()) {
    std::vector<float> out(static_cast<size_t>(n * f));
    swiglu(fused.data(), fused.data() + f, 2 * f, out.data(), n, f, level);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < f; ++j) {
        const double g = fused[i * 2 * f + j], u = fused[i * 2 * f + f + j];
        const double want = g / (1.0 + std::exp(-g)) * u;
        ASSERT_NEAR(out[i * f + j], want, 1e-6 * std::fabs(want) + 1e-30) << isa_level_name(level) << " " << g;
        ASSERT_TRUE(std::isfinite(out[i * f + j]));
      }
    }
  }
}

TEST(Softmax, MatchesDirectFormulaAndHandlesMasks) {
  std::mt19937 rng(4);
  std::normal_distribution<float> dist(0.0f, 5.0f);
  for (int64_t n : {1, 5, 8, 33, 1000}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = dist(rng);
    if (n > 2) x[1] = -std::numeric_limits<float>::infinity();
    double m = -1e300, sum = 0;
    for (float v : x) m = std::max(m, double(v));
    for (float v : x) sum += std::exp(double(v) - m);
    for (IsaLevel level : levels()) {
      std::vector<float> y = x;
      softmax(y.data(), n, level);
      double total = 0;
      for (int64_t i = 0; i < n; ++i) {
        const double want = std::exp(double(x[i]) - m) / sum;
        ASSERT_NEAR(y[i], want, 1e-6 * want + 1e-12) << isa_level_name(level) << " n " << n << " i " << i;
        total += y[i];
      }
      EXPECT_NEAR(total, 1.0, 1e-5);
    }
  }
  std::vector<float> masked(4, -std::numeric_limits<float>::infinity());
  softmax(masked.data(), 4);
  for (float v : masked) EXPECT_EQ(v, 0.0f);
}

TEST(Add, ResidualInPlace) {
  std::vector<float> a{1, 2, 3, 4, 5}, b{0.5f, -2, 10, 0, -5};
  add(a.data(), b.data(), a.data(), 5);
  EXPECT_EQ(a, (std::vector<float>{1.5f, 0, 13, 4, 0}));
}

}  // namespace
}  // namespace splash
