// Attention over paged KV against the naive materialized-softmax reference, at every ISA level this
// CPU runs, for every KV format, across page-boundary context lengths, GQA ratios, head sizes and
// chunk offsets.
#include "backend/cpu/attention.h"
#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/cpu_features.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

namespace splash {
namespace {

// Pages built by hand (no cache module), with page ids shuffled so contiguous-memory bugs show.
struct TestKv {
  KvPageGeometry geo;
  std::vector<uint8_t> pool;
  std::vector<int32_t> pages;
  int64_t n_tokens = 0;
  std::vector<float> k_deq, v_deq;  // [n, n_kv_head, hd] what the pages decode to

  PagedKvView view() const {
    PagedKvView v;
    v.geo = geo;
    v.layer = 1;
    v.n_tokens = n_tokens;
    v.pool = pool.data();
    v.pages = pages.data();
    return v;
  }
};

TestKv make_kv(KvFormat f, int n_kv_head, int hd, const std::vector<float>& k, const std::vector<float>& v,
               int64_t n, std::mt19937& rng) {
  TestKv kv;
  kv.geo = KvPageGeometry{f, 2, n_kv_head, hd};
  const int64_t np = (n + kKvPageTokens - 1) / kKvPageTokens;
  kv.pages.resize(static_cast<size_t>(np));
  std::iota(kv.pages.begin(), kv.pages.end(), 1);  // page 0 unused: a read of it would be stale zeros
  std::shuffle(kv.pages.begin(), kv.pages.end(), rng);
  kv.pool.assign(static_cast<size_t>((np + 1) * kv.geo.page_bytes()), 0xAB);
  kv.n_tokens = n;
  const int64_t row = int64_t{n_kv_head} * hd;
  kv.k_deq.resize(static_cast<size_t>(n * row));
  kv.v_deq.resize(kv.k_deq.size());
  for (int64_t p = 0; p < n; ++p) {
    uint8_t* base = kv.pool.data() + kv.pages[static_cast<size_t>(p / kKvPageTokens)] * kv.geo.page_bytes();
    const int slot = static_cast<int>(p % kKvPageTokens);
    kv_store_row(kv.geo, base + kv.geo.k_offset(1), slot, k.data() + p * row);
    kv_store_row(kv.geo, base + kv.geo.v_offset(1), slot, v.data() + p * row);
    for (int h = 0; h < n_kv_head; ++h) {
      kv_load_row(kv.geo, base + kv.geo.k_offset(1), h, slot, kv.k_deq.data() + p * row + h * hd);
      kv_load_row(kv.geo, base + kv.geo.v_offset(1), h, slot, kv.v_deq.data() + p * row + h * hd);
    }
  }
  return kv;
}

double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    den += static_cast<double>(want[i]) * want[i];
  }
  return num / std::max(den, 1e-30);
}

