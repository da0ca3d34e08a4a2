// The kept set and probabilities of each filter, on hand-made rows and against the plain reference
// over a real-sized vocabulary.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "sampling/logit_filter.h"
#include "test_util.h"

namespace splash {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<int32_t> kept_ids(const std::vector<float>& logits, const SamplingParams& p) {
  FilterScratch scratch;
  std::vector<TokenProb> out;
  Status s = filter_logits(logits, p, scratch, out);
  EXPECT_TRUE(s.ok()) << s.error_message();
  std::vector<int32_t> ids;
  for (const auto& tp : out) ids.push_back(tp.id);
  return ids;
}

// log of the probabilities [0.5, 0.3, 0.15, 0.05], shuffled over ids so that id order != rank order.
std::vector<float> four_token_row() {
  return {std::log(0.15f), std::log(0.5f), std::log(0.05f), std::log(0.3f)};
  //      id 0 -> 0.15      id 1 -> 0.5     id 2 -> 0.05     id 3 -> 0.3
}

SamplingParams params(float t, int32_t k = 0, float top_p = 1.0f, float min_p = 0.0f) {
  SamplingParams p;
  p.temperature = t;
  p.top_k = k;
  p.top_p = top_p;
  p.min_p = min_p;
  return p;
}

using Ids = std::vector<int32_t>;

TEST(Filter, GreedyIsArgmaxWithLowestIdOnTies) {
  EXPECT_EQ(kept_ids({0.f, 3.f, 1.f, 3.f}, params(0)), Ids{1});
  EXPECT_EQ(kept_ids({kNegInf, -5.f, -5.f}, params(0)), Ids{1});
  EXPECT_EQ(kept_ids({7.f}, params(0)), Ids{0});
}

TEST(Filter, TopK) {
  const auto row = four_token_row();
  EXPECT_EQ(kept_ids(row, params(1, 1)), Ids{1});
  EXPECT_EQ(kept_ids(row, params(1, 2)), (Ids{1, 3}));
  EXPECT_EQ(kept_ids(row, params(1, 3)), (Ids{0, 1, 3}));
  EXPECT_EQ(kept_ids(row, params(1, 4)), (Ids{0, 1, 2, 3}));
  EXPECT_EQ(kept_ids(row, params(1, 100)), (Ids{0, 1, 2, 3}));
  // Ties at the cut: exactly k survive, the lowest ids among the tied.
  EXPECT_EQ(kept_ids({1.f, 3.f, 3.f, 2.f, 3.f}, params(1, 2)), (Ids{1, 2}));
  EXPECT_EQ(kept_ids({1.f, 3.f, 2.f, 2.f, 2.f}, params(1, 3)), (Ids{1, 2, 3}));
  // -inf never survives, even when k exceeds the finite count.
  EXPECT_EQ(kept_ids({kNegInf, 1.f, kNegInf, 0.f}, params(1, 3)), (Ids{1, 3}));
}

TEST(Filter, TopPKeepsTheTokenThatCrossesTheThreshold) {
  const auto row = four_token_row();  // sorted p: 0.5 (id1), 0.3 (id3), 0.15 (id0), 0.05 (id2)
  EXPECT_EQ(kept_ids(row, params(1, 0, 1e-6f)), Ids{1});
  EXPECT_EQ(kept_ids(row, params(1, 0, 0.0f)), Ids{1});
  EXPECT_EQ(kept_ids(row, params(1, 0, 0.49f)), Ids{1});
  EXPECT_EQ(kept_ids(row, params(1, 0, 0.51f)), (Ids{1, 3}));
  EXPECT_EQ(kept_ids(row, params(1, 0, 0.79f)), (Ids{1, 3}));
  EXPECT_EQ(kept_ids(row, params(1, 0, 0.81f)), (Ids{0, 1, 3}));
  EXPECT_EQ(kept_ids(row, params(1, 0, 0.96f)), (Ids{0, 1, 2, 3}));
}

TEST(Filter, MinP) {
  const auto row = four_token_row();  // p_max = 0.5
  EXPECT_EQ(kept_ids(row, params(1, 0, 1, 0.35f)), (Ids{1, 3}));        // >= 0.175
  EXPECT_EQ(kept_ids(row, params(1, 0, 1, 0.25f)), (Ids{0, 1, 3}));     // >= 0.125
  EXPECT_EQ(kept_ids(row, params(1, 0, 1, 0.05f)), (Ids{0, 1, 2, 3}));  // >= 0.025
  EXPECT_EQ(kept_ids(row, params(1, 0, 1, 1.0f)), Ids{1});
  EXPECT_EQ(kept_ids({2.f, 2.f, 1.f}, params(1, 0, 1, 1.0f)), (Ids{0, 1}));  // ties with the max stay
}

TEST(Filter, TopPIsRenormalizedOverTopK) {
  const auto row = four_token_row();
  // Alone, top_p 0.6 needs the two best (0.5 < 0.6). After top_k = 2 the best has 0.5/0.8 = 0.625.
  EXPECT_EQ(kept_ids(row, params(1, 0, 0.6f)), (Ids{1, 3}));
  EXPECT_EQ(kept_ids(row, params(1, 2, 0.6f)), Ids{1});
}

TEST(Filter, TemperatureComesAfterTheFilters) {
  const auto row = four_token_row();
  // At T = 2 the flattened distribution would need three tokens to reach 0.79; the cut is made at
  // T = 1 (llama.cpp's order), so two survive, re-weighted by softmax(l / 2).
  FilterScratch scratch;
  std::vector<TokenProb> out;
  ASSERT_TRUE(filter_logits(row, params(2.0f, 0, 0.79f), scratch, out).ok());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].id, 1);
  EXPECT_EQ(out[1].id, 3);
  const double a = std::sqrt(0.5), b = std::sqrt(0.3);  // exp(log(p) / 2)
  EXPECT_NEAR(out[0].p, a / (a + b), 1e-6);
  EXPECT_NEAR(out[1].p, b / (a + b), 1e-6);
}

