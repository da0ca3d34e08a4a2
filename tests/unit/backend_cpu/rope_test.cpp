#include "backend/cpu/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <vector>

namespace splash {
namespace {

// Direct evaluation of the published formulas, in double, independent of the table code.
std::vector<double> rope_direct(const std::vector<float>& x, int n_head, int hd, int n_rot, double theta,
                                bool neox, int64_t pos, double pos_scale = 1.0) {
  std::vector<double> y(x.begin(), x.end());
  for (int h = 0; h < n_head; ++h) {
    for (int i = 0; i < n_rot / 2; ++i) {
      const double a = (pos / pos_scale) * std::pow(theta, -2.0 * i / n_rot);
      const int i0 = neox ? i : 2 * i;
      const int i1 = neox ? i + n_rot / 2 : 2 * i + 1;
      const double x0 = x[h * hd + i0], x1 = x[h * hd + i1];
      y[h * hd + i0] = x0 * std::cos(a) - x1 * std::sin(a);
      y[h * hd + i1] = x0 * std::sin(a) + x1 * std::cos(a);
    }
  }
  return y;
}

TEST(Rope, BothConventionsMatchDirectFormula) {
  std::mt19937 rng(8);
  std::normal_distribution<float> dist;
  struct C { int hd, n_rot; double theta; RopeStyle style; };
  for (const C& c : {C{64, 64, 10000.0, RopeStyle::kInterleaved}, C{128, 128, 1000000.0, RopeStyle::kNeox},
                     C{64, 32, 10000.0, RopeStyle::kNeox}, C{48, 16, 500000.0, RopeStyle::kInterleaved}}) {
    const int n_head = 3;
    auto table = RopeTable::create({c.hd, c.n_rot, c.theta, c.style}, 0, 40000);
    ASSERT_TRUE(table.ok()) << table.error_message();
    const std::vector<int32_t> pos{0, 1, 17, 4095, 39999};
    std::vector<float> x(pos.size() * n_head * c.hd);
    for (float& v : x) v = dist(rng);
    std::vector<float> y = x;
    rope_apply(y.data(), static_cast<int64_t>(pos.size()), n_head, pos.data(), *table);
    for (size_t t = 0; t < pos.size(); ++t) {
      std::vector<float> xt(x.begin() + t * n_head * c.hd, x.begin() + (t + 1) * n_head * c.hd);
      auto want = rope_direct(xt, n_head, c.hd, c.n_rot, c.theta, c.style == RopeStyle::kNeox, pos[t]);
      for (int i = 0; i < n_head * c.hd; ++i) {
        ASSERT_NEAR(y[t * n_head * c.hd + i], want[static_cast<size_t>(i)], 2e-6)
            << "hd " << c.hd << " n_rot " << c.n_rot << " pos " << pos[t] << " i " << i;
      }
      // Dims past n_rot pass through untouched.
      for (int h = 0; h < n_head; ++h) {
        for (int d = c.n_rot; d < c.hd; ++d) EXPECT_EQ(y[(t * n_head + h) * c.hd + d], x[(t * n_head + h) * c.hd + d]);
      }
    }
  }
}

TEST(Rope, ConventionsDifferAndRangeOffsetWorks) {
  auto a = RopeTable::create({8, 0, 10000.0, RopeStyle::kNeox}, 100, 200);
  auto b = RopeTable::create({8, 0, 10000.0, RopeStyle::kInterleaved}, 100, 200);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<float> x{1, 2, 3, 4, 5, 6, 7, 8}, xa = x, xb = x;
  const int32_t p = 150;
  rope_apply(xa.data(), 1, 1, &p, *a);
  rope_apply(xb.data(), 1, 1, &p, *b);
  EXPECT_NE(xa, xb);
  auto want = rope_direct(x, 1, 8, 8, 10000.0, true, 150);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(xa[i], want[i], 1e-5);
}

TEST(Rope, LinearAndLlama3Scaling) {
  auto lin = RopeTable::create({16, 0, 10000.0, RopeStyle::kNeox, RopeScaling::kLinear, 4.0}, 0, 100);
  ASSERT_TRUE(lin.ok());
  std::vector<float> x(16, 1.0f);
  const int32_t p = 40;
  rope_apply(x.data(), 1, 1, &p, *lin);
  auto want = rope_direct(std::vector<float>(16, 1.0f), 1, 16, 16, 10000.0, true, 40, 4.0);
  for (int i = 0; i < 16; ++i) EXPECT_NEAR(x[i], want[i], 1e-6);

  // Llama 3.1 (factor 8, low 1, high 4, original 8192), head_dim 128, theta 500000: the
  // highest frequencies stay, the lowest are divided by 8, the band between interpolates.
  RopeParams p3{128, 0, 500000.0, RopeStyle::kNeox, RopeScaling::kLlama3, 8.0, 1.0, 4.0, 8192};
  auto t3 = RopeTable::create(p3, 0, 1);
  ASSERT_TRUE(t3.ok());
  const auto& f = t3->inv_freq();
  EXPECT_DOUBLE_EQ(f[0], 1.0);
  const double raw63 = std::pow(500000.0, -126.0 / 128);
  EXPECT_NEAR(f[63], raw63 / 8.0, 1e-15);
  for (int i = 0; i < 64; ++i) {
    const double raw = std::pow(500000.0, -2.0 * i / 128);
    const double wavelen = 2 * std::numbers::pi / raw;
    if (wavelen < 8192.0 / 4) {
      EXPECT_DOUBLE_EQ(f[i], raw);
    }
    if (wavelen > 8192.0) {
      EXPECT_NEAR(f[i], raw / 8, 1e-12 * raw);
    }
    if (wavelen >= 2048.0 && wavelen <= 8192.0) {
      EXPECT_LE(f[i], raw);
      EXPECT_GE(f[i], raw / 8);
    }
  }
}

TEST(Rope, BadParametersAreErrors) {
  EXPECT_FALSE(RopeTable::create({64, 63, 10000.0}, 0, 10).ok());
  EXPECT_FALSE(RopeTable::create({64, 128, 10000.0}, 0, 10).ok());
  EXPECT_FALSE(RopeTable::create({64, 0, -1.0}, 0, 10).ok());
  EXPECT_FALSE(RopeTable::create({64, 0, 10000.0}, 10, 10).ok());
  EXPECT_FALSE(RopeTable::create({0, 0, 10000.0}, 0, 10).ok());
  auto e = RopeTable::create({64, 63, 10000.0}, 0, 10);
  EXPECT_NE(e.error_message().find("n_rot"), std::string::npos);
}

}  // namespace
}  // namespace splash
