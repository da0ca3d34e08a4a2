// The auto placement rule (ple/placement.h) as a decision table, and the start-up line.
#include "ple/placement.h"

#include "gtest/gtest.h"

namespace splash::ple {
namespace {

constexpr uint64_t GiB = 1ull << 30, MiB = 1ull << 20;
constexpr uint64_t kFp8Table = 51200245760ull;  // 320,001,536 rows x 160 B = 47.7 GiB

TEST(PlePlacement, DecisionTable) {
  struct Row {
    PlacementInputs in;
    Placement want;
    uint64_t want_cache;
  };
  const Row rows[] = {
      // everything fits: resident
      {[] {
         PlacementInputs x;
         x.table_bytes = 10 * GiB;
         x.rest_bytes = 20 * GiB;
         x.budget_bytes = 40 * GiB;
         x.page_cache_bytes = 0;
         return x;
       }(),
       Placement::kResident, 0},
      // exactly fits
      {[] {
         PlacementInputs x;
         x.table_bytes = 20 * GiB;
         x.rest_bytes = 20 * GiB;
         x.budget_bytes = 40 * GiB;
         return x;
       }(),
       Placement::kResident, 0},
      // config.json asks for offload: never resident; the page cache holds the table: mmap
      {[] {
         PlacementInputs x;
         x.table_bytes = 10 * GiB;
         x.rest_bytes = 20 * GiB;
         x.budget_bytes = 40 * GiB;
         x.page_cache_bytes = 30 * GiB;
         x.ssd_offload = true;
         return x;
       }(),
       Placement::kMmap, 0},
      // ... and when it cannot: ssd, cache capped at 1 GiB
      {[] {
         PlacementInputs x;
         x.table_bytes = 10 * GiB;
         x.rest_bytes = 20 * GiB;
         x.budget_bytes = 40 * GiB;
         x.page_cache_bytes = 1 * GiB;
         x.ssd_offload = true;
         return x;
       }(),
       Placement::kSsd, 1 * GiB},
      // the table does not fit the budget, 90% of it fits the page cache: mmap
      {[] {
         PlacementInputs x;
         x.table_bytes = 48 * GiB;
         x.rest_bytes = 20 * GiB;
         x.budget_bytes = 24 * GiB;
         x.page_cache_bytes = 44 * GiB;
         return x;
       }(),
       Placement::kMmap, 0},
      // under 90%: ssd with what the budget leaves (4 GiB) capped at 1 GiB
      {[] {
         PlacementInputs x;
         x.table_bytes = 48 * GiB;
         x.rest_bytes = 20 * GiB;
         x.budget_bytes = 24 * GiB;
         x.page_cache_bytes = 40 * GiB;
         return x;
       }(),
       Placement::kSsd, 1 * GiB},
      // little left in the budget: the cache gets what is left
      {[] {
         PlacementInputs x;
         x.table_bytes = 48 * GiB;
         x.rest_bytes = 20 * GiB - 300 * MiB;
         x.budget_bytes = 20 * GiB;
         x.page_cache_bytes = 0;
         return x;
       }(),
       Placement::kSsd, 300 * MiB},
      // the rest alone is over budget: ssd, no cache
      {[] {
         PlacementInputs x;
         x.table_bytes = 48 * GiB;
         x.rest_bytes = 30 * GiB;
         x.budget_bytes = 20 * GiB;
         x.page_cache_bytes = 100 * GiB;
         return x;
       }(),
       Placement::kSsd, 0},
      // --ple-ssd-cache-mb wins over the rule, capped at the table
      {[] {
         PlacementInputs x;
         x.table_bytes = 48 * GiB;
         x.rest_bytes = 20 * GiB;
         x.budget_bytes = 24 * GiB;
         x.ssd_cache_bytes = 64 * MiB;
         return x;
       }(),
       Placement::kSsd, 64 * MiB},
      {[] {
         PlacementInputs x;
         x.table_bytes = 10 * MiB;
         x.rest_bytes = 20 * GiB;
         x.budget_bytes = 40 * GiB;
         x.requested = Placement::kSsd;
         x.ssd_cache_bytes = 64 * MiB;
         return x;
       }(),
       Placement::kSsd, 10 * MiB},
      // an explicit placement wins over everything
      {[] {
         PlacementInputs x;
         x.table_bytes = 48 * GiB;
         x.rest_bytes = 20 * GiB;
         x.budget_bytes = 24 * GiB;
         x.requested = Placement::kResident;
         return x;
       }(),
       Placement::kResident, 0},
      {[] {
         PlacementInputs x;
         x.table_bytes = 1 * GiB;
         x.rest_bytes = 1 * GiB;
         x.budget_bytes = 24 * GiB;
         x.requested = Placement::kMmap;
         return x;
       }(),
       Placement::kMmap, 0},
  };
  int i = 0;
  for (const auto& r : rows) {
    SCOPED_TRACE(i++);
    const PlacementChoice c = choose_placement(r.in);
    EXPECT_EQ(c.placement, r.want);
    EXPECT_EQ(c.cache_bytes, r.want_cache);
    EXPECT_FALSE(c.reason.empty());
  }
}

TEST(PlePlacement, StartUpLine) {
  PlacementChoice ssd;
  ssd.placement = Placement::kSsd;
  ssd.cache_bytes = 1 * GiB;
  EXPECT_EQ(placement_log_line(ssd, kFp8Table, "fp8"), "PLE · ssd · table 47.7 GiB fp8 · row cache 1.0 GiB");
  PlacementChoice res;
  res.placement = Placement::kResident;
  EXPECT_EQ(placement_log_line(res, 2 * kFp8Table, "bf16"), "PLE · resident · table 95.4 GiB bf16");
  PlacementChoice mm;
  mm.placement = Placement::kMmap;
  EXPECT_EQ(placement_log_line(mm, 9216, "bf16"), "PLE · mmap · table 9.0 KiB bf16");
}

TEST(PlePlacement, ParsesTheFlag) {
  EXPECT_FALSE(parse_placement("auto")->has_value());
  EXPECT_EQ(parse_placement("ssd")->value(), Placement::kSsd);
  EXPECT_EQ(parse_placement("mmap")->value(), Placement::kMmap);
  auto bad = parse_placement("disk");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error_message().find("--ple-placement"), std::string::npos);
}

}  // namespace
}  // namespace splash::ple
