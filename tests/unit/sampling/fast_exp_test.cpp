#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "sampling/fast_exp.h"
#include "sampling/row_kernels.h"

namespace splash {
namespace {

TEST(FastExp, WithinTwoUlpOfDoubleExpOverTheWholeRange) {
  double worst = 0.0;
  for (float x = 0.0f; x > -87.0f; x = std::nextafter(x, -100.0f) - 1.3e-4f) {
    const double ref = std::exp(static_cast<double>(x));
    const double got = exp_nonpositive(x);
    const double ulp = std::nextafter(static_cast<float>(ref), 1.0f) - static_cast<float>(ref);
    worst = std::max(worst, std::abs(got - ref) / ulp);
  }
  EXPECT_LT(worst, 2.0);
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive(-0.0f), 1.0f);
}

TEST(FastExp, UnderflowAndMinusInfinityAreZero) {
  EXPECT_EQ(exp_nonpositive(-87.5f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-1000.0f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_GT(exp_nonpositive(-86.9f), 0.0f);
}

// The vector kernels must give exactly the scalar function's bits (reproducibility does not depend on
// which path or tail a token falls in).
TEST(RowKernels, WeightsAreBitIdenticalToTheScalarExp) {
  std::vector<float> row;
  for (int i = 0; i < 1003; ++i) row.push_back(std::sin(i * 0.731f) * 40.0f - 20.0f);
  row[5] = -std::numeric_limits<float>::infinity();
  row[1001] = -std::numeric_limits<float>::infinity();
  float mx = -1e30f;
  for (float l : row) mx = std::max(mx, l);
  for (float t : {1.0f, 0.7f, 1.9f}) {
    std::vector<float> w(row.size());
    const double total = row_exp_weights(row, mx, t, w.data());
    double sum = 0.0;
    for (size_t i = 0; i < row.size(); ++i) {
      ASSERT_EQ(w[i], exp_nonpositive((row[i] - mx) / t)) << i;
      sum += w[i];
    }
    EXPECT_NEAR(total, sum, 1e-12 * sum);
  }
}

TEST(RowKernels, Avx2AndSseAgreeBitForBit) {
  if (!detail::cpu_has_avx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  std::vector<float> row;
  for (int i = 0; i < 4099; ++i) row.push_back(std::cos(i * 0.123f) * 30.0f - 10.0f);
  row[17] = -std::numeric_limits<float>::infinity();
  std::vector<float> a(row.size()), b(row.size());
  for (float t : {1.0f, 0.35f}) {
    const double sa = detail::row_exp_weights_sse(row, 20.0f, t, a.data());
    const double sb = detail::row_exp_weights_avx2(row, 20.0f, t, b.data());
    EXPECT_EQ(sa, sb);
    EXPECT_EQ(a, b);
  }
}

TEST(RowKernels, StatsFindMaxCountAndBadValues) {
  const float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> row(37, ninf);
  row[3] = 2.0f;
  row[36] = 5.0f;  // in the scalar tail
  row[20] = -1.0f;
  RowStats s = row_stats(row);
  EXPECT_EQ(s.max, 5.0f);
  EXPECT_EQ(s.n_finite, 3u);
  EXPECT_FALSE(s.bad);
  row[9] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(row_stats(row).bad);
  row[9] = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(row_stats(row).bad);
  EXPECT_EQ(row_stats(std::vector<float>(5, ninf)).n_finite, 0u);
}

}  // namespace
}  // namespace splash
