// The prefix cache's RAM tier: publish/lookup of whole pages, the copied partial page, LRU eviction of
// leaves, leases, the hash-collision guard, a fake checkpoint group, and the disk-tier hooks through an
// in-memory BlockStore.
#include "cache/prefix_cache.h"
#include "kv_test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <numeric>
#include <vector>

namespace splash {
namespace {

constexpr int64_t T = kKvPageTokens;

KvCacheConfig small_config(int64_t n_pages) { return KvCacheConfig{2, 2, 16, n_pages, KvFormat::kF32}; }

using namespace kv_test;  // NOLINT

bool same_page(const KvPagePool& pool, int32_t a, int32_t b) {
  return std::memcmp(pool.page_data(a), pool.page_data(b), static_cast<size_t>(pool.page_bytes())) == 0;
}

PrefixCacheOptions opts() {
  PrefixCacheOptions o;
  o.namespace_description = "test";
  return o;
}

TEST(PrefixCache, SecondSequenceReusesWholePagesAndCopiesThePartialOne) {
  KvPagePool pool = *KvPagePool::create(small_config(64));
  PrefixCache cache(pool, opts());
  const auto a = seq_tokens(100);
  KvPageTable ta = prefill(pool, a);
  BlockChain chain;
  cache.publish(a, ta, chain);
  EXPECT_EQ(cache.stats().kv_pages, 3);  // 96 of 100 tokens are whole pages
  EXPECT_EQ(pool.refcount(ta.pages[0]), 2);
  EXPECT_EQ(pool.refcount(ta.pages[3]), 1);  // the partial page is never published

  // b shares 80 tokens with a: two whole pages shared, 16 tokens of a's third page copied.
  auto b = seq_tokens(120);
  for (size_t i = 80; i < b.size(); ++i) b[i] = 5000 + static_cast<int32_t>(i);
  PrefixMatch m = cache.lookup(b, static_cast<int64_t>(b.size()) - 1);
  EXPECT_EQ(m.n_tokens, 80);
  ASSERT_EQ(m.kv.pages.size(), 3u);
  EXPECT_EQ(m.kv.pages[0], ta.pages[0]);
  EXPECT_EQ(m.kv.pages[1], ta.pages[1]);
  EXPECT_NE(m.kv.pages[2], ta.pages[2]);
  EXPECT_EQ(pool.refcount(m.kv.pages[2]), 1);  // private: the sequence may write into it
  EXPECT_TRUE(same_page(pool, m.kv.pages[2], ta.pages[2]));
  EXPECT_EQ(pool.refcount(ta.pages[0]), 3);  // index + a + b
  // Continuing b writes into its copy, never into a's page (CHECKs in write otherwise).
  KvPageTable tb = std::move(m.kv);
  ASSERT_TRUE(pool.append(tb, 40).ok());

  // The whole prompt cached: the match still leaves the last token to feed.
  PrefixMatch full = cache.lookup(std::span(a).first(96), 95);
  EXPECT_EQ(full.n_tokens, 95);
  EXPECT_EQ(cache.stats().partial_page_copies, 2);

  // Cold prompt.
  const auto c = seq_tokens(50, 9000);
  PrefixMatch none = cache.lookup(c, 49);
  EXPECT_EQ(none.n_tokens, 0);
  EXPECT_EQ(cache.stats().cold_misses, 1);
  EXPECT_EQ(cache.stats().hits, 2);

  pool.release(ta);
  pool.release(tb);
  pool.release(full.kv);
  EXPECT_EQ(pool.kv_pages_used(), 3);  // the index's pages
}

TEST(PrefixCache, PublishingTwiceAddsNothing) {
  KvPagePool pool = *KvPagePool::create(small_config(32));
  PrefixCache cache(pool, opts());
  const auto a = seq_tokens(70);
  KvPageTable t1 = prefill(pool, a), t2 = prefill(pool, a);
  BlockChain c1, c2;
  cache.publish(a, t1, c1);
  cache.publish(a, t2, c2);  // same tokens computed twice (two lanes): the first copy stays
  EXPECT_EQ(cache.stats().kv_pages, 2);
  EXPECT_EQ(cache.stats().kv_publications, 2);
  EXPECT_EQ(pool.refcount(t2.pages[0]), 1);
  pool.release(t1);
  pool.release(t2);
}

TEST(PrefixCache, LruEvictsLeavesOfTheLeastRecentlyUsedChainFirst) {
  KvPagePool pool = *KvPagePool::create(small_config(32));
  PrefixCache cache(pool, opts());
  const auto a = seq_tokens(3 * T), b = seq_tokens(3 * T, 7000);
  for (const auto* toks : {&a, &b}) {
    KvPageTable t = prefill(pool, *toks);
    BlockChain chain;
    cache.publish(*toks, t, chain);
    pool.release(t);
  }
  EXPECT_EQ(pool.kv_pages_used(), 6);
  EXPECT_EQ(cache.pages_exclusive(), 6);
  // Touch a: b is now the least recently used chain.
  PrefixMatch m = cache.lookup(a, 3 * T);
  EXPECT_EQ(m.n_tokens, 3 * T);
  pool.release(m.kv);
  EXPECT_EQ(cache.evict(2), 2);
  // b lost its two deepest blocks (leaves first), a is whole.
  PrefixMatch mb = cache.lookup(b, 3 * T - 1);
  EXPECT_EQ(mb.n_tokens, T);
  pool.release(mb.kv);
  PrefixMatch ma = cache.lookup(a, 3 * T);
  EXPECT_EQ(ma.n_tokens, 3 * T);
  pool.release(ma.kv);
  EXPECT_EQ(cache.stats().kv_evictions, 2);
  EXPECT_EQ(pool.kv_pages_free(), 32 - 4);
}

TEST(PrefixCache, LeasedPagesAreNeverEvicted) {
  KvPagePool pool = *KvPagePool::create(small_config(16));
  PrefixCache cache(pool, opts());
  const auto a = seq_tokens(4 * T);
  KvPageTable t = prefill(pool, a);
  BlockChain chain;
  cache.publish(a, t, chain);
  pool.release(t);
  PrefixMatch lease = cache.lookup(a, 2 * T);  // holds the first two pages
  EXPECT_EQ(lease.n_tokens, 2 * T);
  EXPECT_EQ(cache.evict(100), 2);  // only the two deeper pages
  EXPECT_EQ(cache.stats().kv_pages, 2);
  pool.release(lease.kv);
  EXPECT_EQ(cache.evict(100), 2);
  EXPECT_EQ(pool.kv_pages_used(), 0);
}

TEST(PrefixCache, CopyTakesAPageByEvictionWhenThePoolIsFull) {
  KvPagePool pool = *KvPagePool::create(small_config(4));
  PrefixCache cache(pool, opts());
  const auto a = seq_tokens(2 * T), b = seq_tokens(2 * T, 3000);
  for (const auto* toks : {&a, &b}) {
    KvPageTable t = prefill(pool, *toks);
    BlockChain chain;
    cache.publish(*toks, t, chain);
    pool.release(t);
  }
  EXPECT_EQ(pool.kv_pages_free(), 0);
  PrefixMatch m = cache.lookup(a, 2 * T - 1);  // 1 page shared, 31 tokens copied into an evicted page
  EXPECT_EQ(m.n_tokens, 2 * T - 1);
  EXPECT_EQ(cache.stats().kv_evictions, 1);
  pool.release(m.kv);
}

TEST(PrefixCache, HashCollisionGuardComparesTokens) {
  KvPagePool pool = *KvPagePool::create(small_config(16));
  PrefixCache cache(pool, opts());
  const auto a = seq_tokens(3 * T);
  KvPageTable t = prefill(pool, a);
  BlockChain chain;
  cache.publish(a, t, chain);
  pool.release(t);
  // Block 1's stored tokens no longer match what hashed to its key: a lookup must stop before it.
  ASSERT_TRUE(cache.tamper_tokens_for_test(chain.keys[1], 5, -1));
  PrefixMatch m = cache.lookup(a, 3 * T);
  EXPECT_EQ(m.n_tokens, T + 5);  // block 0, then the partial compare stops at the tampered token
  EXPECT_EQ(cache.stats().collisions, 1);
  pool.release(m.kv);
  // Publishing the real tokens again does not chain anything under the foreign block.
  KvPageTable t2 = prefill(pool, a);
  BlockChain chain2;
  const int64_t before = cache.stats().kv_pages;
  cache.publish(a, t2, chain2);
  EXPECT_EQ(cache.stats().kv_pages, before);
  EXPECT_EQ(cache.stats().collisions, 2);
  pool.release(t2);
}

TEST(PrefixCache, FakeCheckpointGroupResumesFromTheDeepestSnapshot) {
  KvPagePool pool = *KvPagePool::create(small_config(64));
  PrefixCacheOptions o = opts();
  o.recurrent_floats = 4;
  o.checkpoint_interval = 2 * T;
  o.checkpoint_spacing = 2 * T;
  PrefixCache cache(pool, o);
  const auto a = seq_tokens(300);
  // Boundaries a 300-token prefill stops at: rolling every 64 tokens (not within 64 of the start or
  // the replay point), then the replay point 288 (last whole page before the end).
  std::vector<int64_t> stops;
  for (int64_t at = 0; (at = cache.next_checkpoint(0, at, 300)) != 0;) stops.push_back(at);
  EXPECT_EQ(stops, (std::vector<int64_t>{64, 128, 192, 288}));
  EXPECT_EQ(cache.next_checkpoint(160, 160, 300), 288);  // resumed at 160: 192 is too close, 256 too

  KvPageTable t = prefill(pool, a);
  BlockChain chain;
  cache.publish(a, t, chain);
  auto state = [](float x) { return std::vector<float>{x, x + 1, x + 2, x + 3}; };
  cache.publish_checkpoint(a, 64, state(64), chain, true);
  cache.publish_checkpoint(a, 128, state(128), chain, true);  // retires 64
  cache.publish_checkpoint(a, 288, state(288), chain, false);
  pool.release(t);
  EXPECT_EQ(cache.stats().checkpoints, 2);
  EXPECT_EQ(cache.stats().checkpoint_publications, 2);
  EXPECT_EQ(cache.stats().replay_publications, 1);

  // Shares 200 tokens: KV matches 192, the deepest snapshot at or below is 128; no partial page.
  auto b = a;
  for (size_t i = 200; i < b.size(); ++i) b[i] = 8000;
  PrefixMatch m = cache.lookup(b, 299);
  EXPECT_EQ(m.n_tokens, 128);
  EXPECT_EQ(m.kv.n_tokens, 128);
  EXPECT_EQ(m.recurrent, state(128));
  pool.release(m.kv);
  // The whole prompt: resumes at the replay point.
  PrefixMatch full = cache.lookup(a, 299);
  EXPECT_EQ(full.n_tokens, 288);
  EXPECT_EQ(full.recurrent, state(288));
  pool.release(full.kv);
  // Shares only 100 tokens: KV matches 96 but there is no snapshot at or below: cold.
  auto c = a;
  for (size_t i = 100; i < c.size(); ++i) c[i] = 9000;
  PrefixMatch lost = cache.lookup(c, 299);
  EXPECT_EQ(lost.n_tokens, 0);
  EXPECT_TRUE(lost.recurrent.empty());
  EXPECT_TRUE(lost.kv.pages.empty());
  EXPECT_EQ(cache.stats().lost_state_misses, 1);
  EXPECT_EQ(cache.stats().checkpoint_hits, 2);
}

TEST(PrefixCache, AttentionOnlyModelsPlanNoCheckpoints) {
  KvPagePool pool = *KvPagePool::create(small_config(4));
  PrefixCache cache(pool, opts());
  EXPECT_FALSE(cache.has_checkpoint_group());
  EXPECT_EQ(cache.next_checkpoint(0, 0, 100000), 0);
}

// --- disk tier hooks

class MemoryStore : public BlockStore {
 public:
  bool put(const BlockInfo& info, std::span<const int32_t> tokens, std::span<const uint8_t> payload) override {
    ++puts;
    if (refuse_puts) return false;
    records[{key_id(info.key), info.kind}] = {std::vector<int32_t>(tokens.begin(), tokens.end()),
                                              std::vector<uint8_t>(payload.begin(), payload.end())};
    return true;
  }
  bool contains(const BlockKey& key, BlockKind kind) const override { return records.contains({key_id(key), kind}); }
  Result<std::vector<uint8_t>> get(const BlockKey& key, BlockKind kind, std::span<const int32_t> tokens) override {
    ++gets;
    if (fail_gets) return make_error("simulated read failure");
    auto it = records.find({key_id(key), kind});
    if (it == records.end()) return make_error("absent");
    if (!std::equal(tokens.begin(), tokens.end(), it->second.first.begin(), it->second.first.end()))
      return make_error("tokens differ");
    return it->second.second;
  }
  void flush() override {}
  BlockStoreStats stats() const override { return {}; }

