// The SSD tier (cache/disk/): record format, round trips, quota and hole punching, damaged files,
// restart take-back, one owner per directory, kill -9 in the middle of writes, unlinked temporary
// files, and a failed write disabling the store.
#include "cache/disk/disk_block_store.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include "cache/disk/record.h"
#include "disk_test_util.h"

namespace splash {
namespace {

using namespace disk_test;  // NOLINT

// --- record format -------------------------------------------------------------------------------

TEST(DiskRecord, RoundTripAndEveryFlippedByteDetected) {
  auto chain = make_chain(1, 3000);
  const Block& b = chain[0];
  std::vector<uint8_t> rec(disk::record_bytes(b.tokens.size(), b.payload.size()));
  EXPECT_EQ(rec.size() % disk::kRecordAlign, 0u);
  disk::encode_record(b.info, 7, b.tokens, b.payload, rec);
  auto h = disk::parse_record_header(rec);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->seq, 7u);
  EXPECT_TRUE(h->info.key == b.info.key);
  EXPECT_TRUE(h->info.parent == b.info.parent);
  EXPECT_EQ(h->info.n_tokens, 32);
  auto p = disk::verify_record(rec, b.info.key, b.info.kind, b.tokens);
  ASSERT_TRUE(p.ok()) << p.error_message();
  EXPECT_EQ(*p, b.payload);
  // Wrong key, kind or tokens: refused.
  EXPECT_FALSE(disk::verify_record(rec, b.info.parent, b.info.kind, b.tokens).ok());
  EXPECT_FALSE(disk::verify_record(rec, b.info.key, BlockKind::kState, b.tokens).ok());
  auto other = b.tokens;
  other[5] ^= 1;
  EXPECT_FALSE(disk::verify_record(rec, b.info.key, b.info.kind, other).ok());
  // Every byte of header, tokens, payload and checksum is covered.
  const size_t used = disk::kRecordHeaderBytes + b.tokens.size() * 4 + b.payload.size() + 8;
  for (size_t i = 0; i < used; i += 7) {
    auto bad = rec;
    bad[i] ^= 0x10;
    EXPECT_FALSE(disk::verify_record(bad, b.info.key, b.info.kind, b.tokens).ok()) << "flip at byte " << i;
  }
  // Truncated.
  EXPECT_FALSE(disk::verify_record(std::span<const uint8_t>(rec).first(rec.size() - 4096), b.info.key,
                                   b.info.kind, b.tokens).ok());
}

// --- temporary store -----------------------------------------------------------------------------

TEST(DiskStore, PutGetRoundTrip) {
  TempDir dir;
  auto s = open_store(dir.path(), 8 << 20, false);
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->persistent());
  auto chain = make_chain(20, 40000);
  for (const Block& b : chain) EXPECT_TRUE(put(*s, b));
  EXPECT_TRUE(put(*s, chain[3]));  // already queued or stored: nothing written twice
  s->flush();
  for (const Block& b : chain) {
    EXPECT_TRUE(s->contains(b.info.key, b.info.kind));
    EXPECT_FALSE(s->contains(b.info.key, BlockKind::kState));
    EXPECT_TRUE(get_ok(*s, b));
  }
  auto missing = make_chain(1, 100, chain.back().info.key);
  EXPECT_FALSE(s->contains(missing[0].info.key, BlockKind::kKvPage));
  EXPECT_FALSE(s->get(missing[0].info.key, BlockKind::kKvPage, missing[0].tokens).ok());
  // A hash collision (same key, other tokens) is a miss, not the other block's bytes.
  auto other = chain[0].tokens;
  other[0] += 1;
  EXPECT_FALSE(s->get(chain[0].info.key, BlockKind::kKvPage, other).ok());
  const BlockStoreStats st = s->stats();
  EXPECT_EQ(st.records, 20);
  EXPECT_EQ(st.kv_records, 20);
  EXPECT_EQ(st.records_written, 20);
  EXPECT_EQ(st.unneeded, 1);
  EXPECT_EQ(st.records_read, 20);
  EXPECT_EQ(st.bytes_used, 20 * static_cast<int64_t>(disk::record_bytes(32, 40000)));
  EXPECT_EQ(st.bytes_written, st.bytes_used);
  EXPECT_EQ(st.read_failures, 0);
}

