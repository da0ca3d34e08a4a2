#include "backend/cpu/prefetch_tuner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

namespace splash::cpu {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// Runs `products` products of `bytes` through the tuner against a host whose bandwidth (bytes per
// ns) at each distance is `rate(distance)`, times a noise factor in [1 - noise, 1 + noise]. Returns
// how many of them ran on a distance other than the tuner's current one at that moment.
int64_t drive(PrefetchTuner& t, int64_t products, const std::function<double(int64_t)>& rate, double noise = 0,
              int64_t bytes = 2 * kMiB, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> jitter(1 - noise, 1 + noise);
  int64_t off_current = 0;
  for (int64_t i = 0; i < products; ++i) {
    const int64_t current = t.current();
    const PrefetchTuner::Ticket ticket = t.begin(bytes);
    if (ticket.bytes != current) ++off_current;
    const double ns = static_cast<double>(bytes) / (rate(ticket.bytes) * jitter(rng));
    t.end(ticket, bytes, static_cast<int64_t>(std::llround(ns)));
  }
  return off_current;
}

// A host whose best distance is `best`: 1 GB/s less per ladder step away from it (of ~30).
std::function<double(int64_t)> peaked_at(int64_t best) {
  return [best](int64_t d) {
    int di = 0, bi = 0;
    for (int i = 0; i < PrefetchTuner::kSteps; ++i) {
      if (PrefetchTuner::kLadder[i] == d) di = i;
      if (PrefetchTuner::kLadder[i] == best) bi = i;
    }
    return 30.0 - std::abs(di - bi);
  };
}

TEST(PrefetchTuner, StartsOnTheNearestLadderStep) {
  EXPECT_EQ(PrefetchTuner(1024).current(), 1024);
  EXPECT_EQ(PrefetchTuner(2000).current(), 2048);
  EXPECT_EQ(PrefetchTuner(0).current(), PrefetchTuner::kLadder[0]);
  EXPECT_EQ(PrefetchTuner(int64_t{1} << 30).current(), PrefetchTuner::kLadder[PrefetchTuner::kSteps - 1]);
}

// Products one trial round takes (three steps) and one move with the hold after it.
constexpr int64_t kRound = 3 * PrefetchTuner::kSamplesPerStep;
constexpr int64_t kMove = kRound + PrefetchTuner::kHoldAfterMove;

TEST(PrefetchTuner, ClimbsToTheFastestDistance) {
  // From 2048 down to 768 is three moves, each one trial round and the short hold after it (with 96
  // samples per step about 1,250 products: 11 tokens of a 28-layer model).
  PrefetchTuner t(2048);
  drive(t, 3 * kMove + kRound, peaked_at(768), 0.02);
  EXPECT_EQ(t.current(), 768);
  EXPECT_EQ(t.moves(), 3);
  PrefetchTuner up(512);
  drive(up, 5 * kMove + kRound, peaked_at(3072), 0.02);
  EXPECT_EQ(up.current(), 3072);
  EXPECT_EQ(up.moves(), 5);
}

// Trial rounds finished within `products` products on a host whose best step never changes: the
// first after the warm-up hold, then after holds of kHoldAfterStay, doubling up to kMaxHold.
int64_t steady_rounds(int64_t products) {
  int64_t at = PrefetchTuner::kHoldAfterMove, hold = PrefetchTuner::kHoldAfterStay, n = 0;
  while (at + kRound <= products) {
    ++n;
    at += kRound + hold;
    hold = std::min(2 * hold, PrefetchTuner::kMaxHold);
  }
  return n;
}

TEST(PrefetchTuner, StaysOnTheBestAndTriesLessAndLess) {
  // Once on the best step, each stay doubles the hold before the next round (up to kMaxHold), and
  // two thirds of a round run on a neighbour: over 200,000 products (about 1,800 tokens of a
  // 28-layer model) under 1% of them.
  PrefetchTuner t(1024);
  const int64_t products = 200000;
  const int64_t off = drive(t, products, peaked_at(1024), 0.02);
  EXPECT_EQ(t.current(), 1024);
  EXPECT_EQ(t.moves(), 0);
  EXPECT_EQ(t.rounds(), steady_rounds(products));
  EXPECT_LT(t.rounds(), products / (kRound + PrefetchTuner::kHoldAfterStay));  // fewer than without the doubling
  EXPECT_LT(off, products / 100);
}

TEST(PrefetchTuner, NoiseWithinTheMarginDoesNotMoveIt) {
  // Every distance equally fast, 1% jitter per product: averaged over a step's samples a neighbour
  // never looks kMoveMargin (2%) faster.
  PrefetchTuner t(1024);
  drive(t, 50000, [](int64_t) { return 30.0; }, 0.01);
  EXPECT_EQ(t.current(), 1024);
  EXPECT_EQ(t.moves(), 0);
}

TEST(PrefetchTuner, FollowsTheHostWhenTheBestMoves) {
  // After a long steady spell (the hold at kMaxHold) the host changes and 2048 becomes best: the
  // next round, within kMaxHold products, finds 1536 and the climb goes on to 2048.
  PrefetchTuner t(1024);
  drive(t, 100000, peaked_at(1024), 0.02);
  ASSERT_EQ(t.current(), 1024);
  const auto host = peaked_at(2048);
  for (int64_t i = 0; t.moves() < 2 && i < PrefetchTuner::kMaxHold + 2 * kMove + kRound; ++i)
    drive(t, 1, host, 0.02, 2 * kMiB, static_cast<uint32_t>(i));  // one product at a time: stop at the second move
  EXPECT_EQ(t.current(), 2048);
  EXPECT_EQ(t.moves(), 2);
  // A move starts the doubling over: the hold after the move, then one round that stays on 2048,
  // after which the hold is kHoldAfterStay again (not kMaxHold), so a change back to 1024 is found
  // as soon.
  drive(t, PrefetchTuner::kHoldAfterMove + kRound, peaked_at(2048), 0.02);
  ASSERT_EQ(t.current(), 2048);
  ASSERT_EQ(t.moves(), 2);
  drive(t, PrefetchTuner::kHoldAfterStay + 2 * kMove, peaked_at(1024), 0.02);
  EXPECT_EQ(t.current(), 1024);
}

TEST(PrefetchTuner, PreemptedProductsDoNotDecideARound) {
  // 1024 is best (its neighbours 3% slower), but in every round the first 6 products on 1024 take
  // 1000x their time (the OS ran something else meanwhile): the step's trimmed mean drops them, so
  // the tuner stays. An untrimmed mean (-6%) or a plain bytes / time sum would move it.
  PrefetchTuner t(1024);
  const auto host = peaked_at(1024);
  uint64_t slowed_round = 0;
  int slowed = 0;
  for (int64_t i = 0; i < 20000; ++i) {
    const PrefetchTuner::Ticket ticket = t.begin(2 * kMiB);
    double ns = static_cast<double>(2 * kMiB) / host(ticket.bytes);
    if (ticket.slot >= 0 && ticket.bytes == 1024) {
      if (ticket.round != slowed_round) slowed = 0;
      slowed_round = ticket.round;
      if (slowed < 6) {
        ++slowed;
        ns *= 1000;
      }
    }
    t.end(ticket, 2 * kMiB, static_cast<int64_t>(ns));
  }
  EXPECT_GT(t.rounds(), 2);
  EXPECT_EQ(t.moves(), 0);
  EXPECT_EQ(t.current(), 1024);
}

TEST(PrefetchTuner, SmallAndHugeProductsAreNotTimed) {
  PrefetchTuner t(1024);
  for (int64_t bytes : {PrefetchTuner::kMinTimedBytes - 1, PrefetchTuner::kMaxTimedBytes + 1}) {
    for (int i = 0; i < 500; ++i) {
      const PrefetchTuner::Ticket ticket = t.begin(bytes);
      EXPECT_EQ(ticket.slot, -1);
      EXPECT_EQ(ticket.bytes, 1024);
      t.end(ticket, bytes, 1000);
    }
  }
  EXPECT_EQ(t.rounds(), 0);
}

TEST(PrefetchTuner, LateReportsOfAnOlderRoundAreDropped) {
  // Products that began in one round and report after it ended (other threads') must not count in
  // the next one. More of them than a step's trim, all absurdly fast: if counted, their step would win.
  PrefetchTuner t(1024);
  const auto host = peaked_at(1024);
  drive(t, PrefetchTuner::kHoldAfterMove, host);  // the first products only warm up
  ASSERT_EQ(t.rounds(), 0);
  std::vector<PrefetchTuner::Ticket> stale;
  while (t.rounds() == 0) {
    const PrefetchTuner::Ticket ticket = t.begin(2 * kMiB);
    ASSERT_GE(ticket.slot, 0);
    if (ticket.slot == 0 && static_cast<int>(stale.size()) <= PrefetchTuner::kTrim) {
      stale.push_back(ticket);  // reported late, below
      continue;
    }
    t.end(ticket, 2 * kMiB, static_cast<int64_t>(2 * kMiB / host(ticket.bytes)));
  }
  drive(t, PrefetchTuner::kHoldAfterStay, host);  // the hold; the next product starts round 2
  const PrefetchTuner::Ticket fresh = t.begin(2 * kMiB);
  ASSERT_GT(fresh.round, stale.front().round);
  for (const auto& ticket : stale) t.end(ticket, 64 * kMiB, 1);
  t.end(fresh, 2 * kMiB, static_cast<int64_t>(2 * kMiB / host(fresh.bytes)));
  drive(t, kRound, host);
  EXPECT_EQ(t.rounds(), 2);
  EXPECT_EQ(t.current(), 1024);
  EXPECT_EQ(t.moves(), 0);
}

}  // namespace
}  // namespace splash::cpu