  static std::pair<uint64_t, uint64_t> key_id(const BlockKey& k) { return {k.hi, k.lo}; }
  std::map<std::pair<std::pair<uint64_t, uint64_t>, BlockKind>, std::pair<std::vector<int32_t>, std::vector<uint8_t>>> records;
  int puts = 0, gets = 0;
  bool refuse_puts = false, fail_gets = false;
};

TEST(PrefixCache, EvictedPagesGoToDiskAndComeBackOnAMiss) {
  KvPagePool pool = *KvPagePool::create(small_config(16));
  MemoryStore store;
  PrefixCacheOptions o = opts();
  o.disk = &store;
  PrefixCache cache(pool, o);
  const auto a = seq_tokens(3 * T + 5);
  KvPageTable t = prefill(pool, a);
  // A reference copy of a's pages to compare what comes back from disk.
  std::vector<std::vector<uint8_t>> want;
  for (int i = 0; i < 3; ++i)
    want.emplace_back(pool.page_data(t.pages[static_cast<size_t>(i)]),
                      pool.page_data(t.pages[static_cast<size_t>(i)]) + pool.page_bytes());
  BlockChain chain;
  cache.publish(a, t, chain);
  pool.release(t);
  EXPECT_EQ(cache.evict(100), 3);
  EXPECT_EQ(store.puts, 3);
  EXPECT_EQ(cache.stats().disk_offloads, 3);
  EXPECT_EQ(pool.kv_pages_used(), 0);

  PrefixMatch m = cache.lookup(a, static_cast<int64_t>(a.size()) - 1);
  EXPECT_EQ(m.n_tokens, 3 * T);  // all three blocks read back
  EXPECT_EQ(m.disk_tokens, 3 * T);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(std::memcmp(pool.page_data(m.kv.pages[static_cast<size_t>(i)]), want[static_cast<size_t>(i)].data(),
                          want[static_cast<size_t>(i)].size()),
              0);
  EXPECT_EQ(cache.stats().kv_disk_hit_tokens, 3 * T);
  EXPECT_EQ(cache.stats().kv_pages, 3);  // promoted pages are indexed again
  pool.release(m.kv);
  // Evicting again does not rewrite blocks the store already has.
  EXPECT_EQ(cache.evict(100), 3);
  EXPECT_EQ(store.puts, 3);

  // A failed read is a shorter prefix, never an error.
  store.fail_gets = true;
  PrefixMatch short_m = cache.lookup(a, static_cast<int64_t>(a.size()) - 1);
  EXPECT_EQ(short_m.n_tokens, 0);
  pool.release(short_m.kv);
}

TEST(PrefixCache, CheckpointsLeaveWithTheirPageAndReturnFromDisk) {
  KvPagePool pool = *KvPagePool::create(small_config(16));
  MemoryStore store;
  PrefixCacheOptions o = opts();
  o.disk = &store;
  o.recurrent_floats = 2;
  PrefixCache cache(pool, o);
  const auto a = seq_tokens(2 * T + 3);
  KvPageTable t = prefill(pool, a);
  BlockChain chain;
  cache.publish(a, t, chain);
  cache.publish_checkpoint(a, 2 * T, std::vector<float>{1.5f, 2.5f}, chain, false);
  pool.release(t);
  EXPECT_EQ(cache.evict(100), 2);
  EXPECT_EQ(cache.stats().checkpoints, 0);
  EXPECT_EQ(store.records.size(), 3u);  // two pages and the state
  PrefixMatch m = cache.lookup(a, static_cast<int64_t>(a.size()) - 1);
  EXPECT_EQ(m.n_tokens, 2 * T);
  EXPECT_EQ(m.recurrent, (std::vector<float>{1.5f, 2.5f}));
  pool.release(m.kv);
}

TEST(PrefixCache, CheckpointBudgetEvictsTheOldest) {
  KvPagePool pool = *KvPagePool::create(small_config(16));
  PrefixCacheOptions o = opts();
  o.recurrent_floats = 4;
  o.max_checkpoint_bytes = 2 * 4 * sizeof(float);
  PrefixCache cache(pool, o);
  const auto a = seq_tokens(4 * T);
  KvPageTable t = prefill(pool, a);
  BlockChain chain;
  cache.publish(a, t, chain);
  for (int64_t n : {T, 2 * T, 3 * T}) cache.publish_checkpoint(a, n, std::vector<float>(4, float(n)), chain, false);
  EXPECT_EQ(cache.stats().checkpoints, 2);
  EXPECT_EQ(cache.stats().checkpoint_evictions, 1);
  PrefixMatch m = cache.lookup(std::span(a).first(T + 1), T);
  EXPECT_EQ(m.n_tokens, 0);  // the snapshot at T was the oldest
  pool.release(m.kv);
  pool.release(t);
}

TEST(PrefixCache, DestructorReturnsEveryPage) {
  KvPagePool pool = *KvPagePool::create(small_config(8));
  {
    PrefixCache cache(pool, opts());
    const auto a = seq_tokens(3 * T);
    KvPageTable t = prefill(pool, a);
    BlockChain chain;
    cache.publish(a, t, chain);
    pool.release(t);
    EXPECT_EQ(pool.kv_pages_used(), 3);
  }
  EXPECT_EQ(pool.kv_pages_used(), 0);
}

TEST(PrefixCache, NamespacesSeparateModelsAndFormats) {
  KvPagePool pool = *KvPagePool::create(small_config(8));
  const std::string n1 = make_cache_namespace("qwen3", "d64", "123:456", small_config(8));
  KvCacheConfig other = small_config(8);
  other.format = KvFormat::kInt8;
  EXPECT_NE(n1, make_cache_namespace("qwen3", "d64", "123:456", other));
  EXPECT_NE(n1, make_cache_namespace("qwen3", "d64", "123:457", small_config(8)));
  PrefixCacheOptions o1 = opts(), o2 = opts();
  o1.namespace_description = n1;
  o2.namespace_description = n1 + "x";
  EXPECT_FALSE(PrefixCache(pool, o1).root() == PrefixCache(pool, o2).root());
}

}  // namespace
}  // namespace splash
