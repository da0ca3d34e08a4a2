#include <gtest/gtest.h>

#include "sampling/rng.h"

namespace splash {
namespace {

// Reference values from an independent Python transcription of the published SplitMix64 and
// xoshiro256** algorithms (not of our C++). If one of these changes, every seeded request in the
// field changes its output: that must be a deliberate, announced decision.
TEST(Rng, SplitMix64MatchesThePublishedSequence) {
  uint64_t state = 0;
  EXPECT_EQ(splitmix64_next(state), 0xe220a8397b1dcdafull);  // the well-known first output for 0
}

TEST(Rng, Xoshiro256StarStarSeededBySplitMix64) {
  Rng a(0);
  EXPECT_EQ(a.next(), 0x99ec5f36cb75f2b4ull);
  EXPECT_EQ(a.next(), 0xbf6e1f784956452aull);
  EXPECT_EQ(a.next(), 0x1a5f849d4933e6e0ull);
  EXPECT_EQ(a.next(), 0x6aa594f1262d2d2cull);
  Rng b(42);
  EXPECT_EQ(b.next(), 0x15780b2e0c2ec716ull);
  EXPECT_EQ(b.next(), 0x6104d9866d113a7eull);
  EXPECT_EQ(b.next(), 0xae17533239e499a1ull);
  EXPECT_EQ(b.next(), 0xecb8ad4703b360a1ull);
}

TEST(Rng, UniformUsesTheTop53Bits) {
  Rng a(42);
  EXPECT_EQ(a.uniform(), static_cast<double>(0x15780b2e0c2ec716ull >> 11) / 9007199254740992.0);
  // Mean and range over many draws.
  double sum = 0.0, lo = 1.0, hi = 0.0;
  for (int i = 0; i < 100000; ++i) {
    const double u = a.uniform();
    sum += u;
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(hi, 1.0);
}

TEST(Rng, CopyIsACheckpointOfTheStream) {
  Rng a(7);
  a.next();
  Rng b = a;
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.next(), b.next());
}

}  // namespace
}  // namespace splash
