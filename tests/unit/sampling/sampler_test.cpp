#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "sampling/sampler.h"
#include "test_util.h"

namespace splash {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

Sampler make(SamplingParams p) {
  auto s = Sampler::create(p);
  SPLASH_CHECK_MSG(s.ok(), s.error_message());
  return std::move(s).value();
}

SamplingParams seeded(float t, uint64_t seed) {
  SamplingParams p;
  p.temperature = t;
  p.seed = seed;
  return p;
}

const std::vector<float> kRow8 = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 0.0f, 1.5f, -0.5f};

TEST(Sampler, CreateRejectsInvalidParams) {
  SamplingParams p;
  p.top_p = 2.0f;
  auto s = Sampler::create(p);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error_message(), "sampling: top_p = 2 is outside [0, 1]");
}

TEST(Sampler, GreedyIsArgmaxOnRandomRows) {
  Sampler s = make(seeded(0.0f, 1));
  for (uint32_t seed = 0; seed < 50; ++seed) {
    auto row = testing::normal_logits(32000, seed, 2.0);
    if (seed % 2 == 0) row[seed * 100 + 3] = row[seed * 100 + 1] = 50.0f;  // a tie: lowest id
    const auto expected = std::max_element(row.begin(), row.end()) - row.begin();
    auto tok = s.sample(row);
    ASSERT_TRUE(tok.ok());
    EXPECT_EQ(*tok, expected);
  }
}

TEST(Sampler, GreedyIgnoresTopKTopPMinPAndSeed) {
  SamplingParams p = seeded(0.0f, 5);
  p.top_k = 3;
  p.top_p = 0.1f;
  p.min_p = 0.9f;
  Sampler s = make(p);
  auto row = kRow8;
  EXPECT_EQ(*s.sample(row), 4);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
  Sampler a = make(seeded(1.0f, 2024));
  Sampler b = make(seeded(1.0f, 2024));
  Sampler c = make(seeded(1.0f, 2025));
  const auto base = testing::normal_logits(4096, 9, 1.0);
  int differ = 0;
  for (int i = 0; i < 200; ++i) {
    auto r1 = base, r2 = base, r3 = base;
    const int32_t ta = *a.sample(r1);
    EXPECT_EQ(ta, *b.sample(r2));
    differ += ta != *c.sample(r3);
  }
  EXPECT_GT(differ, 150);  // nearly flat over 4096 tokens: different streams rarely agree
}

// The seeded stream is part of the product's contract ("seed reproduces the output"). These
// sequences were computed by an independent Python transcription of xoshiro256** + inverse-CDF over
// softmax (double precision), not by this code.
TEST(Sampler, GoldenSequenceForAFixedSeed) {
  Sampler s = make(seeded(0.8f, 1234));
  std::vector<int32_t> got;
  for (int i = 0; i < 20; ++i) {
    auto row = kRow8;
    got.push_back(*s.sample(row));
  }
  EXPECT_EQ(got, (std::vector<int32_t>{0, 4, 4, 4, 1, 5, 4, 1, 4, 4, 4, 1, 1, 4, 4, 4, 4, 6, 6, 4}));

  SamplingParams p = seeded(1.3f, 99);
  p.top_k = 5;
  p.top_p = 0.9f;
  Sampler t = make(p);
  got.clear();
  for (int i = 0; i < 20; ++i) {
    auto row = kRow8;
    got.push_back(*t.sample(row));
  }
  EXPECT_EQ(got, (std::vector<int32_t>{4, 4, 4, 6, 4, 1, 1, 0, 6, 4, 4, 1, 1, 1, 4, 4, 1, 6, 1, 4}));
}

TEST(Sampler, SampleEqualsDrawOfProbabilitiesFromTheSameState) {
  SamplingParams p = seeded(0.9f, 77);
  p.top_k = 50;
  p.top_p = 0.95f;
  p.repetition_penalty = 1.3f;
  Sampler a = make(p);
  a.accept_prompt(std::vector<int32_t>{1, 2, 3});
  for (int i = 0; i < 50; ++i) {
    Sampler b = a.clone();
    auto r1 = testing::normal_logits(1000, i, 2.0);
    auto r2 = r1;
    const int32_t t1 = *a.sample(r1);
    auto dist = b.probabilities(r2);
    ASSERT_TRUE(dist.ok());
    std::vector<TokenProb> copy(dist->begin(), dist->end());
    EXPECT_EQ(t1, b.draw(copy));
    EXPECT_EQ(r1, r2);  // both penalized the same way
    a.accept(t1);
  }
}

TEST(Sampler, UnsetSeedIsRandomAndReported) {
  SamplingParams p;
  Sampler a = make(p), b = make(p);
  EXPECT_NE(a.seed(), b.seed());  // 2^-64 chance of a false failure
  // The reported seed reproduces the stream.
  Sampler c = make(seeded(1.0f, a.seed()));
  for (int i = 0; i < 20; ++i) {
    auto r1 = kRow8, r2 = kRow8;
    EXPECT_EQ(*a.sample(r1), *c.sample(r2));
  }
}

TEST(Sampler, NegativeInfinityIsNeverSampled) {
  Sampler s = make(seeded(2.0f, 3));
  std::vector<float> row(64, kNegInf);
  row[5] = -30.0f;
  row[40] = 0.0f;
  row[63] = -3.0f;
  int n5 = 0;
  for (int i = 0; i < 20000; ++i) {
    auto r = row;
    const int32_t t = *s.sample(r);
    ASSERT_TRUE(t == 5 || t == 40 || t == 63) << t;
    n5 += t == 5;
  }
  EXPECT_LT(n5, 5);  // exp(-15) relative weight
}

