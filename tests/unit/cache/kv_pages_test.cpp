// Page-table logic of the paged KV cache, and attention reading through its views.
#include "cache/kv_pages.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "backend/cpu/attention.h"

namespace splash {
namespace {

KvCacheConfig small_config(int64_t n_pages, KvFormat f = KvFormat::kF32) {
  return KvCacheConfig{2, 2, 16, n_pages, f};
}

// K/V rows whose values encode (layer, position, K or V) so reads can be checked exactly.
std::vector<float> rows(int il, int64_t pos0, int64_t n, bool is_v, int width) {
  std::vector<float> x(static_cast<size_t>(n * width));
  for (int64_t i = 0; i < n; ++i) {
    for (int j = 0; j < width; ++j) {
      x[static_cast<size_t>(i * width + j)] = static_cast<float>(il * 100000 + (pos0 + i) * 10 + (is_v ? 5 : 0)) + j * 0.001f;
    }
  }
  return x;
}

void fill(KvPagePool& pool, KvPageTable& t, int64_t pos0, int64_t n, float bias = 0.0f) {
  const int width = pool.config().n_kv_head * pool.config().head_dim;
  for (int il = 0; il < pool.config().n_layer; ++il) {
    auto k = rows(il, pos0, n, false, width), v = rows(il, pos0, n, true, width);
    for (float& x : k) x += bias;
    pool.write(t, il, pos0, n, k.data(), v.data());
  }
}

float read_k(const KvPagePool& pool, const KvPageTable& t, int il, int64_t pos, int h, int d) {
  PagedKvView v = pool.view(t, il);
  std::vector<float> row(static_cast<size_t>(pool.config().head_dim));
  kv_load_row(v.geo, v.k_block(pos / kKvPageTokens), h, static_cast<int>(pos % kKvPageTokens), row.data());
  return row[static_cast<size_t>(d)];
}

TEST(KvPages, AccountingAndPageBytes) {
  const KvCacheConfig c{28, 8, 128, 10, KvFormat::kInt8};
  // Per layer: K and V blocks of 8 heads x 32 slots x (128 int8 + 4-byte scale).
  EXPECT_EQ(KvPagePool::page_bytes(c), 28 * 2 * (8 * 32 * 128 + 8 * 32 * 4));
  EXPECT_EQ(KvPagePool::page_bytes({28, 8, 128, 10, KvFormat::kBF16}), 28 * 2 * 8 * 32 * 128 * 2);
  auto pool = KvPagePool::create(c);
  ASSERT_TRUE(pool.ok()) << pool.error_message();
  EXPECT_EQ(pool->kv_pages_total(), 10);
  EXPECT_EQ(pool->kv_pages_free(), 10);
  EXPECT_EQ(pool->kv_bytes_total(), 10 * KvPagePool::page_bytes(c));
  EXPECT_FALSE(KvPagePool::create({0, 8, 128, 10}).ok());
  EXPECT_FALSE(KvPagePool::create({2, 8, 128, 0}).ok());
}

TEST(KvPages, AppendAcrossPageBoundariesAndReadBack) {
  auto pool = *KvPagePool::create(small_config(8));
  KvPageTable t;
  for (int64_t n : {1, 30, 1, 1, 31, 33}) {  // ends at 1, 31, 32, 33, 64, 97
    const int64_t pos0 = t.n_tokens;
    ASSERT_TRUE(pool.append(t, n).ok());
    EXPECT_EQ(t.n_tokens, pos0 + n);
    EXPECT_EQ(static_cast<int64_t>(t.pages.size()), (t.n_tokens + 31) / 32);
    fill(pool, t, pos0, n);
  }
  EXPECT_EQ(pool.kv_pages_used(), 4);
  for (int64_t pos : {0, 31, 32, 33, 63, 64, 96}) {
    EXPECT_EQ(read_k(pool, t, 1, pos, 1, 3), 100000.0f + pos * 10 + (16 + 3) * 0.001f) << pos;
  }
  pool.release(t);
  EXPECT_EQ(pool.kv_pages_free(), 8);
  EXPECT_TRUE(t.pages.empty());
  EXPECT_EQ(t.n_tokens, 0);
}

TEST(KvPages, TruncateMidPageAndAtBoundaries) {
  auto pool = *KvPagePool::create(small_config(8));
  KvPageTable t;
  ASSERT_TRUE(pool.append(t, 100).ok());
  fill(pool, t, 0, 100);
  EXPECT_EQ(pool.kv_pages_used(), 4);
  pool.truncate(t, 70);  // mid-page: keeps 3 pages
  EXPECT_EQ(t.n_tokens, 70);
  EXPECT_EQ(pool.kv_pages_used(), 3);
  pool.truncate(t, 64);  // boundary: exactly 2 pages
  EXPECT_EQ(pool.kv_pages_used(), 2);
  pool.truncate(t, 80);  // growing by truncate is a no-op
  EXPECT_EQ(t.n_tokens, 64);
  // Rolling forward again overwrites the dropped positions with new values.
  ASSERT_TRUE(pool.append(t, 10).ok());
  fill(pool, t, 64, 10, 0.5f);
  EXPECT_EQ(read_k(pool, t, 0, 65, 0, 0), 650.5f);
  EXPECT_EQ(read_k(pool, t, 0, 63, 0, 0), 630.0f);
  pool.truncate(t, 33);
  pool.truncate(t, 32);
  EXPECT_EQ(pool.kv_pages_used(), 1);
  pool.truncate(t, 0);
  EXPECT_EQ(pool.kv_pages_used(), 0);
}

TEST(KvPages, SharedPrefixAndCopyOnWrite) {
  auto pool = *KvPagePool::create(small_config(8));
  KvPageTable a;
  ASSERT_TRUE(pool.append(a, 40).ok());  // pages: full + partial (8 tokens)
  fill(pool, a, 0, 40);
  KvPageTable b = pool.share_prefix(a, 40);
  EXPECT_EQ(b.pages, a.pages);
  EXPECT_EQ(pool.refcount(a.pages[0]), 2);
  EXPECT_EQ(pool.refcount(a.pages[1]), 2);
  EXPECT_EQ(pool.kv_pages_used(), 2);

  // b appends into the shared partial page: it gets a private copy, a keeps its own.
  ASSERT_TRUE(pool.append(b, 2).ok());
  EXPECT_EQ(b.pages[0], a.pages[0]);
  EXPECT_NE(b.pages[1], a.pages[1]);
  EXPECT_EQ(pool.refcount(a.pages[1]), 1);
  EXPECT_EQ(pool.refcount(b.pages[1]), 1);
  EXPECT_EQ(pool.kv_pages_used(), 3);
  fill(pool, b, 40, 2, 0.25f);
  EXPECT_EQ(read_k(pool, b, 0, 39, 0, 0), 390.0f);  // copied content
  EXPECT_EQ(read_k(pool, b, 0, 41, 0, 0), 410.25f);
  // a appends to its own (now private) page without touching b.
  ASSERT_TRUE(pool.append(a, 2).ok());
  fill(pool, a, 40, 2, 0.75f);
  EXPECT_EQ(read_k(pool, a, 0, 41, 0, 0), 410.75f);
  EXPECT_EQ(read_k(pool, b, 0, 41, 0, 0), 410.25f);

  // Sharing a whole-page prefix: the next append starts a fresh page, no copy.
  KvPageTable c = pool.share_prefix(a, 32);
  EXPECT_EQ(pool.refcount(a.pages[0]), 3);
  const int64_t used = pool.kv_pages_used();
  ASSERT_TRUE(pool.append(c, 1).ok());
  EXPECT_EQ(pool.kv_pages_used(), used + 1);
  EXPECT_EQ(c.pages[0], a.pages[0]);

  // Explicit copy-on-write and releases in any order leave the pool empty.
  KvPageTable d = pool.share_prefix(b, 42);
  ASSERT_TRUE(pool.make_last_page_private(d).ok());
  EXPECT_NE(d.pages[1], b.pages[1]);
  EXPECT_EQ(read_k(pool, d, 1, 41, 0, 0), 100410.25f);
  for (KvPageTable* t : {&b, &a, &d, &c}) pool.release(*t);
  EXPECT_EQ(pool.kv_pages_used(), 0);
}

TEST(KvPages, ExhaustionIsACleanErrorAndLeavesTheTableUnchanged) {
  auto pool = *KvPagePool::create(small_config(3));
  KvPageTable t;
  ASSERT_TRUE(pool.append(t, 90).ok());  // 3 pages
  auto st = pool.append(t, 7);           // 97 tokens would need a 4th page
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error_message().find("kv cache full"), std::string::npos) << st.error_message();
  EXPECT_EQ(t.n_tokens, 90);
  EXPECT_EQ(t.pages.size(), 3u);
  EXPECT_TRUE(pool.append(t, 6).ok());  // fits in the last page
  // Copy-on-write needs a page too.
  KvPageTable s = pool.share_prefix(t, 80);
  auto cow = pool.append(s, 1);
  EXPECT_FALSE(cow.ok());
  EXPECT_EQ(s.n_tokens, 80);
  EXPECT_FALSE(pool.make_last_page_private(s).ok());
  pool.release(s);
  pool.release(t);
  EXPECT_EQ(pool.kv_pages_free(), 3);
}

TEST(KvPages, AttentionThroughPoolViewsMatchesReference) {
  // A prefix shared between two sequences that then diverge: each attends over its own pages.
  for (KvFormat f : {KvFormat::kF32, KvFormat::kBF16, KvFormat::kInt8}) {
    const KvCacheConfig c{1, 2, 64, 16, f};
    auto pool = *KvPagePool::create(c);
    std::mt19937 rng(21);
    std::normal_distribution<float> dist;
    const int width = 2 * 64;
    const int64_t n_prefix = 45, n_a = 30, n_b = 3;
    std::vector<float> k(static_cast<size_t>((n_prefix + n_a + n_b) * width)), v(k.size());
    for (float& x : k) x = dist(rng);
    for (float& x : v) x = dist(rng);
    KvPageTable a;
    ASSERT_TRUE(pool.append(a, n_prefix).ok());
    pool.write(a, 0, 0, n_prefix, k.data(), v.data());
    KvPageTable b = pool.share_prefix(a, n_prefix);
    ASSERT_TRUE(pool.append(a, n_a).ok());
    pool.write(a, 0, n_prefix, n_a, k.data() + n_prefix * width, v.data() + n_prefix * width);
    ASSERT_TRUE(pool.append(b, n_b).ok());
    const int64_t off_b = (n_prefix + n_a) * width;
    pool.write(b, 0, n_prefix, n_b, k.data() + off_b, v.data() + off_b);

    ThreadPool threads(2);
    AttentionParams p{4, 2, 64, 0.0f, IsaLevel::kAvx512};
    // b's context: prefix + its own rows.
    std::vector<float> kb(k.begin(), k.begin() + n_prefix * width), vb(v.begin(), v.begin() + n_prefix * width);
    kb.insert(kb.end(), k.begin() + off_b, k.end());
    vb.insert(vb.end(), v.begin() + off_b, v.end());
    std::vector<float> q(static_cast<size_t>(n_b * 4 * 64));
    for (float& x : q) x = dist(rng);
    std::vector<float> got(q.size()), want(q.size());
    attention(q.data(), n_b, n_prefix, pool.view(b, 0), p, got.data(), threads);
    attention_reference(q.data(), n_b, n_prefix, kb.data(), vb.data(), n_prefix + n_b, p, want.data());
    double num = 0, den = 0;
    for (size_t i = 0; i < q.size(); ++i) {
      num += (got[i] - want[i]) * double(got[i] - want[i]);
      den += double(want[i]) * want[i];
    }
    EXPECT_LT(num / den, f == KvFormat::kInt8 ? 6e-4 : f == KvFormat::kBF16 ? 3e-5 : 1e-10) << kv_format_name(f);
  }
}

}  // namespace
}  // namespace splash
