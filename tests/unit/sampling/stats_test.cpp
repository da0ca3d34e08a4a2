// Statistical checks: on an 8-token vocabulary, 10^5 draws must follow softmax(l / T) restricted to
// the survivors of each filter. Deterministic for the fixed seed; the bound is the chi-square
// 0.999 quantile, so a correct sampler passes with a wide margin and a wrong weight (temperature
// applied twice, an off-by-one in the walk, a filter keeping too much) fails by orders of magnitude.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "sampling/sampler.h"

namespace splash {
namespace {

const std::vector<float> kLogits = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 0.0f, 1.5f, -0.5f};

// Upper 0.001 quantiles of chi-square with df = 1..7.
constexpr double kChi2Bound[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32};

struct Case {
  const char* name;
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;
  std::vector<int32_t> kept;  // survivors, worked out by hand from kLogits
};

void run_case(const Case& c, uint64_t seed) {
  SamplingParams p;
  p.temperature = c.temperature;
  p.top_k = c.top_k;
  p.top_p = c.top_p;
  p.min_p = c.min_p;
  p.seed = seed;
  auto sampler = Sampler::create(p);
  ASSERT_TRUE(sampler.ok());
  constexpr int kDraws = 100000;
  std::vector<int> counts(kLogits.size(), 0);
  for (int i = 0; i < kDraws; ++i) {
    auto row = kLogits;
    auto t = sampler->sample(row);
    ASSERT_TRUE(t.ok());
    ++counts[*t];
  }
  double z = 0.0;
  for (int32_t id : c.kept) z += std::exp(static_cast<double>(kLogits[id]) / c.temperature);
  double chi2 = 0.0;
  int seen = 0;
  for (size_t id = 0; id < kLogits.size(); ++id) {
    const bool kept = std::find(c.kept.begin(), c.kept.end(), static_cast<int32_t>(id)) != c.kept.end();
    if (!kept) {
      EXPECT_EQ(counts[id], 0) << c.name << ": token " << id << " was filtered out";
      continue;
    }
    const double expected = kDraws * std::exp(static_cast<double>(kLogits[id]) / c.temperature) / z;
    chi2 += (counts[id] - expected) * (counts[id] - expected) / expected;
    seen += counts[id];
  }
  EXPECT_EQ(seen, kDraws);
  if (c.kept.size() > 1) {
    EXPECT_LT(chi2, kChi2Bound[c.kept.size() - 1]) << c.name;
  }
}

// Sorted by logit: id4 (3.0), id1 (2.0), id6 (1.5), id0 (1.0), id2 (0.5), id5 (0.0), id7 (-0.5),
// id3 (-1.0). Softmax at T = 1 of the sorted list: .5245 .1929 .1170 .0710 .0431 .0261 .0158 .0096.
TEST(SamplingStatistics, FrequenciesMatchSoftmaxAfterEachFilter) {
  const Case cases[] = {
      {"plain T=1", 1.0f, 0, 1.0f, 0.0f, {0, 1, 2, 3, 4, 5, 6, 7}},
      {"plain T=0.5", 0.5f, 0, 1.0f, 0.0f, {0, 1, 2, 3, 4, 5, 6, 7}},
      {"plain T=1.7", 1.7f, 0, 1.0f, 0.0f, {0, 1, 2, 3, 4, 5, 6, 7}},
      {"top_k=3", 1.0f, 3, 1.0f, 0.0f, {1, 4, 6}},
      {"top_k=5 T=1.4", 1.4f, 5, 1.0f, 0.0f, {0, 1, 2, 4, 6}},
      // cumulative .5245 .7174 .8344 .9054 ...: 0.75 needs three tokens, 0.85 four
      {"top_p=0.75", 1.0f, 0, 0.75f, 0.0f, {1, 4, 6}},
      {"top_p=0.85 T=0.7", 0.7f, 0, 0.85f, 0.0f, {0, 1, 4, 6}},
      // p >= 0.1 * p_max <=> logit >= 3 + ln 0.1 = 0.697
      {"min_p=0.1", 1.0f, 0, 1.0f, 0.1f, {0, 1, 4, 6}},
      // top_k 6 renormalizes: cum .5382 .7361 .8562, so top_p .85 keeps three (four without top_k);
      // min_p .3 (logit >= 1.796) then drops id6 (1.5)
      {"top_k=6 top_p=0.85", 1.2f, 6, 0.85f, 0.0f, {1, 4, 6}},
      {"top_k=6 top_p=0.85 min_p=0.3", 1.2f, 6, 0.85f, 0.3f, {1, 4}},
  };
  uint64_t seed = 100;
  for (const auto& c : cases) run_case(c, seed++);
}

}  // namespace
}  // namespace splash
