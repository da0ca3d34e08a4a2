// The SSD tier's residency policy (BlockStore::set_resident; docs/PREFIX_CACHE.md "Residency"): the
// quota takes the least recently used sole record before copies of blocks RAM holds (spec 5.4 takes
// them first: measured worse), those leave without the chains under them, and writes of RAM-held
// blocks yield to sole copies and pause above the hourly limit.
#include <gtest/gtest.h>

#include <vector>

#include "cache/disk/record.h"
#include "disk_test_util.h"

namespace splash {
namespace {

using namespace disk_test;  // NOLINT

constexpr int64_t kQuota = 1 << 20;
constexpr size_t kPayload = 60000;  // 61,440-byte records: 17 fit in the quota

void resident(BlockStore& s, const Block& b, bool r = true) { s.set_resident(b.info.key, b.info.kind, r); }

// The quota full of 17 sole records, written in order (none resident, nothing evicted yet).
std::vector<Block> fill_with_sole(DiskBlockStore& s) {
  auto sole = make_singles(17, kPayload);
  for (const Block& b : sole) EXPECT_TRUE(put(s, b));
  s.flush();
  EXPECT_EQ(s.stats().records, 17);
  EXPECT_EQ(s.stats().evictions, 0);
  return sole;
}

// A quota full of sole copies: a copy of a block RAM holds is refused rather than push one out.
// Once a stored record is redundant it makes room for the copy, not the oldest sole copy. A sole
// write takes the least recently used sole record before a redundant one (RAM would write that
// block again when it lets it go); with nothing but redundant records, a redundant one.
TEST(DiskResidency, CopiesYieldToSoleCopiesAndRedundantRecordsGoLast) {
  TempDir dir;
  auto s = open_store(dir.path(), kQuota, false);
  ASSERT_TRUE(s);
  const auto sole = fill_with_sole(*s);

  const auto copies = make_singles(3, kPayload, 50000);
  resident(*s, copies[0]);
  EXPECT_FALSE(put(*s, copies[0])) << "only sole copies to displace: refused";
  s->flush();
  BlockStoreStats st = s->stats();
  EXPECT_EQ(st.copies_yielded, 1);
  EXPECT_EQ(st.evictions, 0);
  EXPECT_EQ(st.records, 17);
  EXPECT_EQ(st.writes_dropped, 0) << "a yield is not a failure";
  for (const Block& b : sole) EXPECT_TRUE(s->contains(b.info.key, BlockKind::kKvPage));

  // RAM now holds sole[5] too: its disk copy is redundant and makes room for the copy.
  resident(*s, sole[5]);
  EXPECT_EQ(s->stats().redundant_records, 1);
  EXPECT_TRUE(put(*s, copies[0]));
  s->flush();
  st = s->stats();
  EXPECT_EQ(st.evictions, 1);
  EXPECT_FALSE(s->contains(sole[5].info.key, BlockKind::kKvPage)) << "the redundant record went";
  EXPECT_TRUE(s->contains(sole[0].info.key, BlockKind::kKvPage)) << "not the oldest sole copy";
  EXPECT_TRUE(get_ok(*s, copies[0]));
  EXPECT_EQ(st.redundant_records, 1) << "the new copy is redundant itself (RAM holds it)";

  // A sole write (a block RAM drops) takes the least recently used sole record, not the copy.
  EXPECT_TRUE(put(*s, copies[1]));
  s->flush();
  EXPECT_FALSE(s->contains(sole[0].info.key, BlockKind::kKvPage));
  EXPECT_TRUE(s->contains(sole[1].info.key, BlockKind::kKvPage));
  EXPECT_TRUE(get_ok(*s, copies[0])) << "a copy of a RAM-held block stays";
  EXPECT_TRUE(get_ok(*s, copies[1]));
  // Everything redundant: a sole write takes the oldest redundant record.
  for (const Block& b : sole) resident(*s, b);
  resident(*s, copies[1]);
  EXPECT_TRUE(put(*s, copies[2]));
  s->flush();
  EXPECT_FALSE(s->contains(sole[1].info.key, BlockKind::kKvPage));
  EXPECT_TRUE(s->contains(sole[2].info.key, BlockKind::kKvPage));
  EXPECT_LE(s->stats().bytes_used, kQuota);
}

// A redundant record leaves alone: the chain stored under it stays (lookups reach it through RAM).
// The same prefix not resident takes its chain with it (EvictionTakesWholeChains...).
TEST(DiskResidency, RedundantRecordLeavesWithoutTheChainUnderIt) {
  TempDir dir;
  auto s = open_store(dir.path(), kQuota, false);
  ASSERT_TRUE(s);
  const auto prefix = make_chain(2, kPayload);
  const auto conv = make_chain(3, kPayload, prefix.back().info.key, 10000);
  const auto others = make_singles(14, kPayload, 500000);
  for (const Block& b : prefix) put(*s, b);
  for (const Block& b : conv) put(*s, b);
  for (size_t i = 0; i < 12; ++i) put(*s, others[i]);  // the quota is full
  s->flush();
  // RAM holds everything: the 2 more records take the oldest redundant ones, the prefix's.
  for (const auto* chain : {&prefix, &conv, &others})
    for (const Block& b : *chain) resident(*s, b);
  for (size_t i = 12; i < 14; ++i) ASSERT_TRUE(put(*s, others[i]));
  s->flush();
  const BlockStoreStats st = s->stats();
  EXPECT_EQ(st.evictions, 2);
  for (const Block& b : prefix) EXPECT_FALSE(s->contains(b.info.key, BlockKind::kKvPage));
  for (const Block& b : conv) EXPECT_TRUE(get_ok(*s, b)) << "the chain under a redundant prefix stays";
  EXPECT_EQ(st.records, 17);
}

// Copies pause while more than copy_limit_per_hour bytes were written in the last hour; blocks RAM
// drops (sole copies) are still written.
TEST(DiskResidency, CopiesPauseAboveTheHourlyWriteLimit) {
  TempDir dir;
  DiskStoreOptions o;
  o.quota_bytes = 8 * kQuota;
  o.namespace_description = kNamespace;
  o.dir = dir.path();
  o.copy_limit_per_hour = static_cast<int64_t>(3 * disk::record_bytes(32, kPayload));
  auto s = std::move(*DiskBlockStore::open(o));
  const auto blocks = make_singles(6, kPayload);
  resident(*s, blocks[0]);
  EXPECT_TRUE(put(*s, blocks[0])) << "under the limit a copy is written";
  for (int i = 1; i <= 3; ++i) put(*s, blocks[static_cast<size_t>(i)]);
  s->flush();
  BlockStoreStats st = s->stats();
  EXPECT_EQ(st.records_written, 4);
  EXPECT_EQ(st.written_last_hour, st.bytes_written);
  resident(*s, blocks[4]);
  EXPECT_FALSE(put(*s, blocks[4])) << "4 records written in the hour, the limit is 3";
  EXPECT_TRUE(put(*s, blocks[5])) << "a sole copy is still written";
  s->flush();
  st = s->stats();
  EXPECT_EQ(st.copies_paused, 1);
  EXPECT_EQ(st.records_written, 5);
  EXPECT_FALSE(s->contains(blocks[4].info.key, BlockKind::kKvPage));
  EXPECT_TRUE(s->contains(blocks[5].info.key, BlockKind::kKvPage));
}

// The quota takes the least recently used sole record, not the oldest written: a record RAM read back
// and dropped again (or that was put again) stays, without being written again.
TEST(DiskResidency, QuotaTakesTheLeastRecentlyUsedSoleRecordWithoutRewriting) {
  TempDir dir;
  auto s = open_store(dir.path(), kQuota, false);
  ASSERT_TRUE(s);
  const auto sole = fill_with_sole(*s);
  resident(*s, sole[0]);         // read back into RAM...
  resident(*s, sole[0], false);  // ...and dropped again: used just now
  EXPECT_TRUE(put(*s, sole[1])) << "put again: stored recently, nothing to write, but used";
  s->flush();
  EXPECT_EQ(s->stats().records_written, 17) << "no rewrite";
  for (const Block& b : make_singles(2, kPayload, 70000)) ASSERT_TRUE(put(*s, b));
  s->flush();
  EXPECT_TRUE(get_ok(*s, sole[0]));
  EXPECT_TRUE(get_ok(*s, sole[1]));
  EXPECT_FALSE(s->contains(sole[2].info.key, BlockKind::kKvPage)) << "the least recently used went";
  EXPECT_FALSE(s->contains(sole[3].info.key, BlockKind::kKvPage));
  EXPECT_TRUE(s->contains(sole[4].info.key, BlockKind::kKvPage));
  EXPECT_EQ(s->stats().records_written, 19);
}

}  // namespace
}  // namespace splash
