// Speculative verification (spec/verify.h): greedy = the argmax walk; sampling = exact rejection over
// the processed distribution, checked by chi-square tests on a small vocabulary (fixed seeds), with a
// deliberately biased verifier that the same test must reject (so the test can fail).
#include "spec/verify.h"

#include <cmath>
#include <map>
#include <vector>

#include "gtest/gtest.h"

namespace splash {
namespace {

// Chi-square statistic of observed counts against expected probabilities (cells with an expected
// count below 5 pooled into one), and the 0.999 quantile of its distribution (Wilson-Hilferty).
struct ChiSquare {
  double stat = 0;
  double critical = 0;
};
ChiSquare chi_square(const std::map<int, int64_t>& observed, const std::map<int, double>& expected_p, int64_t n) {
  double stat = 0, pooled_e = 0;
  int64_t pooled_o = 0;
  int cells = 0;
  for (const auto& [cell, p] : expected_p) {
    const double e = p * static_cast<double>(n);
    auto it = observed.find(cell);
    const int64_t o = it == observed.end() ? 0 : it->second;
    if (e < 5) {
      pooled_e += e;
      pooled_o += o;
      continue;
    }
    stat += (o - e) * (o - e) / e;
    ++cells;
  }
  if (pooled_e > 0) {
    stat += (pooled_o - pooled_e) * (pooled_o - pooled_e) / std::max(pooled_e, 1e-9);
    ++cells;
  }
  const double df = cells - 1;
  const double z = 3.0902;  // 0.999 normal quantile
  const double a = 2.0 / (9.0 * df);
  return {stat, df * std::pow(1 - a + z * std::sqrt(a), 3)};
}

const std::vector<float> kLogits = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, 1.5f, 0.2f, -0.3f};
const std::vector<int32_t> kPrompt = {1, 3};

SamplingParams sampling_params() {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 6;    // two tokens never survive
  p.top_p = 0.97f;
  p.repetition_penalty = 1.6f;
  p.presence_penalty = 0.4f;
  p.penalty_last_n = -1;
  p.seed = 1234;
  return p;
}

// The distribution the target samples from after `history` (prompt + generated).
std::map<int, double> target_dist(const std::vector<int32_t>& generated) {
  Sampler s = *Sampler::create(sampling_params());
  s.accept_prompt(kPrompt);
  for (int32_t t : generated) s.accept(t);
  std::vector<float> l = kLogits;
  auto d = s.probabilities(l);
  EXPECT_TRUE(d.ok());
  std::map<int, double> out;
  for (const TokenProb& tp : *d) out[tp.id] = tp.p;
  return out;
}

// The bug the test must catch: on rejection, draw from p itself (the proposal not removed).
int32_t biased_verify(Sampler& sampler, std::span<float> logits, int32_t proposal) {
  auto dist = *sampler.probabilities(logits);
  for (const TokenProb& tp : dist)
    if (tp.id == proposal && sampler.uniform() < tp.p) return proposal;
  return sampler.draw(dist);
}

using Verifier = int32_t (*)(Sampler&, std::span<float>, int32_t);
int32_t exact_verify(Sampler& sampler, std::span<float> logits, int32_t proposal) {
  return *verify_row(sampler, logits, proposal);
}

// Two verify rows with proposals (d1, d2): the joint distribution of the two committed tokens must be
// p(t1) * p(t2 | t1 in the penalty history), whatever d1 and d2 are. After a rejection at row 1 the
// second token comes from plain sampling (the next step of the decode loop).
ChiSquare two_row_chi_square(Verifier verify, int32_t d1, int32_t d2, int64_t n) {
  Sampler s = *Sampler::create(sampling_params());
  std::map<int, int64_t> observed;
  for (int64_t trial = 0; trial < n; ++trial) {
    s.clear_history();
    s.accept_prompt(kPrompt);
    std::vector<float> l = kLogits;
    const int32_t t1 = verify(s, l, d1);
    s.accept(t1);
    l = kLogits;
    const int32_t t2 = verify(s, l, t1 == d1 ? d2 : -1);
    ++observed[t1 * 8 + t2];
  }
  std::map<int, double> expected;
  for (const auto& [t1, p1] : target_dist({}))
    for (const auto& [t2, p2] : target_dist({t1})) expected[t1 * 8 + t2] = p1 * p2;
  for (const auto& [cell, count] : observed) EXPECT_GT(expected.count(cell), 0u) << "impossible pair " << cell;
  return chi_square(observed, expected, n);
}

TEST(Verify, SamplingMatchesTargetDistribution) {
  // Likely, unlikely and filtered-out (top_k) proposals; 0 is the most likely token.
  const int32_t cases[][2] = {{0, 0}, {0, 5}, {2, 1}, {4, 7}, {3, 0}};
  for (const auto& c : cases) {
    const ChiSquare r = two_row_chi_square(exact_verify, c[0], c[1], 40000);
    EXPECT_LT(r.stat, r.critical) << "proposals " << c[0] << "," << c[1];
  }
}

TEST(Verify, BiasedVerifierFailsTheSameTest) {
  const ChiSquare r = two_row_chi_square(biased_verify, 0, 5, 40000);
  EXPECT_GT(r.stat, r.critical);
}

TEST(Verify, AcceptanceRateIsTargetProbability) {
  // A proposal is accepted exactly when the committed token equals it: rate p(d) (no residual mass).
  Sampler s = *Sampler::create(sampling_params());
  const auto p = target_dist({});
  int64_t accepted = 0;
  const int64_t n = 40000;
  for (int64_t i = 0; i < n; ++i) {
    s.clear_history();
    s.accept_prompt(kPrompt);
    std::vector<float> l = kLogits;
    accepted += *verify_row(s, l, 5) == 5;
  }
  const double rate = static_cast<double>(accepted) / n, want = p.at(5);
  EXPECT_NEAR(rate, want, 4 * std::sqrt(want * (1 - want) / n));
}

TEST(Verify, GreedyIsArgmaxOfPenalizedRow) {
  SamplingParams g;
  g.temperature = 0;
  g.repetition_penalty = 3.0f;
  Sampler s = *Sampler::create(g);
  s.accept_prompt(std::vector<int32_t>{0});  // penalizes token 0 (logit 2 -> 0.67): 5 (1.5) wins
  std::vector<float> l = kLogits;
  EXPECT_EQ(*verify_row(s, l, 5), 5);
  l = kLogits;
  EXPECT_EQ(*verify_row(s, l, 0), 5);  // a wrong proposal gives the target's token
  l = kLogits;
  EXPECT_EQ(*verify_row(s, l, -1), 5);
}

TEST(Verify, NanLogitsAreAnError) {
  Sampler s = *Sampler::create(sampling_params());
  std::vector<float> l = kLogits;
  l[2] = std::nanf("");
  EXPECT_FALSE(verify_row(s, l, 2).ok());
}

}  // namespace
}  // namespace splash
