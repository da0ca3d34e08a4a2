#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "sampling/sampling_params.h"

namespace splash {
namespace {

std::string error_of(const SamplingParams& p) {
  Status s = p.validate();
  return s.ok() ? std::string("<ok>") : s.error_message();
}

TEST(SamplingParams, DefaultsAreValidAndMeanPlainSampling) {
  SamplingParams p;
  EXPECT_TRUE(p.validate().ok());
  EXPECT_EQ(p.temperature, 1.0f);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_EQ(p.top_p, 1.0f);
  EXPECT_EQ(p.min_p, 0.0f);
  EXPECT_EQ(p.repetition_penalty, 1.0f);
  EXPECT_FALSE(p.seed.has_value());
}

TEST(SamplingParams, AcceptsTheEdgesOfEveryRange) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_p = 0.0f;
  p.min_p = 1.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.penalty_last_n = -1;
  p.top_k = 0;
  EXPECT_TRUE(p.validate().ok()) << error_of(p);
  p.temperature = 2.0f;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.presence_penalty = 2.0f;
  p.frequency_penalty = -2.0f;
  p.repetition_penalty = 0.01f;
  EXPECT_TRUE(p.validate().ok()) << error_of(p);
}

TEST(SamplingParams, MessagesNameTheFieldValueAndRange) {
  struct Case {
    void (*set)(SamplingParams&);
    const char* expected;
  };
  const Case cases[] = {
      {[](SamplingParams& p) { p.temperature = 2.5f; }, "sampling: temperature = 2.5 is outside [0, 2]"},
      {[](SamplingParams& p) { p.temperature = -0.1f; }, "sampling: temperature = -0.1 is outside [0, 2]"},
      {[](SamplingParams& p) { p.top_p = 1.5f; }, "sampling: top_p = 1.5 is outside [0, 1]"},
      {[](SamplingParams& p) { p.min_p = -0.5f; }, "sampling: min_p = -0.5 is outside [0, 1]"},
      {[](SamplingParams& p) { p.presence_penalty = 3.0f; },
       "sampling: presence_penalty = 3 is outside [-2, 2]"},
      {[](SamplingParams& p) { p.frequency_penalty = -2.5f; },
       "sampling: frequency_penalty = -2.5 is outside [-2, 2]"},
      {[](SamplingParams& p) { p.top_k = -1; }, "sampling: top_k = -1 must be >= 0 (0 turns it off)"},
      {[](SamplingParams& p) { p.repetition_penalty = 0.0f; },
       "sampling: repetition_penalty = 0 must be a finite number > 0 (1 turns it off)"},
      {[](SamplingParams& p) { p.penalty_last_n = -2; },
       "sampling: penalty_last_n = -2 must be >= -1 (-1 = whole context, 0 = off)"},
  };
  for (const auto& c : cases) {
    SamplingParams p;
    c.set(p);
    EXPECT_EQ(error_of(p), c.expected);
  }
}

TEST(SamplingParams, NaNAndInfinityAreRejected) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  SamplingParams p;
  p.temperature = nan;
  EXPECT_NE(error_of(p).find("temperature = nan"), std::string::npos) << error_of(p);
  p = {};
  p.top_p = nan;
  EXPECT_NE(error_of(p).find("top_p"), std::string::npos);
  p = {};
  p.min_p = nan;
  EXPECT_NE(error_of(p).find("min_p"), std::string::npos);
  p = {};
  p.repetition_penalty = inf;
  EXPECT_NE(error_of(p).find("repetition_penalty = inf"), std::string::npos) << error_of(p);
  p = {};
  p.repetition_penalty = nan;
  EXPECT_NE(error_of(p).find("repetition_penalty"), std::string::npos);
  p = {};
  p.presence_penalty = -inf;
  EXPECT_NE(error_of(p).find("presence_penalty"), std::string::npos);
}

}  // namespace
}  // namespace splash