TEST(Filter, ProbabilitiesAreSoftmaxOverTheSurvivors) {
  const std::vector<float> row = {1.0f, 2.0f, 0.5f, kNegInf, 3.0f, 0.0f};
  FilterScratch scratch;
  std::vector<TokenProb> out;
  ASSERT_TRUE(filter_logits(row, params(0.7f), scratch, out).ok());
  ASSERT_EQ(out.size(), 5u);  // -inf dropped
  double z = 0.0;
  for (float l : row) z += std::exp(static_cast<double>(l) / 0.7);
  for (const auto& tp : out) {
    EXPECT_NE(tp.id, 3);
    EXPECT_NEAR(tp.p, std::exp(row[tp.id] / 0.7) / z, 1e-6) << tp.id;
  }
}

TEST(Filter, BadRowsAreErrorsNamingTheToken) {
  FilterScratch scratch;
  std::vector<TokenProb> out;
  std::vector<float> row = {0.f, 1.f, std::numeric_limits<float>::quiet_NaN(), 2.f};
  for (float t : {0.0f, 1.0f}) {
    Status s = filter_logits(row, params(t), scratch, out);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error_message(), "sampling: logit of token 2 is NaN");
  }
  row[2] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(filter_logits(row, params(1), scratch, out).error_message(),
            "sampling: logit of token 2 is +inf");
  row = {kNegInf, kNegInf};
  EXPECT_EQ(filter_logits(row, params(1, 1), scratch, out).error_message(),
            "sampling: every logit of the 2-token row is -inf; no token can be sampled");
  row.clear();
  EXPECT_FALSE(filter_logits(row, params(0), scratch, out).ok());
}

// --- the real vocabulary size, against the reference chain

void expect_same_as_reference(const std::vector<float>& row, const SamplingParams& p) {
  FilterScratch scratch;
  std::vector<TokenProb> out;
  Status s = filter_logits(row, p, scratch, out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const auto ref = testing::reference_filter(row, p);
  ASSERT_EQ(out.size(), ref.size()) << "T=" << p.temperature << " k=" << p.top_k
                                    << " top_p=" << p.top_p << " min_p=" << p.min_p;
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_EQ(out[i].id, ref[i].id) << i;
    ASSERT_NEAR(out[i].p, ref[i].p, 1e-6 + 1e-5 * ref[i].p) << i;
  }
}

TEST(Filter, MatchesTheReferenceOverAQwenSizedVocabulary) {
  constexpr size_t kVocab = 151936;
  for (double sigma : {1.0, 8.0}) {
    const auto row = testing::normal_logits(kVocab, 17, sigma);
    for (int32_t k : {0, 1, 40, 100000}) {
      for (float top_p : {1.0f, 0.95f, 0.5f}) {
        for (float min_p : {0.0f, 0.05f}) {
          expect_same_as_reference(row, params(0.8f, k, top_p, min_p));
        }
      }
    }
  }
}

TEST(Filter, MatchesTheReferenceOnAFlatterRow) {
  // sigma 3: top_p 0.999 keeps most of the vocabulary; the pool bound is loose here.
  const auto row = testing::normal_logits(151936, 23, 3.0);
  expect_same_as_reference(row, params(1.1f, 0, 0.999f));
  expect_same_as_reference(row, params(0.6f, 1000, 0.9f, 0.01f));
}

TEST(Filter, TopPIsExactOnAFlatDistribution) {
  // Nearly flat: top_p 0.9 must keep ~90% of 151,936 tokens, not a pre-truncated handful.
  const auto row = testing::normal_logits(151936, 5, 0.01);
  FilterScratch scratch;
  std::vector<TokenProb> out;
  ASSERT_TRUE(filter_logits(row, params(1, 0, 0.9f), scratch, out).ok());
  EXPECT_GT(out.size(), 130000u);
  expect_same_as_reference(row, params(1, 0, 0.9f));
}

TEST(Filter, HistogramEdgeCases) {
  // All equal; a far outlier above (most logits land in the catch-all bucket); masked tokens; huge
  // ties at the top_k cut.
  std::vector<float> equal(5000, 0.25f);
  expect_same_as_reference(equal, params(1, 5));
  expect_same_as_reference(equal, params(1, 0, 0.3f));
  auto outlier = testing::normal_logits(50000, 3, 2.0);
  outlier[777] = 500.0f;
  expect_same_as_reference(outlier, params(1, 10));
  expect_same_as_reference(outlier, params(1, 0, 0.999999f));
  outlier[777] = -500.0f;
  outlier[778] = 0.5f;
  expect_same_as_reference(outlier, params(1, 0, 0.5f, 0.01f));
  auto masked = testing::normal_logits(50000, 4, 2.0);
  for (size_t i = 0; i < masked.size(); i += 3) masked[i] = kNegInf;
  expect_same_as_reference(masked, params(1.5f, 200, 0.9f));
  expect_same_as_reference(masked, params(1.5f, 0, 0.9f, 0.2f));
  std::vector<float> steps(30000);
  for (size_t i = 0; i < steps.size(); ++i) steps[i] = static_cast<float>(i % 7);
  expect_same_as_reference(steps, params(1, 4290));
  expect_same_as_reference(steps, params(1, 0, 0.55f));
}

}  // namespace
}  // namespace splash
