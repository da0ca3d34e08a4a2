// token_logprob against a plain reference: log_softmax computed naively in long double from the
// definition, the top list by sorting every (logit, id) pair.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "sampling/logprobs.h"

namespace splash {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
std::vector<float> scratch;  // token_logprob's reusable buffer

std::vector<long double> reference_log_softmax(const std::vector<float>& x) {
  long double z = 0;
  for (float v : x)
    if (v != kNegInf) z += std::exp(static_cast<long double>(v));
  std::vector<long double> out;
  for (float v : x) out.push_back(v == kNegInf ? -INFINITY : static_cast<long double>(v) - std::log(z));
  return out;
}

std::vector<int32_t> reference_top(const std::vector<float>& x, int n) {
  std::vector<int32_t> ids(x.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
  ids.resize(std::min<size_t>(static_cast<size_t>(n), ids.size()));
  return ids;
}

TEST(TokenLogprob, MatchesReferenceOnRandomRows) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> row(1000 + static_cast<size_t>(trial) * 37);
    for (float& v : row) v = dist(rng);
    const auto ref = reference_log_softmax(row);
    const int32_t chosen = static_cast<int32_t>(rng() % row.size());
    const int top_n = trial % (kMaxTopLogprobs + 1);
    TokenLogprob t = token_logprob(row, chosen, top_n, scratch);
    EXPECT_EQ(t.id, chosen);
    EXPECT_NEAR(t.logprob, static_cast<double>(ref[static_cast<size_t>(chosen)]), 1e-5);
    const auto top = reference_top(row, top_n);
    ASSERT_EQ(t.top.size(), top.size());
    for (size_t i = 0; i < top.size(); ++i) {
      EXPECT_EQ(t.top[i].id, top[i]);
      EXPECT_NEAR(t.top[i].logprob, static_cast<double>(ref[static_cast<size_t>(top[i])]), 1e-5);
    }
  }
}

TEST(TokenLogprob, ProbabilitiesSumToOne) {
  std::vector<float> row = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f};
  TokenLogprob t = token_logprob(row, 0, 5, scratch);
  double sum = 0;
  for (const auto& a : t.top) sum += std::exp(a.logprob);
  EXPECT_NEAR(sum, 1.0, 1e-6);
}

TEST(TokenLogprob, LargeLogitsDoNotOverflow) {
  std::vector<float> row = {1e4f, 1e4f - 1.0f, -1e4f};
  TokenLogprob t = token_logprob(row, 1, 2, scratch);
  // log_softmax is shift-invariant: the same as {1, 0, -2e4}.
  EXPECT_NEAR(t.logprob, -1.0 - std::log1p(std::exp(-1.0)), 1e-6);
  EXPECT_NEAR(t.top[0].logprob, -std::log1p(std::exp(-1.0)), 1e-6);
  EXPECT_TRUE(std::isfinite(t.top[1].logprob));
}

TEST(TokenLogprob, TiesRankTheLowerIdFirst) {
  std::vector<float> row = {0.5f, 2.0f, 2.0f, 1.0f, 2.0f};
  TokenLogprob t = token_logprob(row, 4, 4, scratch);
  ASSERT_EQ(t.top.size(), 4u);
  EXPECT_EQ(t.top[0].id, 1);
  EXPECT_EQ(t.top[1].id, 2);
  EXPECT_EQ(t.top[2].id, 4);
  EXPECT_EQ(t.top[3].id, 3);
  EXPECT_FLOAT_EQ(t.top[0].logprob, t.top[2].logprob);
  EXPECT_FLOAT_EQ(t.logprob, t.top[0].logprob);
}

TEST(TokenLogprob, TiesAcrossBlocksOfTheTopScan) {
  // The top scan skips 64-wide blocks whose max is below its last entry: equal values must not be.
  std::vector<float> row(300, 0.0f);
  TokenLogprob flat = token_logprob(row, 299, 5, scratch);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(flat.top[static_cast<size_t>(i)].id, i);
  EXPECT_NEAR(flat.logprob, -std::log(300.0), 1e-6);
  row[140] = row[70] = row[10] = 1.0f;
  row[200] = 0.5f;
  TokenLogprob t = token_logprob(row, 200, 4, scratch);
  ASSERT_EQ(t.top.size(), 4u);
  EXPECT_EQ(t.top[0].id, 10);
  EXPECT_EQ(t.top[1].id, 70);
  EXPECT_EQ(t.top[2].id, 140);
  EXPECT_EQ(t.top[3].id, 200);
  EXPECT_EQ(t.logprob, t.top[3].logprob);
}

TEST(TokenLogprob, NegativeInfinityAndNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> row = {kNegInf, 0.0f, nan, 0.0f};
  TokenLogprob t = token_logprob(row, 0, 4, scratch);
  EXPECT_EQ(t.logprob, kNegInf);
  ASSERT_EQ(t.top.size(), 4u);
  EXPECT_EQ(t.top[0].id, 1);
  EXPECT_NEAR(t.top[0].logprob, std::log(0.5), 1e-7);
  EXPECT_EQ(t.top[1].id, 3);
  EXPECT_EQ(t.top[2].id, 0);  // -inf entries after the finite ones, lower id first
  EXPECT_EQ(t.top[2].logprob, kNegInf);
  EXPECT_EQ(t.top[3].id, 2);
  EXPECT_EQ(t.top[3].logprob, kNegInf);
  // A row with no mass at all.
  // +inf: no finite distribution.
  std::vector<float> inf_row = {0.0f, std::numeric_limits<float>::infinity()};
  EXPECT_EQ(token_logprob(inf_row, 0, 0, scratch).logprob, kNegInf);
  std::vector<float> dead = {kNegInf, kNegInf};
  TokenLogprob d = token_logprob(dead, 1, 1, scratch);
  EXPECT_EQ(d.logprob, kNegInf);
  EXPECT_EQ(d.top[0].id, 0);
  EXPECT_EQ(d.top[0].logprob, kNegInf);
}

TEST(TokenLogprob, TopNLargerThanVocabularyAndZero) {
  std::vector<float> row = {0.0f, 1.0f};
  EXPECT_EQ(token_logprob(row, 0, 20, scratch).top.size(), 2u);
  EXPECT_TRUE(token_logprob(row, 0, 0, scratch).top.empty());
  EXPECT_NEAR(token_logprob(row, 1, 0, scratch).logprob, -std::log1p(std::exp(-1.0)), 1e-6);
}

}  // namespace
}  // namespace splash
