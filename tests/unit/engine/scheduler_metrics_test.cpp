// engine_metrics: percentiles (numpy "linear" values worked out by hand) and the bounded window.
#include <vector>

#include "engine/engine_metrics.h"
#include "gtest/gtest.h"

namespace splash {
namespace {

TEST(EngineMetrics, PercentileMatchesLinearInterpolation) {
  // numpy.percentile([1..10], 50) = 5.5, 95 -> rank 8.55 -> 9 + 0.55 = 9.55, 0 -> 1, 100 -> 10.
  std::vector<double> v = {7, 3, 10, 1, 9, 2, 8, 4, 6, 5};
  EXPECT_DOUBLE_EQ(percentile(v, 50), 5.5);
  EXPECT_DOUBLE_EQ(percentile(v, 95), 9.55);
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 10);
  // [0.5, 100, 2, 2]: sorted 0.5 2 2 100; p50 rank 1.5 -> 2; p95 rank 2.85 -> 2 + 0.85 * 98 = 85.3.
  std::vector<double> w = {0.5, 100, 2, 2};
  EXPECT_DOUBLE_EQ(percentile(w, 50), 2);
  EXPECT_NEAR(percentile(w, 95), 85.3, 1e-9);
  std::vector<double> one = {4.25};
  EXPECT_DOUBLE_EQ(percentile(one, 95), 4.25);
  std::vector<double> none;
  EXPECT_EQ(percentile(none, 50), 0);
}

TEST(EngineMetrics, WindowKeepsTheLastSamples) {
  LatencyWindow win(4);
  EXPECT_EQ(win.summary().samples, 0);
  EXPECT_EQ(win.summary().p50, 0);
  for (int i = 1; i <= 10; ++i) win.add(i);
  EXPECT_EQ(win.size(), 4u);
  EXPECT_EQ(win.total_added(), 10);
  const LatencySummary s = win.summary();  // window holds 7 8 9 10
  EXPECT_EQ(s.samples, 4);
  EXPECT_DOUBLE_EQ(s.p50, 8.5);
  EXPECT_NEAR(s.p95, 9 + 0.85, 1e-12);  // rank 2.85
}

}  // namespace
}  // namespace splash
