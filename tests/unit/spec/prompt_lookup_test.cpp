// Prompt lookup drafter: proposals continue the most recent earlier match of the longest suffix n-gram.
#include "spec/prompt_lookup.h"

#include <vector>

#include "gtest/gtest.h"

namespace splash {
namespace {

std::vector<int32_t> propose(PromptLookupDrafter& d, int max_tokens) {
  auto r = d.propose(max_tokens);
  EXPECT_TRUE(r.ok());
  return r.ok() ? *r : std::vector<int32_t>{};
}

void observe(PromptLookupDrafter& d, std::vector<int32_t> tokens) {
  DraftObservation obs;
  obs.tokens = tokens;
  ASSERT_TRUE(d.observe(obs).ok());
}

TEST(PromptLookup, ContinuesTheLongestMostRecentMatch) {
  PromptLookupDrafter d(1, 3);
  // ... 7 8 9 [1 2] ... 4 5 [1 2] 6 ... then the suffix "1 2": most recent match is followed by 6.
  observe(d, {7, 8, 9, 1, 2, 3, 4, 5, 1, 2, 6, 0, 0, 1, 2});
  EXPECT_EQ(propose(d, 3), (std::vector<int32_t>{6, 0, 0}));
  EXPECT_EQ(propose(d, 1), (std::vector<int32_t>{6}));
  // A longer n-gram wins over a more recent shorter one: "9 1 2" occurs once, followed by 3.
  PromptLookupDrafter e(1, 3);
  observe(e, {7, 8, 9, 1, 2, 3, 4, 5, 1, 2, 6, 9, 1, 2});
  EXPECT_EQ(propose(e, 2), (std::vector<int32_t>{3, 4}));
}

TEST(PromptLookup, NothingWithoutAMatchAndRespectsMinimum) {
  PromptLookupDrafter d(2, 3);
  observe(d, {1, 2, 3, 4, 5, 3});
  EXPECT_TRUE(propose(d, 4).empty());  // only the 1-gram "3" matches, below ngram_min = 2
  PromptLookupDrafter e(1, 3);
  observe(e, {1, 2, 3, 4, 5, 3});
  EXPECT_EQ(propose(e, 4), (std::vector<int32_t>{4, 5, 3}));  // capped by what follows
  EXPECT_TRUE(propose(e, 0).empty());
}

TEST(PromptLookup, RollbackForgetsTokens) {
  PromptLookupDrafter d(1, 2);
  observe(d, {1, 2, 3, 1});
  EXPECT_EQ(propose(d, 2), (std::vector<int32_t>{2, 3}));
  d.rollback(3);  // {1, 2, 3}: "3" has no earlier occurrence
  EXPECT_TRUE(propose(d, 2).empty());
  observe(d, {1});
  EXPECT_EQ(propose(d, 2), (std::vector<int32_t>{2, 3}));
}

TEST(SpecOptions, ParseAndValidate) {
  EXPECT_EQ(*parse_spec_method("lookup"), SpecMethod::kLookup);
  EXPECT_EQ(spec_method_name(SpecMethod::kDflash), "dflash");
  EXPECT_FALSE(parse_spec_method("medusa").ok());
  SpecOptions o;
  EXPECT_TRUE(o.validate().ok());
  o.block = 0;
  EXPECT_FALSE(o.validate().ok());
  o.block = 8;
  o.method = SpecMethod::kDraft;
  EXPECT_FALSE(o.validate().ok());  // needs --draft-model
}

}  // namespace
}  // namespace splash