TEST(Sampler, NaNIsAnErrorAndLeavesTheStreamWhereItWas) {
  Sampler a = make(seeded(1.0f, 8));
  Sampler b = make(seeded(1.0f, 8));
  auto bad = kRow8;
  bad[6] = std::numeric_limits<float>::quiet_NaN();
  auto r = a.sample(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error_message(), "sampling: logit of token 6 is NaN");
  for (int i = 0; i < 10; ++i) {
    auto r1 = kRow8, r2 = kRow8;
    EXPECT_EQ(*a.sample(r1), *b.sample(r2));
  }
}

// --- penalties

TEST(Penalties, ExactEffectOnChosenLogits) {
  SamplingParams p = seeded(0.0f, 1);
  p.repetition_penalty = 2.0f;
  p.penalty_last_n = -1;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  Sampler s = make(p);
  s.accept_prompt(std::vector<int32_t>{0, 1, 1});
  s.accept(2);
  s.accept(2);
  s.accept(5);
  std::vector<float> row = {2.0f, -2.0f, 1.0f, 0.5f, -1.0f, 0.0f, 4.0f};
  ASSERT_TRUE(s.sample(row).ok());
  EXPECT_FLOAT_EQ(row[0], 1.0f);    // prompt token, positive: divided
  EXPECT_FLOAT_EQ(row[1], -4.0f);   // prompt token twice, negative: multiplied once
  EXPECT_FLOAT_EQ(row[2], -0.5f);   // generated twice: 1/2 - 0.5 - 0.25*2
  EXPECT_FLOAT_EQ(row[3], 0.5f);    // never seen
  EXPECT_FLOAT_EQ(row[4], -1.0f);   // never seen
  EXPECT_FLOAT_EQ(row[5], -0.75f);  // generated once, 0 * 2 = 0, then - 0.5 - 0.25
  EXPECT_FLOAT_EQ(row[6], 4.0f);
}

TEST(Penalties, PresenceAndFrequencyCountGeneratedTokensOnly) {
  SamplingParams p = seeded(0.0f, 1);
  p.presence_penalty = 1.0f;
  p.frequency_penalty = 1.0f;
  Sampler s = make(p);
  s.accept_prompt(std::vector<int32_t>{0, 0, 0});
  s.accept(1);
  std::vector<float> row = {3.0f, 3.0f, 0.0f};
  ASSERT_TRUE(s.sample(row).ok());
  EXPECT_FLOAT_EQ(row[0], 3.0f);
  EXPECT_FLOAT_EQ(row[1], 1.0f);
  EXPECT_EQ(s.history().generated_count(1), 1);
  EXPECT_EQ(s.history().generated_count(0), 0);
}

TEST(Penalties, RepetitionWindowSlides) {
  SamplingParams p = seeded(0.0f, 1);
  p.repetition_penalty = 2.0f;
  p.penalty_last_n = 2;
  Sampler s = make(p);
  s.accept_prompt(std::vector<int32_t>{0, 1});
  s.accept(2);  // window is now {1, 2}
  std::vector<float> row = {4.0f, 4.0f, 4.0f, 4.0f};
  ASSERT_TRUE(s.sample(row).ok());
  EXPECT_EQ(row, (std::vector<float>{4.0f, 2.0f, 2.0f, 4.0f}));
  EXPECT_EQ(s.history().window_count(0), 0);

  p.penalty_last_n = 0;  // off
  Sampler off = make(p);
  off.accept(1);
  row = {4.0f, 4.0f};
  ASSERT_TRUE(off.sample(row).ok());
  EXPECT_EQ(row, (std::vector<float>{4.0f, 4.0f}));
}

TEST(Penalties, ChangeTheGreedyChoice) {
  SamplingParams p = seeded(0.0f, 1);
  p.repetition_penalty = 1.5f;
  Sampler s = make(p);
  std::vector<float> row = {1.0f, 1.2f};
  EXPECT_EQ(*s.sample(row), 1);
  s.accept(1);
  row = {1.0f, 1.2f};
  EXPECT_EQ(*s.sample(row), 0);  // 1.2 / 1.5 = 0.8 < 1.0
}

TEST(Penalties, HistoryOutsideTheRowIsIgnored) {
  SamplingParams p = seeded(0.0f, 1);
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 1.0f;
  Sampler s = make(p);
  s.accept_prompt(std::vector<int32_t>{-1, 100000});
  s.accept(7);
  std::vector<float> row = {1.0f, 2.0f};
  EXPECT_EQ(*s.sample(row), 1);
  EXPECT_EQ(row, (std::vector<float>{1.0f, 2.0f}));
}

TEST(Penalties, CloneCheckpointsHistory) {
  SamplingParams p = seeded(0.0f, 1);
  p.frequency_penalty = 1.0f;
  Sampler a = make(p);
  a.accept(0);
  Sampler b = a.clone();
  a.accept(0);
  std::vector<float> ra = {5.0f}, rb = {5.0f};
  ASSERT_TRUE(a.sample(ra).ok());
  ASSERT_TRUE(b.sample(rb).ok());
  EXPECT_FLOAT_EQ(ra[0], 3.0f);
  EXPECT_FLOAT_EQ(rb[0], 4.0f);
}

}  // namespace
}  // namespace splash
