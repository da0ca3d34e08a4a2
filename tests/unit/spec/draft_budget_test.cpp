// DraftBudget: the proposal schedule that bounds what rejected proposals cost (spec/draft_budget.h).
#include "spec/draft_budget.h"

#include <vector>

#include "gtest/gtest.h"

namespace splash {
namespace {

constexpr int kMax = 7;  // block 8

// Runs `steps` steps of a drafter whose proposals are all accepted (hit) or all rejected (miss);
// returns the proposal count of every step (0 = a plain step).
std::vector<int> run(DraftBudget& b, int steps, bool hit) {
  std::vector<int> asked;
  for (int i = 0; i < steps; ++i) {
    const int k = b.next(kMax);
    asked.push_back(k);
    if (k > 0) b.update(k, hit ? k : 0, kMax);
  }
  return asked;
}

TEST(DraftBudget, AGoodDrafterReachesTheWholeBlockOnItsSecondStep) {
  DraftBudget b;
  EXPECT_EQ(run(b, 4, true), (std::vector<int>{4, 7, 7, 7}));
}

TEST(DraftBudget, PartialAcceptanceKeepsTheCapAboveWhatWasAccepted) {
  DraftBudget b;
  EXPECT_EQ(b.next(kMax), 4);
  b.update(4, 4, kMax);
  EXPECT_EQ(b.next(kMax), 7);
  b.update(7, 3, kMax);  // 3 of 7: keep 7 (the next step may accept more)
  EXPECT_EQ(b.next(kMax), 7);
  b.update(7, 0, kMax);  // nothing accepted: a quarter
  EXPECT_EQ(b.next(kMax), 1);
  b.update(1, 1, kMax);  // a hit doubles again
  EXPECT_EQ(b.next(kMax), 2);
  b.update(2, 1, kMax);  // 1 of 2: at least accepted + 1
  EXPECT_EQ(b.next(kMax), 2);
}

TEST(DraftBudget, ADrafterThatNeverHitsCostsAProbeRowPer33Tokens) {
  DraftBudget b;
  const std::vector<int> asked = run(b, 300, false);
  // 4 rows, then 1, then probes after pauses of 2, 8, 32, 32, ...
  const std::vector<int> head = {4, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  EXPECT_EQ(std::vector<int>(asked.begin(), asked.begin() + head.size()), head);
  int rows = 0;
  std::vector<size_t> probes;
  for (size_t i = 0; i < asked.size(); ++i) {
    rows += asked[i];
    if (i >= 4 && asked[i] > 0) probes.push_back(i);
    if (i >= 1) {
      EXPECT_LE(asked[i], 1) << "step " << i;
    }
  }
  // Probes at steps 4, 13, then every 33 steps: 46, 79, ..., 277.
  ASSERT_EQ(probes.size(), 10u);
  EXPECT_EQ(probes[0], 4u);
  EXPECT_EQ(probes[1], 13u);
  for (size_t p = 2; p < probes.size(); ++p) EXPECT_EQ(probes[p] - probes[p - 1], 33u);
  EXPECT_EQ(rows, 4 + 1 + 10);  // 15 verify rows wasted over 300 tokens
}

TEST(DraftBudget, AHitEndsThePauses) {
  DraftBudget b;
  run(b, 60, false);  // pausing 32 steps between probes by now
  int k = 0;
  while ((k = b.next(kMax)) == 0) {
  }
  EXPECT_EQ(k, 1);
  b.update(1, 1, kMax);
  EXPECT_FALSE(b.paused());
  EXPECT_EQ(run(b, 3, true), (std::vector<int>{2, 4, 7}));
}

TEST(DraftBudget, BlockOfOneOrLessNeverProposes) {
  DraftBudget b;
  EXPECT_EQ(b.next(0), 0);
  b.update(0, 0, 0);
  EXPECT_EQ(b.next(0), 0);
  DraftBudget c;
  EXPECT_EQ(c.next(1), 1);
}

// Time: a drafter whose proposals are mostly accepted but whose steps cost more than they save
// (2 tokens per step at 2.3x a plain step's time) is paused most of the time; one that pays (8 tokens
// per 2.3x) drafts on, with only the plain steps that measure plain decoding in between.
double drafted_share(double step_cost, int accepted_of_7) {
  DraftBudget b;
  int drafted = 0;
  const int steps = 400;
  for (int i = 0; i < steps; ++i) {
    const int k = b.next(kMax);
    if (k > 0) {
      const int acc = std::min(k, accepted_of_7);
      b.update(k, acc, kMax);
      b.observe_step(true, acc + 1, step_cost);
      ++drafted;
    } else {
      b.observe_step(false, 1, 1.0);
    }
  }
  return static_cast<double>(drafted) / steps;
}

TEST(DraftBudget, DraftingThatCostsMoreTimeThanItSavesPauses) {
  EXPECT_GT(drafted_share(2.3, 7), 0.9) << "8 tokens per 2.3 steps: drafting pays";
  EXPECT_LT(drafted_share(2.3, 1), 0.15) << "2 tokens per 2.3 steps: slower than plain";
  EXPECT_GT(drafted_share(1.5, 1), 0.9) << "2 tokens per 1.5 steps: pays";
}

}  // namespace
}  // namespace splash
