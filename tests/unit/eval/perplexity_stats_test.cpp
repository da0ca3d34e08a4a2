// The perplexity and KL-divergence math of `splash perplexity`, against plain double-precision
// versions of llama-perplexity's formulas written out here.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "eval/perplexity_stats.h"

namespace splash::eval {
namespace {

std::vector<double> log_softmax_f64(const std::vector<float>& l) {
  double mx = l[0];
  for (float v : l) mx = std::max(mx, static_cast<double>(v));
  double s = 0;
  for (float v : l) s += std::exp(v - mx);
  std::vector<double> out;
  for (float v : l) out.push_back(v - mx - std::log(s));
  return out;
}

std::vector<float> random_logits(size_t n, uint32_t seed, float spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, spread);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(PerplexityStats, TokenNllIsMinusLogSoftmax) {
  const std::vector<float> l = {1.0f, 2.0f, 3.0f, -1.0f};
  const auto ls = log_softmax_f64(l);
  for (int t = 0; t < 4; ++t) EXPECT_NEAR(token_nll(l, t), -ls[static_cast<size_t>(t)], 1e-6);
  const RowSoftmax r = row_softmax(l);
  EXPECT_EQ(r.argmax, 2);
  EXPECT_FLOAT_EQ(r.max_logit, 3.0f);
}

TEST(PerplexityStats, ArgmaxTakesTheFirstOfTies) {
  const std::vector<float> l = {0.0f, 5.0f, 5.0f, 1.0f};
  EXPECT_EQ(row_softmax(l).argmax, 1);
}

TEST(PerplexityStats, RunningPerplexityAndUncertainty) {
  const std::vector<double> nll = {1.0, 2.0, 4.0, 3.0, 0.5};
  PerplexityAccumulator acc;
  double sum = 0, sum2 = 0;
  for (double v : nll) {
    acc.add(v);
    sum += v;
    sum2 += v * v;
  }
  const double n = 5, mean = sum / n;
  EXPECT_EQ(acc.count(), 5);
  EXPECT_NEAR(acc.mean_nll(), mean, 1e-12);
  EXPECT_NEAR(acc.ppl(), std::exp(mean), 1e-12);
  // llama-perplexity: PPL * sqrt((<nll^2> - <nll>^2) / (N - 1))
  EXPECT_NEAR(acc.ppl_uncertainty(), std::exp(mean) * std::sqrt((sum2 / n - mean * mean) / (n - 1)), 1e-12);
  PerplexityAccumulator one;
  one.add(2.0);
  EXPECT_EQ(one.ppl_uncertainty(), 0.0);
  PerplexityAccumulator constant;
  for (int i = 0; i < 4; ++i) constant.add(1.5);
  EXPECT_NEAR(constant.ppl(), std::exp(1.5), 1e-12);
  EXPECT_EQ(constant.ppl_uncertainty(), 0.0);
}

TEST(PerplexityStats, QuantizedLogProbsRoundTrip) {
  const auto l = random_logits(1000, 1, 3.0f);
  std::vector<uint16_t> codes(l.size());
  const QuantizedHeader h = quantize_log_probs(l, codes);
  const QuantizedLogProbs q{h.scale, h.min_log_prob, codes};
  const auto ls = log_softmax_f64(l);
  double top = ls[0];
  for (double v : ls) top = std::max(top, v);
  EXPECT_GT(h.scale, 0.0f);
  for (size_t i = 0; i < l.size(); ++i) {
    if (ls[i] > top - 16 + 1e-3) EXPECT_NEAR(q.log_prob(static_cast<int32_t>(i)), ls[i], h.scale * 0.51 + 1e-5) << i;
    else EXPECT_EQ(codes[i], 0) << i;
  }
  // A flat row: every entry is log(1/n), stored with a zero scale.
  std::vector<float> flat(8, 2.0f);
  std::vector<uint16_t> fc(8, 7);
  const QuantizedHeader fh = quantize_log_probs(flat, fc);
  EXPECT_EQ(fh.scale, 0.0f);
  EXPECT_NEAR((QuantizedLogProbs{fh.scale, fh.min_log_prob, fc}.log_prob(3)), std::log(1.0 / 8), 1e-6);
}

TEST(PerplexityStats, KlDivergenceOfAModelAgainstItsOwnBaseIsNearZero) {
  const auto l = random_logits(500, 2, 2.0f);
  std::vector<uint16_t> codes(l.size());
  const QuantizedHeader h = quantize_log_probs(l, codes);
  const TokenComparison t = compare_token(l, {h.scale, h.min_log_prob, codes}, 7);
  EXPECT_NEAR(t.kld, 0.0, 1e-4);
  EXPECT_TRUE(t.same_top);
  EXPECT_NEAR(t.nll, t.nll_base, 1e-3);
  EXPECT_NEAR(t.p_diff, 0.0, 1e-4);
}

TEST(PerplexityStats, KlDivergenceMatchesTheDefinition) {
  const auto p_logits = random_logits(400, 3, 2.0f);
  auto q_logits = p_logits;
  std::mt19937 rng(4);
  std::normal_distribution<float> noise(0.0f, 0.5f);
  for (auto& v : q_logits) v += noise(rng);
  std::vector<uint16_t> codes(p_logits.size());
  const QuantizedHeader h = quantize_log_probs(p_logits, codes);
  const int32_t target = 11;
  const TokenComparison t = compare_token(q_logits, {h.scale, h.min_log_prob, codes}, target);
  const auto lp = log_softmax_f64(p_logits), lq = log_softmax_f64(q_logits);
  double kld = 0;
  for (size_t i = 0; i < lp.size(); ++i) kld += std::exp(lp[i]) * (lp[i] - lq[i]);
  EXPECT_GT(kld, 0.01);
  EXPECT_NEAR(t.kld, kld, 1e-3 * kld + 1e-4);
  EXPECT_NEAR(t.nll, -lq[target], 1e-6);
  EXPECT_NEAR(t.nll_base, -lp[target], 1e-3);
  EXPECT_NEAR(t.p_diff, std::exp(lq[target]) - std::exp(lp[target]), 1e-4);
  size_t ap = 0, aq = 0;
  for (size_t i = 0; i < lp.size(); ++i) {
    if (lp[i] > lp[ap]) ap = i;
    if (lq[i] > lq[aq]) aq = i;
  }
  EXPECT_EQ(t.same_top, ap == aq);
  // A q whose top token differs from p's.
  auto r_logits = p_logits;
  r_logits[(ap + 1) % r_logits.size()] += 100.0f;
  EXPECT_FALSE(compare_token(r_logits, {h.scale, h.min_log_prob, codes}, target).same_top);
}

TEST(PerplexityStats, MeanErrorAndPercentiles) {
  // llama.cpp reports no error for 10 values or fewer.
  EXPECT_EQ(mean_and_error(10, 30, 5).error, 0.0);
  const MeanError m = mean_and_error(55, 385, 11);  // 0..10 once each
  EXPECT_NEAR(m.value, 5.0, 1e-12);
  EXPECT_NEAR(m.error, std::sqrt((385.0 / 11 - 25) / 10), 1e-12);
  const std::vector<double> v = {0, 1, 2, 3, 4};
  EXPECT_EQ(percentile_sorted(v, 0.0), 0.0);
  EXPECT_EQ(percentile_sorted(v, 1.0), 4.0);
  EXPECT_NEAR(percentile_sorted(v, 0.5), 2.0, 1e-12);
  EXPECT_NEAR(percentile_sorted(v, 0.9), 3.6, 1e-12);
}

TEST(PerplexityStats, KlSummary) {
  KlAccumulator acc;
  for (int i = 0; i < 100; ++i) {
    TokenComparison t;
    t.kld = i * 0.01;
    t.nll = 2.0 + 0.01 * (i % 7);
    t.nll_base = 2.0 + 0.01 * (i % 5);
    t.same_top = i % 4 != 0;
    acc.add(t);
  }
  const KlSummary s = acc.summary();
  EXPECT_EQ(s.count, 100);
  EXPECT_NEAR(s.kld.value, 0.495, 1e-12);
  EXPECT_NEAR(s.kld_max, 0.99, 1e-12);
  EXPECT_NEAR(s.kld_min, 0.0, 1e-12);
  EXPECT_NEAR(s.kld_median, 0.495, 1e-12);
  EXPECT_NEAR(s.kld_p999, 0.99 * 0.999 * 1.0 + 0.0, 1e-3);
  EXPECT_NEAR(s.same_top.value, 0.75, 1e-12);
  EXPECT_NEAR(s.same_top.error, std::sqrt(0.75 * 0.25 / 99), 1e-12);
  EXPECT_GT(s.ppl.value, s.ppl_base.value);
  EXPECT_NEAR(s.log_ppl_ratio.value, std::log(s.ppl.value) - std::log(s.ppl_base.value), 1e-12);
}

}  // namespace
}  // namespace splash::eval
