// The RAM tier over the real SSD tier (PrefixCache + DiskBlockStore): what only the two together do:
// hot prefixes keep their disk copy across ring wraps; write-behind of restore points to a
// persistent directory.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "cache/disk/record.h"
#include "cache/prefix_cache.h"
#include "disk_test_util.h"
#include "kv_test_util.h"

namespace splash {
namespace {

using namespace disk_test;  // NOLINT
using namespace kv_test;    // NOLINT

constexpr int64_t T = kKvPageTokens;

// 2 layers x 2 heads x 16 dims, f32: 16 KiB pages.
KvCacheConfig small_config(int64_t n_pages) { return KvCacheConfig{2, 2, 16, n_pages, KvFormat::kF32}; }

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A shared system prompt is written to disk once, by the first eviction; every later conversation
// reads it back (or finds it in RAM) and leaves its own blocks on disk under it. The ring wraps the
// quota several times: the system prompt's first copy reaches the ring's end early, and unless it is
// refreshed every conversation under it leaves the disk with it, however recent.
TEST(PrefixCacheDisk, SharedPrefixInUseKeepsItsDiskCopyAcrossRingWraps) {
  TempDir dir;
  KvPagePool pool = *KvPagePool::create(small_config(32));
  const int64_t rec = static_cast<int64_t>(disk::record_bytes(T, static_cast<size_t>(pool.page_bytes())));
  const int64_t quota = 16 * rec;
  auto store = open_store(dir.path(), quota, /*persistent=*/false);
  ASSERT_TRUE(store);
  PrefixCacheOptions o;
  o.namespace_description = "test";
  o.disk = store.get();
  PrefixCache cache(pool, o);
  const auto system = seq_tokens(2 * T, 100000);
  const int n_conv = 40;  // 2 own blocks each: 80+ records through a 16-record quota
  for (int c = 0; c < n_conv; ++c) {
    const auto tokens = concat(system, seq_tokens(2 * T + 5, 1000 * c));
    PrefixMatch m = cache.lookup(tokens, static_cast<int64_t>(tokens.size()) - 1);
    if (c > 0) {
      EXPECT_EQ(m.n_tokens, 2 * T) << "conversation " << c << " finds the system prompt";
      EXPECT_EQ(m.disk_tokens, 2 * T) << "conversation " << c;
    }
    pool.release(m.kv);
    KvPageTable t = prefill(pool, tokens);
    BlockChain chain;
    cache.publish(tokens, t, chain);
    pool.release(t);
    EXPECT_EQ(cache.evict(100), 4);  // everything to disk: RAM keeps nothing between conversations
    store->flush();
  }
  const BlockStoreStats st = store->stats();
  EXPECT_GT(st.bytes_written, 4 * quota) << "the ring wrapped the quota several times";
  EXPECT_GT(st.evictions, 0);
  EXPECT_LE(st.bytes_used, quota);
  EXPECT_GT(st.refreshed, 0);
  EXPECT_GT(cache.stats().disk_refreshes, 0);
  // The newest conversations are whole on disk, system prompt included.
  for (int c = n_conv - 3; c < n_conv; ++c) {
    const auto tokens = concat(system, seq_tokens(2 * T + 5, 1000 * c));
    PrefixMatch m = cache.lookup(tokens, static_cast<int64_t>(tokens.size()) - 1);
    EXPECT_EQ(m.n_tokens, 4 * T) << "conversation " << c;
    EXPECT_EQ(m.disk_tokens, 4 * T) << "conversation " << c;
    pool.release(m.kv);
    cache.evict(100);
  }
}

// The same with the system prompt hot in RAM: a lane holds its pages the whole time, so RAM never
// evicts it again and only lookups touch it; its disk copy must still not age out.
TEST(PrefixCacheDisk, PrefixHeldInRamKeepsItsDiskCopy) {
  TempDir dir;
  KvPagePool pool = *KvPagePool::create(small_config(32));
  const int64_t rec = static_cast<int64_t>(disk::record_bytes(T, static_cast<size_t>(pool.page_bytes())));
  auto store = open_store(dir.path(), 16 * rec, /*persistent=*/false);
  ASSERT_TRUE(store);
  PrefixCacheOptions o;
  o.namespace_description = "test";
  o.disk = store.get();
  PrefixCache cache(pool, o);
  const auto system = seq_tokens(2 * T, 100000);
  {
    KvPageTable t = prefill(pool, system);
    BlockChain chain;
    cache.publish(system, t, chain);
    pool.release(t);
    cache.evict(100);  // the system prompt's only disk copy, written first
    store->flush();
  }
  PrefixMatch held = cache.lookup(concat(system, {7}), 2 * T);  // a lane's lease from now on
  ASSERT_EQ(held.n_tokens, 2 * T);
  for (int c = 0; c < 40; ++c) {
    const auto tokens = concat(system, seq_tokens(2 * T + 5, 1000 * c));
    PrefixMatch m = cache.lookup(tokens, static_cast<int64_t>(tokens.size()) - 1);
    EXPECT_EQ(m.n_tokens, 2 * T) << "conversation " << c;
    pool.release(m.kv);
    KvPageTable t = prefill(pool, tokens);
    BlockChain chain;
    cache.publish(tokens, t, chain);
    pool.release(t);
    cache.evict(100);  // the conversation's own blocks; the leased system prompt stays in RAM
    store->flush();
    if (c >= 1) {
      // The previous conversation is still whole on disk under the system prompt.
      const auto prev = concat(system, seq_tokens(2 * T + 5, 1000 * (c - 1)));
      PrefixMatch p = cache.lookup(prev, static_cast<int64_t>(prev.size()) - 1);
      EXPECT_EQ(p.n_tokens, 4 * T) << "conversation " << c - 1 << " after " << c;
      pool.release(p.kv);
      cache.evict(100);
      store->flush();
    }
  }
  pool.release(held.kv);
}

// Write-behind (spec 5.6): a restore point >= 2048 tokens deep reaches a persistent directory the
// delay after its publication, with no eviction and no clean stop; a point superseded before its
// delay is never written, and the superseding one writes each block once. Times are explicit.
TEST(PrefixCacheDisk, WriteBehindWritesTheNewestRestorePointOnce) {
  using Clock = PrefixCache::Clock;
  using std::chrono::milliseconds;
  TempDir dir;
  KvPagePool pool = *KvPagePool::create(small_config(128));
  auto store = open_store(dir.path() + "/cache", 32 << 20, /*persistent=*/true);
  ASSERT_TRUE(store);
  PrefixCacheOptions o;
  o.namespace_description = kNamespace;
  o.disk = store.get();
  o.write_behind_delay = milliseconds(10000);
  o.write_behind_step_bytes = 4 * pool.page_bytes();  // bounded batches: several calls per point
  PrefixCache cache(pool, o);
  ASSERT_TRUE(cache.writes_behind());
  const Clock::time_point t0 = Clock::now();

  const auto a = seq_tokens(80 * T + 7, 50000);
  KvPageTable ta = prefill(pool, a);
  BlockChain chain;
  // After a first chunk: a 66-block (2112-token) point.
  KvPageTable first;
  first.pages.assign(ta.pages.begin(), ta.pages.begin() + 66);
  first.n_tokens = 66 * T;
  cache.publish(a, first, chain);
  cache.note_restore_point(chain, 66 * T, t0);
  EXPECT_EQ(cache.write_behind(t0 + milliseconds(5000)), t0 + milliseconds(10000));
  // The next chunk, 6 s later, supersedes it.
  cache.publish(a, ta, chain);
  cache.note_restore_point(chain, 80 * T, t0 + milliseconds(6000));
  cache.note_restore_point(chain, 80 * T, t0 + milliseconds(7000));  // the same point again: no new delay
  EXPECT_EQ(cache.stats().write_behind_superseded, 1);
  EXPECT_EQ(cache.stats().write_behind_waiting, 1);
  // A short conversation (< 2048 tokens) is never written behind.
  const auto b = seq_tokens(40 * T, 90000);
  KvPageTable tb = prefill(pool, b);
  BlockChain chain_b;
  cache.publish(b, tb, chain_b);
  cache.note_restore_point(chain_b, 40 * T, t0);
  EXPECT_EQ(cache.stats().write_behind_waiting, 1);

  // Past the superseded point's due time: nothing (it is gone, the newer one is not due yet).
  EXPECT_EQ(cache.write_behind(t0 + milliseconds(11000)), t0 + milliseconds(16000));
  store->flush();
  EXPECT_EQ(store->stats().records_written, 0);

  Clock::time_point t = t0 + milliseconds(16000);
  int calls = 0;
  while (cache.stats().write_behind_waiting > 0 && calls < 1000) {
    const Clock::time_point next = cache.write_behind(t);
    if (cache.stats().write_behind_waiting > 0) {
      EXPECT_LE(next, t + milliseconds(20)) << "offered or flushing: the engine calls again soon";
    }
    store->flush();
    t += milliseconds(20);
    ++calls;
  }
  EXPECT_GE(calls, 80 / 4) << "bounded batches";
  EXPECT_EQ(cache.write_behind(t), Clock::time_point::max());
  const PrefixCacheStats cs = cache.stats();
  EXPECT_EQ(cs.write_behind_durable, 1);
  EXPECT_EQ(cs.write_behind_refused, 0);
  EXPECT_EQ(cs.write_behind_blocks, 80);
  EXPECT_EQ(cs.kv_evictions, 0) << "no eviction involved";
  const BlockStoreStats st = store->stats();
  EXPECT_EQ(st.records_written, 80) << "every block of the newest point once, nothing of b";
  EXPECT_EQ(st.kv_records, 80);

  // Durable without any stop: a copy of the ring taken now (the store still open, as at kill -9) is
  // taken back whole by a new store, and a new cache reads the conversation from it.
  const fs::path copy = fs::path(dir.path()) / "copy" / fs::path(store->directory()).filename();
  fs::create_directories(copy);
  fs::copy_file(ring_path(*store), copy / "blocks.ring");
  auto back = open_store((fs::path(dir.path()) / "copy").string(), 32 << 20, /*persistent=*/true);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->stats().restored_points, 1);
  EXPECT_EQ(back->stats().restored_kv_blocks, 80);
  KvPagePool pool2 = *KvPagePool::create(small_config(128));
  PrefixCacheOptions o2 = o;
  o2.disk = back.get();
  PrefixCache cache2(pool2, o2);
  PrefixMatch m = cache2.lookup(a, static_cast<int64_t>(a.size()) - 1);
  EXPECT_EQ(m.n_tokens, 80 * T);
  EXPECT_EQ(m.disk_tokens, 80 * T);
  for (size_t i = 0; i < 80; ++i)
    EXPECT_EQ(std::memcmp(pool2.page_data(m.kv.pages[i]), pool.page_data(ta.pages[i]), static_cast<size_t>(pool.page_bytes())), 0);
  pool2.release(m.kv);
  pool.release(ta);
  pool.release(tb);
}

// Clean stop (spec 5.6: "flush newest first"): with a budget that cannot write the whole cache, the
// most recently used conversations reach the disk, whole from the root, and the oldest are left out.
TEST(PrefixCacheDisk, CleanStopFlushWritesTheNewestConversationsFirst) {
  TempDir dir;
  KvPagePool pool = *KvPagePool::create(small_config(64));
  auto store = open_store(dir.path(), 32 << 20, /*persistent=*/true);
  ASSERT_TRUE(store);
  PrefixCacheOptions o;
  o.namespace_description = kNamespace;
  o.disk = store.get();
  PrefixCache cache(pool, o);
  const auto system = seq_tokens(T, 100000);  // shared by all
  std::vector<std::vector<int32_t>> convs;
  for (int c = 0; c < 5; ++c) {
    convs.push_back(concat(system, seq_tokens(3 * T, 1000 * c)));
    KvPageTable t = prefill(pool, convs.back());
    BlockChain chain;
    cache.publish(convs.back(), t, chain);
    pool.release(t);
  }
  // Conversation 1 is used again: with 4, the newest two.
  PrefixMatch m = cache.lookup(convs[1], static_cast<int64_t>(convs[1].size()));
  ASSERT_EQ(m.n_tokens, 4 * T);
  pool.release(m.kv);
  // Room for 7 records: the shared block and the 3 own blocks of conversations 1 and 4.
  EXPECT_EQ(cache.flush_to_disk(PrefixCache::Clock::now() + std::chrono::seconds(60), 7), 7);
  store->flush();
  auto on_disk = [&](const std::vector<int32_t>& tokens) {  // whole blocks on disk from the root
    int64_t n = 0;
    BlockKey parent = namespace_key(kNamespace);
    for (size_t i = 0; i + T <= tokens.size(); i += T) {
      parent = chain_block_key(parent, std::span(tokens).subspan(i, T));
      if (!store->contains(parent, BlockKind::kKvPage)) break;
      ++n;
    }
    return n;
  };
  EXPECT_EQ(on_disk(convs[1]), 4) << "the most recently used conversation, whole";
  EXPECT_EQ(on_disk(convs[4]), 4) << "the newest published one, whole";
  for (int c : {0, 2, 3}) EXPECT_EQ(on_disk(convs[static_cast<size_t>(c)]), 1) << "conversation " << c;
  EXPECT_EQ(store->stats().kv_records, 7);
  // Without a limit everything goes, each block once.
  EXPECT_EQ(cache.flush_to_disk(PrefixCache::Clock::now() + std::chrono::seconds(60)), 9);
  store->flush();
  EXPECT_EQ(store->stats().kv_records, 16);
}

// A quota smaller than the working set (spec 5.4, 5.6): write-behind writes second copies of what
// RAM holds, so it may only displace redundant records. With the quota full of sole copies (blocks
// RAM dropped), the newest restore point is not written and every sole copy stays readable; before,
// it pushed out the oldest conversation's root and the whole conversation with it.
TEST(PrefixCacheDisk, WriteBehindYieldsToSoleCopies) {
  using Clock = PrefixCache::Clock;
  using std::chrono::milliseconds;
  TempDir dir;
  KvPagePool pool = *KvPagePool::create(small_config(64));
  const int64_t rec = static_cast<int64_t>(disk::record_bytes(T, static_cast<size_t>(pool.page_bytes())));
  auto store = open_store(dir.path(), 16 * rec, /*persistent=*/true);
  ASSERT_TRUE(store);
  PrefixCacheOptions o;
  o.namespace_description = kNamespace;
  o.disk = store.get();
  o.write_behind_delay = milliseconds(0);
  o.write_behind_min_tokens = 2 * T;
  PrefixCache cache(pool, o);
  // Two conversations dropped from RAM fill the quota with sole copies.
  const auto x = seq_tokens(12 * T + 3, 10000), z = seq_tokens(4 * T + 3, 20000);
  for (const auto* tokens : {&x, &z}) {
    KvPageTable t = prefill(pool, *tokens);
    BlockChain chain;
    cache.publish(*tokens, t, chain);
    pool.release(t);
    cache.evict(100);
  }
  store->flush();
  ASSERT_EQ(store->stats().kv_records, 16);
  // The conversation in RAM publishes its restore point; write-behind runs to the end.
  const auto y = seq_tokens(6 * T + 3, 30000);
  KvPageTable ty = prefill(pool, y);
  BlockChain chain_y;
  cache.publish(y, ty, chain_y);
  Clock::time_point t = Clock::now();
  cache.note_restore_point(chain_y, 6 * T, t);
  for (int i = 0; i < 100 && cache.stats().write_behind_waiting > 0; ++i) {
    cache.write_behind(t);
    store->flush();
    t += milliseconds(20);
  }
  EXPECT_EQ(cache.stats().write_behind_waiting, 0);
  EXPECT_EQ(cache.stats().write_behind_durable, 0);
  EXPECT_EQ(cache.stats().write_behind_refused, 1);
  const BlockStoreStats st = store->stats();
  EXPECT_GE(st.copies_yielded, 1);
  EXPECT_EQ(st.evictions, 0);
  for (const auto* tokens : {&x, &z}) {
    PrefixMatch m = cache.lookup(*tokens, static_cast<int64_t>(tokens->size()));
    EXPECT_EQ(m.n_tokens, static_cast<int64_t>(tokens->size()) / T * T) << "every sole copy stays";
    EXPECT_EQ(m.disk_tokens, m.n_tokens);
    pool.release(m.kv);
  }
  pool.release(ty);
}

// Restores off the caller's thread (spec 5.4): prefetch() reads what only the disk holds in bounded
// batches on the store's reader thread; until it returns true a lookup without disk reads sees only
// RAM; then the whole prefix is there, counted as read from disk, byte for byte, with the deepest
// checkpoint's state (a checkpoint group).
TEST(PrefixCacheDisk, PrefetchReadsBackInBatchesOffTheCallersThread) {
  TempDir dir;
  KvPagePool pool = *KvPagePool::create(small_config(32));
  auto store = open_store(dir.path(), 32 << 20, /*persistent=*/false);
  ASSERT_TRUE(store);
  PrefixCacheOptions o;
  o.namespace_description = kNamespace;
  o.disk = store.get();
  o.recurrent_floats = 8;
  o.checkpoint_interval = 4 * T;
  o.prefetch_batch_bytes = 2 * pool.page_bytes();
  PrefixCache cache(pool, o);
  const auto a = seq_tokens(7 * T + 5, 4000);
  KvPageTable ta = prefill(pool, a);
  BlockChain chain;
  cache.publish(a, ta, chain);
  const std::vector<float> state = {1, 2, 3, 4, 5, 6, 7, 8};
  cache.publish_checkpoint(a, 6 * T, state, chain, /*rolling=*/false);
  std::vector<std::vector<uint8_t>> bytes;
  for (int32_t page : ta.pages)
    bytes.emplace_back(pool.page_data(page), pool.page_data(page) + pool.page_bytes());
  pool.release(ta);
  EXPECT_EQ(cache.evict(100), 7);
  store->flush();
  ASSERT_EQ(store->stats().kv_records, 7);
  ASSERT_EQ(store->stats().state_records, 1);

  const int64_t limit = static_cast<int64_t>(a.size()) - 1;
  store->pause_reader_for_test(true);
  EXPECT_FALSE(cache.prefetch(a, limit));
  EXPECT_TRUE(cache.prefetching());
  PrefixMatch none = cache.lookup(a, limit, /*read_disk=*/false);
  EXPECT_EQ(none.n_tokens, 0) << "no read on the caller's thread";
  pool.release(none.kv);
  store->pause_reader_for_test(false);
  int calls = 1;
  while (!cache.prefetch(a, limit) && calls < 10000) {
    ++calls;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  EXPECT_EQ(cache.stats().disk_read_batches, 5) << "7 pages 2 at a time, then the state";
  EXPECT_FALSE(cache.prefetching());
  PrefixMatch m = cache.lookup(a, limit, /*read_disk=*/false);
  EXPECT_EQ(m.n_tokens, 6 * T) << "resumes at the checkpoint";
  EXPECT_EQ(m.disk_tokens, 6 * T);
  EXPECT_EQ(m.recurrent, state);
  for (size_t i = 0; i < 6; ++i)
    EXPECT_EQ(std::memcmp(pool.page_data(m.kv.pages[i]), bytes[i].data(), bytes[i].size()), 0) << i;
  pool.release(m.kv);
  EXPECT_EQ(pool.kv_pages_used(), cache.stats().kv_pages) << "the prefetch's lease is gone";
}

// A conversation that keeps superseding its restore point (a long generation publishes a deeper one
// every 32 tokens) is still written behind: at the latest 3 delays after its first unwritten point.
TEST(PrefixCacheDisk, WriteBehindOfALongGenerationIsNotPostponedForever) {
  using Clock = PrefixCache::Clock;
  using std::chrono::milliseconds;
  TempDir dir;
  KvPagePool pool = *KvPagePool::create(small_config(128));
  auto store = open_store(dir.path() + "/cache", 32 << 20, /*persistent=*/true);
  ASSERT_TRUE(store);
  PrefixCacheOptions o;
  o.namespace_description = kNamespace;
  o.disk = store.get();
  o.write_behind_delay = milliseconds(10000);
  PrefixCache cache(pool, o);
  const auto a = seq_tokens(100 * T + 7, 70000);
  KvPageTable ta = prefill(pool, a);
  BlockChain chain;
  cache.publish(a, ta, chain);
  const Clock::time_point t0 = Clock::now();
  // A deeper point every 5 s: each supersedes the last before its 10 s delay.
  for (int i = 0; i <= 6; ++i) cache.note_restore_point(chain, (66 + i) * T, t0 + milliseconds(5000 * i));
  EXPECT_EQ(cache.stats().write_behind_superseded, 6);
  EXPECT_EQ(cache.write_behind(t0 + milliseconds(29000)), t0 + milliseconds(30000)) << "3 delays after the first";
  store->flush();
  EXPECT_EQ(store->stats().records_written, 0);
  Clock::time_point t = t0 + milliseconds(30000);
  for (int i = 0; i < 200 && cache.stats().write_behind_waiting > 0; ++i) {
    cache.write_behind(t);
    store->flush();
    t += milliseconds(20);
  }
  EXPECT_EQ(cache.stats().write_behind_durable, 1);
  EXPECT_EQ(store->stats().kv_records, 72);
  pool.release(ta);
}

}  // namespace
}  // namespace splash