std::vector<float> random_vec(size_t n, std::mt19937& rng, float sd = 1.0f) {
  std::normal_distribution<float> dist(0.0f, sd);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

std::vector<IsaLevel> levels() {
  std::vector<IsaLevel> out{IsaLevel::kScalar};
  if (best_isa_level() >= IsaLevel::kAvx2) out.push_back(IsaLevel::kAvx2);
  if (best_isa_level() >= IsaLevel::kAvx512) out.push_back(IsaLevel::kAvx512);
  return out;
}

struct Case {
  int64_t n_kv;   // context after the chunk
  int64_t n_q;    // queries at the end of the context
  int n_head, n_kv_head, hd;
};

// Bounds against the fp32 reference on the original (unquantized) K/V; measured values are printed.
double format_bound(KvFormat f) {
  switch (f) {
    case KvFormat::kF32: return 1e-10;
    case KvFormat::kBF16: return 5e-5;  // measured 2.6e-5 - 3.1e-5 (the 4097-key cases, data-dependent)
    case KvFormat::kInt8: return 6e-4;
  }
  return 0;
}

void run_case(const Case& c, KvFormat f, ThreadPool& pool, std::mt19937& rng, double* worst_fmt) {
  const int64_t row = int64_t{c.n_kv_head} * c.hd;
  // Keys with some spread so the softmax is not flat (scores of several units).
  auto k = random_vec(static_cast<size_t>(c.n_kv * row), rng, 1.5f);
  auto v = random_vec(static_cast<size_t>(c.n_kv * row), rng);
  auto q = random_vec(static_cast<size_t>(c.n_q * c.n_head * c.hd), rng, 1.5f);
  TestKv kv = make_kv(f, c.n_kv_head, c.hd, k, v, c.n_kv, rng);
  AttentionParams p{c.n_head, c.n_kv_head, c.hd, 0.0f, IsaLevel::kScalar};
  const int64_t q_pos0 = c.n_kv - c.n_q;
  std::vector<float> ref_exact(q.size()), ref_deq(q.size());
  attention_reference(q.data(), c.n_q, q_pos0, k.data(), v.data(), c.n_kv, p, ref_exact.data());
  attention_reference(q.data(), c.n_q, q_pos0, kv.k_deq.data(), kv.v_deq.data(), c.n_kv, p, ref_deq.data());
  for (IsaLevel level : levels()) {
    p.level = level;
    std::vector<float> out(q.size(), -7.0f);
    attention(q.data(), c.n_q, q_pos0, kv.view(), p, out.data(), pool);
    const double e_kernel = nmse(out, ref_deq);
    const double e_format = nmse(out, ref_exact);
    *worst_fmt = std::max(*worst_fmt, e_format);
    SCOPED_TRACE(testing::Message() << "n_kv " << c.n_kv << " n_q " << c.n_q << " heads " << c.n_head << "/"
                                    << c.n_kv_head << " hd " << c.hd << " " << kv_format_name(f) << " "
                                    << isa_level_name(level));
    // The kernel itself (same decoded K/V) is exact up to f32 rounding and the vector exp.
    EXPECT_LT(e_kernel, 1e-10);
    EXPECT_LT(e_format, format_bound(f));
  }
}

TEST(Attention, MatchesReferenceAcrossShapesFormatsAndLevels) {
  std::mt19937 rng(1234);
  ThreadPool pool(2);
  const std::vector<Case> cases = {
      // decode: one query at the end of the context
      {1, 1, 4, 4, 64}, {31, 1, 8, 4, 64}, {32, 1, 8, 2, 128}, {33, 1, 4, 1, 64}, {100, 1, 16, 8, 128},
      {1000, 1, 8, 2, 64}, {4097, 1, 16, 8, 128},
      // prefill from empty: the whole context is the chunk
      {31, 31, 4, 2, 64}, {33, 33, 4, 4, 128}, {100, 100, 8, 2, 64},
      // a chunk after cached tokens (position offset), crossing page boundaries
      {100, 37, 8, 4, 64}, {1000, 16, 8, 4, 128}, {4097, 3, 4, 1, 64},
      // register-block tails: g = 1 (32-row tiles), g = 8 (4 tokens x 8 heads), odd row counts (g = 3,
      // 5 tokens), head_dim 72 (AVX2 only; not a multiple of 16) and 48/80 (AVX-512 single-vector
      // tails of the weighted sum), keys not a multiple of 4
      {67, 67, 4, 4, 64}, {90, 13, 16, 2, 128}, {45, 5, 9, 3, 64}, {77, 77, 2, 1, 72},
      {130, 7, 6, 2, 48}, {61, 61, 4, 2, 80}, {35, 2, 8, 1, 64},
  };
  for (KvFormat f : {KvFormat::kF32, KvFormat::kBF16, KvFormat::kInt8}) {
    double worst = 0.0;
    for (const Case& c : cases) run_case(c, f, pool, rng, &worst);
    std::printf("attention nmse vs fp32 reference, %s KV: worst %.3g\n", kv_format_name(f), worst);
  }
}

TEST(Attention, PrefillTierMatchesReference) {
  // The prefill tier (calls of more than 32 query tokens at a context of 256 or more; AVX-512): the f32
  // products keep the f32 tiers' bounds. The opt-in bf16 products (AttentionParams::prefill_bf16;
  // int8 / bf16 KV, AVX512_BF16) add bf16 rounding of the queries and the probabilities, so they get
  // their own bound against the reference on the decoded K/V; against the unquantized K/V they must
  // stay inside the format bounds of MatchesReferenceAcrossShapesFormatsAndLevels.
  const bool has_bf16 = best_isa_level() >= IsaLevel::kAvx512 && cpu_features().avx512bf16;
  std::mt19937 rng(4321);
  ThreadPool pool(2);
  const std::vector<Case> cases = {
      // whole-prompt prefill, GQA 2 / 1 / 8, head_dim 128 / 64, contexts off the page size
      {256, 256, 8, 4, 128}, {301, 301, 4, 4, 64}, {290, 290, 8, 1, 128},
      // chunks after cached tokens, odd row counts (g = 3: 63-row tiles), 48 / 80 dims
      {700, 97, 9, 3, 64}, {1000, 33, 8, 1, 64}, {333, 41, 6, 2, 48}, {513, 70, 4, 2, 80}, {1030, 100, 4, 2, 128},
  };
  for (KvFormat f : {KvFormat::kF32, KvFormat::kBF16, KvFormat::kInt8}) {
    double worst_f32 = 0.0, worst_kernel = 0.0, worst_format = 0.0;
    for (const Case& c : cases) {
      const int64_t row = int64_t{c.n_kv_head} * c.hd;
      auto k = random_vec(static_cast<size_t>(c.n_kv * row), rng, 1.5f);
      auto v = random_vec(static_cast<size_t>(c.n_kv * row), rng);
      auto q = random_vec(static_cast<size_t>(c.n_q * c.n_head * c.hd), rng, 1.5f);
      TestKv kv = make_kv(f, c.n_kv_head, c.hd, k, v, c.n_kv, rng);
      AttentionParams p{c.n_head, c.n_kv_head, c.hd, 0.0f, IsaLevel::kScalar};
      const int64_t q_pos0 = c.n_kv - c.n_q;
      std::vector<float> ref_exact(q.size()), ref_deq(q.size()), out(q.size(), -7.0f), out_f32(q.size(), -7.0f);
      attention_reference(q.data(), c.n_q, q_pos0, k.data(), v.data(), c.n_kv, p, ref_exact.data());
      if (f == KvFormat::kF32)
        ref_deq = ref_exact;  // f32 pages decode to the data itself
      else
        attention_reference(q.data(), c.n_q, q_pos0, kv.k_deq.data(), kv.v_deq.data(), c.n_kv, p, ref_deq.data());
      SCOPED_TRACE(testing::Message() << "n_kv " << c.n_kv << " n_q " << c.n_q << " heads " << c.n_head << "/"
                                      << c.n_kv_head << " hd " << c.hd << " " << kv_format_name(f));
      p.level = IsaLevel::kAvx512;
      attention(q.data(), c.n_q, q_pos0, kv.view(), p, out_f32.data(), pool);
      worst_f32 = std::max(worst_f32, nmse(out_f32, ref_deq));
      EXPECT_LT(nmse(out_f32, ref_deq), 1e-10);
      EXPECT_LT(nmse(out_f32, ref_exact), format_bound(f));
      if (!has_bf16 || f == KvFormat::kF32) continue;
      p.prefill_bf16 = true;
      attention(q.data(), c.n_q, q_pos0, kv.view(), p, out.data(), pool);
      const double e_kernel = nmse(out, ref_deq), e_format = nmse(out, ref_exact);
      worst_kernel = std::max(worst_kernel, e_kernel);
      worst_format = std::max(worst_format, e_format);
      EXPECT_NE(out, out_f32);  // the bf16 products were used
      EXPECT_LT(e_kernel, 2e-5);
      EXPECT_LT(e_format, format_bound(f));
    }
    std::printf("prefill tier nmse, %s KV: f32 products vs decoded K/V worst %.3g\n", kv_format_name(f), worst_f32);
    if (has_bf16 && f != KvFormat::kF32)
      std::printf("  bf16 products: vs decoded K/V worst %.3g, vs fp32 reference worst %.3g\n", worst_kernel,
                  worst_format);
  }
}

TEST(Attention, Bf16PrefillWithoutKeptPagesGivesTheSameResult) {
  // Past its page budget the bf16 prefill converts one page per use instead of keeping each KV
  // head's pages per thread: same conversions, same products, so the same bits.
  if (best_isa_level() < IsaLevel::kAvx512 || !cpu_features().avx512bf16) GTEST_SKIP() << "no AVX512_BF16";
  std::mt19937 rng(8);
  ThreadPool pool(3);
  const Case c{600, 300, 8, 2, 128};
  const int64_t row = int64_t{c.n_kv_head} * c.hd;
  auto k = random_vec(static_cast<size_t>(c.n_kv * row), rng, 1.5f);
  auto v = random_vec(k.size(), rng);
  auto q = random_vec(static_cast<size_t>(c.n_q * c.n_head * c.hd), rng, 1.5f);
  TestKv kv = make_kv(KvFormat::kInt8, c.n_kv_head, c.hd, k, v, c.n_kv, rng);
  AttentionParams p{c.n_head, c.n_kv_head, c.hd, 0.0f, IsaLevel::kAvx512};
  p.prefill_bf16 = true;
  AttentionScratch kept, per_use;
  per_use.bf16_pages_budget = 0;
  std::vector<float> a(q.size()), b(q.size());
  attention(q.data(), c.n_q, c.n_kv - c.n_q, kv.view(), p, a.data(), pool, &kept);
  attention(q.data(), c.n_q, c.n_kv - c.n_q, kv.view(), p, b.data(), pool, &per_use);
  EXPECT_EQ(a, b);
  EXPECT_LT(per_use.bf16.size(), kept.bf16.size());  // the budget was honoured
}

TEST(Attention, SingleThreadAndSplitKAgree) {
  // Split-K (a 2-thread pool on one sequence) must give the single-pass result.
  std::mt19937 rng(77);
  const Case c{2000, 1, 16, 8, 128};
  const int64_t row = int64_t{c.n_kv_head} * c.hd;
  auto k = random_vec(static_cast<size_t>(c.n_kv * row), rng, 1.5f);
  auto v = random_vec(k.size(), rng);
  auto q = random_vec(static_cast<size_t>(c.n_head * c.hd), rng, 1.5f);
  TestKv kv = make_kv(KvFormat::kF32, c.n_kv_head, c.hd, k, v, c.n_kv, rng);
  AttentionParams p{c.n_head, c.n_kv_head, c.hd, 0.0f, IsaLevel::kAvx512};
  ThreadPool one(1), many(3);
  std::vector<float> a(q.size()), b(q.size());
  attention(q.data(), 1, c.n_kv - 1, kv.view(), p, a.data(), one);
  attention(q.data(), 1, c.n_kv - 1, kv.view(), p, b.data(), many);
  EXPECT_LT(nmse(b, a), 1e-12);
}

TEST(Attention, VerifyBlockRowsEqualDecodingThemOneAtATime) {
  // Speculative decoding verifies a block of rows in one call; greedy output must be plain decoding's
  // token for token, so each row must equal, bit for bit, the one-row call at its position (with the
  // KV holding only the tokens up to it). Contexts around page and split-K (16-page) boundaries,
  // GQA ratios 1 to 8, every KV format (int8 and bf16 read in place, f32 through loaded tiles), 2 and
  // 3 threads.
  std::mt19937 rng(91);
  struct Shape { int n_head, n_kv_head, hd; };
  for (const Shape sh : {Shape{6, 6, 64}, Shape{16, 8, 128}, Shape{16, 2, 128}, Shape{8, 1, 64}}) {
    for (KvFormat f : {KvFormat::kInt8, KvFormat::kBF16, KvFormat::kF32}) {
      const int64_t n_kv = 1100, row = int64_t{sh.n_kv_head} * sh.hd;
      auto k = random_vec(static_cast<size_t>(n_kv * row), rng, 1.5f);
      auto v = random_vec(k.size(), rng);
      TestKv kv = make_kv(f, sh.n_kv_head, sh.hd, k, v, n_kv, rng);
      AttentionParams p{sh.n_head, sh.n_kv_head, sh.hd, 0.0f, IsaLevel::kAvx512};
      for (int threads : {2, 3}) {
        ThreadPool pool(threads);
        for (int64_t pos0 : {int64_t{3}, int64_t{28}, int64_t{505}, int64_t{1020}}) {
          for (int64_t n_q : {int64_t{2}, int64_t{8}, int64_t{16}}) {
            const int64_t qrow = int64_t{sh.n_head} * sh.hd;
            auto q = random_vec(static_cast<size_t>(n_q * qrow), rng, 1.5f);
            PagedKvView view = kv.view();
            view.n_tokens = pos0 + n_q;
            std::vector<float> block(q.size()), one(static_cast<size_t>(qrow));
            attention(q.data(), n_q, pos0, view, p, block.data(), pool);
            for (int64_t r = 0; r < n_q; ++r) {
              view.n_tokens = pos0 + r + 1;
              attention(q.data() + r * qrow, 1, pos0 + r, view, p, one.data(), pool);
              const std::vector<float> got(block.begin() + r * qrow, block.begin() + (r + 1) * qrow);
              EXPECT_EQ(got, one) << "heads " << sh.n_head << "/" << sh.n_kv_head << " " << kv_format_name(f)
                                  << " threads " << threads << " pos0 " << pos0 << " n_q " << n_q << " row " << r;
            }
          }
        }
      }
    }
  }
}

TEST(Attention, ReusedScratchGivesTheSameResult) {
  // One AttentionScratch across calls of different shapes (as the forward pass keeps it) must give
  // the same outputs as a fresh one per call, also when the KV format changes between calls (the
  // int8 per-token scales a call leaves in the scratch must not reach a bf16 call).
  std::mt19937 rng(31);
  ThreadPool pool(2);
  AttentionScratch shared;
  const std::vector<Case> cases = {{300, 300, 8, 2, 64}, {2000, 1, 16, 8, 128}, {90, 13, 16, 2, 128}, {50, 50, 4, 4, 64}};
  for (const Case& c : cases) {
    const int64_t row = int64_t{c.n_kv_head} * c.hd;
    auto k = random_vec(static_cast<size_t>(c.n_kv * row), rng, 1.5f);
    auto v = random_vec(k.size(), rng);
    auto q = random_vec(static_cast<size_t>(c.n_q * c.n_head * c.hd), rng, 1.5f);
    for (KvFormat f : {KvFormat::kInt8, KvFormat::kBF16}) {
      TestKv kv = make_kv(f, c.n_kv_head, c.hd, k, v, c.n_kv, rng);
      AttentionParams p{c.n_head, c.n_kv_head, c.hd, 0.0f, IsaLevel::kAvx512};
      std::vector<float> a(q.size()), b(q.size());
      attention(q.data(), c.n_q, c.n_kv - c.n_q, kv.view(), p, a.data(), pool);
      attention(q.data(), c.n_q, c.n_kv - c.n_q, kv.view(), p, b.data(), pool, &shared);
      EXPECT_EQ(a, b) << "n_kv " << c.n_kv << " n_q " << c.n_q << " " << kv_format_name(f);
    }
  }
}

TEST(Attention, CausalMaskIgnoresFutureKeys) {
  // Changing keys after a query's position must not change its output.
  std::mt19937 rng(5);
  const int n = 70, nkv = 2, hd = 64, nh = 4;
  auto k = random_vec(static_cast<size_t>(n * nkv * hd), rng);
  auto v = random_vec(k.size(), rng);
  auto q = random_vec(static_cast<size_t>(n * nh * hd), rng);
  ThreadPool pool(2);
  AttentionParams p{nh, nkv, hd, 0.0f, IsaLevel::kAvx512};
  TestKv kv1 = make_kv(KvFormat::kF32, nkv, hd, k, v, n, rng);
  for (size_t i = static_cast<size_t>(40 * nkv * hd); i < k.size(); ++i) {
    k[i] += 3.0f;
    v[i] -= 2.0f;
  }
  TestKv kv2 = make_kv(KvFormat::kF32, nkv, hd, k, v, n, rng);
  std::vector<float> o1(q.size()), o2(q.size());
  attention(q.data(), n, 0, kv1.view(), p, o1.data(), pool);
  attention(q.data(), n, 0, kv2.view(), p, o2.data(), pool);
  for (int t = 0; t < n; ++t) {
    bool same = true;
    for (int i = 0; i < nh * hd; ++i) same = same && o1[static_cast<size_t>(t * nh * hd + i)] == o2[static_cast<size_t>(t * nh * hd + i)];
    EXPECT_EQ(same, t < 40) << "query " << t;
  }
}

TEST(Attention, Int8RowCodecRoundTrips) {
  const KvPageGeometry geo{KvFormat::kInt8, 1, 2, 64};
  std::vector<uint8_t> block(static_cast<size_t>(geo.block_bytes()));
  std::mt19937 rng(9);
  auto x = random_vec(128, rng);
  x[5] = 10.0f;  // the per-head max maps to exactly 127
  kv_store_row(geo, block.data(), 31, x.data());
  std::vector<float> y(64);
  kv_load_row(geo, block.data(), 0, 31, y.data());
  EXPECT_FLOAT_EQ(y[5], 10.0f);
  for (int d = 0; d < 64; ++d) EXPECT_NEAR(y[static_cast<size_t>(d)], x[static_cast<size_t>(d)], 10.0f / 127 / 2 + 1e-6f);
  kv_load_row(geo, block.data(), 1, 31, y.data());
  float amax = 0;
  for (int d = 64; d < 128; ++d) amax = std::max(amax, std::fabs(x[static_cast<size_t>(d)]));
  for (int d = 0; d < 64; ++d) EXPECT_NEAR(y[static_cast<size_t>(d)], x[static_cast<size_t>(64 + d)], amax / 127 / 2 + 1e-6f);
}

TEST(Attention, Int8RowCodecSimdEqualsScalar) {
  // kv_store_row takes the AVX2 codec where the CPU has it: its bytes and scale must be the scalar
  // codec's exactly (ties at .5 round to even in both; zero rows give zero codes and scale).
  if (best_isa_level() < IsaLevel::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(17);
  for (int hd : {8, 64, 128, 256}) {
    for (int trial = 0; trial < 50; ++trial) {
      auto x = random_vec(static_cast<size_t>(hd), rng);
      if (trial == 1) std::fill(x.begin(), x.end(), 0.0f);
      if (trial == 2)  // max 127: every integer + 0.5 multiple is a tie
        for (int d = 0; d < hd; ++d) x[static_cast<size_t>(d)] = d == 0 ? 127.0f : static_cast<float>(d % 40) - 19.5f;
      if (trial == 3) x[static_cast<size_t>(hd - 1)] = -1e30f;
      std::vector<int8_t> a(static_cast<size_t>(hd)), b(static_cast<size_t>(hd));
      const float sa = cpu::kv_quantize_int8_scalar(x.data(), hd, a.data());
      const float sb = cpu::kv_quantize_int8_avx2(x.data(), hd, b.data());
      EXPECT_EQ(sa, sb) << "hd " << hd << " trial " << trial;
      EXPECT_EQ(a, b) << "hd " << hd << " trial " << trial;
    }
  }
}

// Indicative timings for docs/PERFORMANCE.md, not a test (disabled; run with
// --gtest_also_run_disabled_tests --gtest_filter='*AttentionBench*'). Qwen3-0.6B shapes.
TEST(AttentionBench, DISABLED_Qwen3Shapes) {
  const int nh = 16, nkv = 8, hd = 128;
  ThreadPool pool(2);
  std::mt19937 rng(1);
  auto time_it = [&](const TestKv& kv, const std::vector<float>& q, int64_t n_q, int reps) {
    AttentionParams p{nh, nkv, hd, 0.0f, IsaLevel::kAvx512};
    std::vector<float> out(q.size());
    attention(q.data(), n_q, kv.n_tokens - n_q, kv.view(), p, out.data(), pool);  // warm-up
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) attention(q.data(), n_q, kv.n_tokens - n_q, kv.view(), p, out.data(), pool);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
  };
  for (KvFormat f : {KvFormat::kInt8, KvFormat::kBF16}) {
    for (int64_t n : {512, 2048}) {
      auto k = random_vec(static_cast<size_t>(n * nkv * hd), rng), v = random_vec(k.size(), rng);
      auto q = random_vec(static_cast<size_t>(n * nh * hd), rng);
      TestKv kv = make_kv(f, nkv, hd, k, v, n, rng);
      const double ms = time_it(kv, q, n, 2);
      const double gflop = 4.0 * nh * hd * (double(n) * (n + 1) / 2) / 1e9;  // QK^T + PV, causal half
      std::printf("prefill pp%lld %s: %.1f ms per layer (%.1f GFLOP/s), x28 layers = %.2f s\n",
                  static_cast<long long>(n), kv_format_name(f), ms, gflop / ms * 1e3, ms * 28 / 1e3);
    }
    for (int64_t n : {1024, 4096, 16384}) {
      auto k = random_vec(static_cast<size_t>(n * nkv * hd), rng), v = random_vec(k.size(), rng);
      auto q = random_vec(static_cast<size_t>(nh * hd), rng);
      TestKv kv = make_kv(f, nkv, hd, k, v, n, rng);
      const double ms = time_it(kv, q, 1, 20);
      const double mb = double(n) * nkv * 2 * kv.geo.head_bytes() / kKvPageTokens / 1e6;
      std::printf("decode ctx %lld %s: %.3f ms per layer (%.1f GB/s of KV), x28 layers = %.1f ms\n",
                  static_cast<long long>(n), kv_format_name(f), ms, mb / ms, ms * 28);
    }
  }
}

}  // namespace
}  // namespace splash