TEST(DiskStore, QueuedBlocksAreServedAndTheQueueIsBounded) {
  TempDir dir;
  auto s = open_store(dir.path(), 64 << 20, false, /*queue_bytes=*/1 << 20);
  ASSERT_TRUE(s);
  s->pause_writer_for_test(true);
  auto chain = make_chain(40, 100000);
  int accepted = 0;
  for (const Block& b : chain) accepted += put(*s, b) ? 1 : 0;
  // ~104 KiB records into a 1 MiB queue: put() refuses instead of blocking.
  EXPECT_GE(accepted, 9);
  EXPECT_LE(accepted, 11);
  EXPECT_EQ(s->stats().writes_dropped, 40 - accepted);
  EXPECT_EQ(s->stats().pending_records, accepted);
  EXPECT_TRUE(s->contains(chain[0].info.key, BlockKind::kKvPage));
  EXPECT_TRUE(get_ok(*s, chain[0]));  // from the queue, before any write
  EXPECT_EQ(s->stats().records_written, 0);
  s->pause_writer_for_test(false);
  s->flush();
  EXPECT_EQ(s->stats().records_written, accepted);
  for (int i = 0; i < accepted; ++i) EXPECT_TRUE(get_ok(*s, chain[static_cast<size_t>(i)]));
}

TEST(DiskStore, QuotaHoldsOldestGoFirstAndHolesAreReturned) {
  TempDir dir;
  const int64_t quota = 1 << 20;
  auto s = open_store(dir.path(), quota, false);
  ASSERT_TRUE(s);
  const uint64_t rec = disk::record_bytes(32, 60000);  // 61,440 B: 17 fit in the quota
  auto chain = make_singles(120, 60000);                // 7 MiB of records: several turns of the ring
  int64_t max_file = 0;
  for (size_t i = 0; i < chain.size(); ++i) {
    ASSERT_TRUE(put(*s, chain[i]));
    if (i % 5 == 4) {
      s->flush();
      const BlockStoreStats st = s->stats();
      EXPECT_LE(st.bytes_used, quota);
      // Allocated blocks (st_blocks) stay within the quota although the ring spans 2x it.
      EXPECT_LE(st.file_bytes, quota) << "after " << i + 1 << " puts";
      max_file = std::max(max_file, st.file_bytes);
    }
  }
  s->flush();
  const BlockStoreStats st = s->stats();
  const int64_t fit = quota / static_cast<int64_t>(rec);
  EXPECT_EQ(st.records, fit);
  EXPECT_EQ(st.evictions, 120 - fit);
  EXPECT_GT(max_file, quota / 2);
  // The newest are kept, the oldest dropped (FIFO).
  for (size_t i = 0; i < chain.size(); ++i) {
    const bool expect = i >= chain.size() - static_cast<size_t>(fit);
    EXPECT_EQ(s->contains(chain[i].info.key, BlockKind::kKvPage), expect) << i;
    if (expect) {
      EXPECT_TRUE(get_ok(*s, chain[i]));
    }
  }
  EXPECT_EQ(s->ring_bytes(), static_cast<uint64_t>(2 * quota)) << "hole punching is supported on this file system";
  // A record larger than the quota is refused, not written.
  auto big = make_chain(1, quota + 1, chain.back().info.key);
  EXPECT_FALSE(put(*s, big[0]));
}

TEST(DiskStore, EvictionTakesWholeChainsAndStoredPrefixesAreRefreshed) {
  TempDir dir;
  const int64_t quota = 1 << 20;
  const uint64_t rec = disk::record_bytes(32, 60000);  // 17 fit
  auto s = open_store(dir.path(), quota, false);
  ASSERT_TRUE(s);
  // A shared prefix of 4 blocks, two conversations of 3 blocks each hanging off it, and a state.
  auto prefix = make_chain(4, 60000);
  auto conv_a = make_chain(3, 60000, prefix.back().info.key, 10000);
  auto conv_b = make_chain(3, 60000, prefix.back().info.key, 20000);
  Block state = conv_a.back();
  state.info.kind = BlockKind::kState;
  state.payload = payload_of(5, 3000);
  for (const Block& b : prefix) put(*s, b);
  for (const Block& b : conv_a) put(*s, b);
  for (const Block& b : conv_b) put(*s, b);
  put(*s, state);
  s->flush();
  EXPECT_EQ(s->stats().records, 11);
  // Unrelated blocks push the ring on: when the prefix's first block leaves, everything that hangs
  // off it leaves with it (no lookup from the root could reach it), freeing room at once.
  auto other = make_singles(7, 60000, 500000);
  for (const Block& b : other) put(*s, b);
  s->flush();
  EXPECT_EQ(s->stats().records, 18);  // 17 KV + the small state
  put(*s, make_singles(1, 60000, 600000)[0]);
  s->flush();
  EXPECT_FALSE(s->contains(prefix[0].info.key, BlockKind::kKvPage));
  for (const Block& b : conv_a) EXPECT_FALSE(s->contains(b.info.key, BlockKind::kKvPage));
  EXPECT_FALSE(s->contains(state.info.key, BlockKind::kState));
  EXPECT_EQ(s->stats().records, 8);
  EXPECT_EQ(s->stats().evictions, 11);
  // A block stored in the older half of the ring is written again when put() again, so prefixes
  // that keep being published stay; a recent one is not.
  auto keep = make_chain(2, 60000, namespace_key(kNamespace), 700000);
  for (const Block& b : keep) put(*s, b);
  s->flush();
  const int64_t written = s->stats().records_written;
  EXPECT_TRUE(put(*s, keep[0]));
  s->flush();
  EXPECT_EQ(s->stats().records_written, written) << "recent: nothing written";
  for (const Block& b : make_singles(8, 60000, 800000)) put(*s, b);
  s->flush();
  EXPECT_TRUE(put(*s, keep[0]));
  EXPECT_TRUE(put(*s, keep[1]));
  for (const Block& b : make_singles(8, 60000, 900000)) put(*s, b);
  s->flush();
  EXPECT_TRUE(get_ok(*s, keep[0]));
  EXPECT_TRUE(get_ok(*s, keep[1]));
  EXPECT_LE(s->stats().bytes_used, quota);
  (void)rec;
}

TEST(DiskStore, TemporaryFileLeavesNothingInTheDirectory) {
  TempDir dir;
  {
    auto s = open_store(dir.path(), 4 << 20, false);
    ASSERT_TRUE(s);
    for (const Block& b : make_chain(10, 50000)) put(*s, b);
    s->flush();
    EXPECT_GT(s->stats().file_bytes, 0);
    EXPECT_TRUE(fs::is_empty(dir.path())) << "the cache file has no name";
  }
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(DiskStore, FailedWriteDisablesTheStoreWithoutLosingWhatIsOnDisk) {
  TempDir dir;
  auto s = open_store(dir.path(), 16 << 20, false);
  ASSERT_TRUE(s);
  auto chain = make_chain(10, 60000);
  for (int i = 0; i < 3; ++i) put(*s, chain[static_cast<size_t>(i)]);
  s->flush();
  // Files may not grow past 256 KiB from now on: the next writes fail with EFBIG.
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit lim = old;
  lim.rlim_cur = 256 << 10;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &lim), 0);
  for (size_t i = 3; i < chain.size(); ++i) put(*s, chain[i]);
  s->flush();
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, old_handler);
  const BlockStoreStats st = s->stats();
  EXPECT_GT(st.writes_dropped, 0);
  EXPECT_FALSE(put(*s, chain.back())) << "disabled: put() refuses";
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(get_ok(*s, chain[static_cast<size_t>(i)]));
  for (size_t i = 3; i < chain.size(); ++i) {
    auto r = s->get(chain[i].info.key, BlockKind::kKvPage, chain[i].tokens);
    if (r.ok()) {
      EXPECT_EQ(*r, chain[i].payload);  // only records that were written whole
    }
  }
}

}  // namespace
}  // namespace splash
