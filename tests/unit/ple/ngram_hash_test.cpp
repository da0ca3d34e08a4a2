// The C++ n-gram hash against the numpy reference's ngram_rows (tests/reference/qwen4_exp.py), under
// the tiny fixture config and the shipped geometry, with token sequences full of EOS runs, fed in
// random chunks through next_context (so a prefill split anywhere gives the same rows).
#include "ple/ngram_hash.h"

#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "ple_test_util.h"

namespace splash::ple {
namespace {

// The shipped text_config's table (qwen4-exp.md §2, independent of any code here or in the reference).
TEST(NgramHash, ShippedGeometry) {
  NgramHashConfig c;
  c.vocab = 248320;
  c.eos = 248044;  // the defaults are the shipped ngram_size 3, 8 heads, seed 1234, base 2e7, 128
  auto h = NgramHash::make(c);
  ASSERT_TRUE(h.ok()) << h.error_message();
  ASSERT_EQ(h->n_heads(), 16u);
  const std::vector<uint64_t> primes = {20000003, 20000023, 20000033, 20000047, 20000059, 20000063, 20000069, 20000077,
                                        20000081, 20000093, 20000107, 20000147, 20000153, 20000159, 20000161, 20000171};
  EXPECT_EQ(h->head_sizes(), primes);
  EXPECT_EQ(h->head_offsets()[1], 20000003u);
  EXPECT_EQ(h->head_offsets()[2], 40000026u);
  EXPECT_EQ(h->head_offsets()[15], 300001275u);
  EXPECT_EQ(h->logical_rows(), 320001446u);
  EXPECT_EQ(h->padded_rows(), 320001536u);  // 128 shards of 2,500,012 rows
  for (uint64_t m : h->multipliers()) {
    EXPECT_EQ(m % 2, 1u);
    EXPECT_LT(m, ((1ull << 63) - 1) / 248320);
  }
}

TEST(NgramHash, RejectsBadConfig) {
  NgramHashConfig c;
  c.vocab = 100;
  c.eos = 100;  // eos must be a token
  EXPECT_FALSE(NgramHash::make(c).ok());
  c.eos = 1;
  c.ngram_size = 1;
  EXPECT_FALSE(NgramHash::make(c).ok());
  c.ngram_size = 3;
  c.vocab = 0;
  EXPECT_FALSE(NgramHash::make(c).ok());
}

// The window never crosses an EOS: a token right after EOS hashes like one at the sequence start.
TEST(NgramHash, EosRestartsTheWindow) {
  NgramHashConfig c;
  c.vocab = 1000;
  c.eos = 7;
  c.vocab_base = 101;
  c.divisible_by = 8;
  auto h = NgramHash::make(c);
  ASSERT_TRUE(h.ok());
  const std::vector<uint32_t> a = {5, 9, 7, 11, 12}, b = {11, 12};
  std::vector<uint64_t> ra(a.size() * 16), rb(b.size() * 16);
  h->rows(h->start_context(), a, ra);
  h->rows(h->start_context(), b, rb);
  EXPECT_TRUE(std::equal(rb.begin(), rb.end(), ra.begin() + 3 * 16));
  const std::vector<uint32_t> plain = {5, 9, 3, 11, 12};  // no EOS: the trigram of 11 differs
  std::vector<uint64_t> rc(plain.size() * 16);
  h->rows(h->start_context(), plain, rc);
  EXPECT_FALSE(std::equal(rc.begin() + 3 * 16, rc.begin() + 4 * 16, ra.begin() + 3 * 16));
}

TEST(NgramHash, MatchesReference) {
  const auto& ref = test::ReferenceData::get();
  if (ref.dir().empty()) GTEST_SKIP() << ref.why();
  std::ifstream f(ref.dir() + "/hash.json");
  const auto j = nlohmann::json::parse(f);
  std::mt19937 rng(1);
  for (const auto& c : j["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    NgramHashConfig cfg;
    cfg.vocab = c["vocab"].get<uint64_t>();
    cfg.ngram_size = c["ngram_size"].get<uint32_t>();
    cfg.heads_per_ngram = c["heads_per_ngram"].get<uint32_t>();
    cfg.eos = c["eos"].get<uint32_t>();
    cfg.seed = c["seed"].get<uint64_t>();
    cfg.vocab_base = c["base"].get<uint64_t>();
    cfg.divisible_by = c["divisible_by"].get<uint64_t>();
    auto h = NgramHash::make(cfg);
    ASSERT_TRUE(h.ok()) << h.error_message();
    EXPECT_EQ(h->multipliers(), c["multipliers"].get<std::vector<uint64_t>>());
    EXPECT_EQ(h->head_sizes(), c["head_sizes"].get<std::vector<uint64_t>>());
    EXPECT_EQ(h->head_offsets(), c["head_offsets"].get<std::vector<uint64_t>>());
    EXPECT_EQ(h->padded_rows(), c["padded_rows"].get<uint64_t>());
    for (const auto& s : c["sequences"]) {
      const auto tokens = s["tokens"].get<std::vector<uint32_t>>();
      const auto want = s["rows"].get<std::vector<uint64_t>>();
      ASSERT_EQ(want.size(), tokens.size() * h->n_heads());
      std::vector<uint64_t> got(want.size());
      std::vector<uint32_t> ctx = h->start_context();
      for (size_t at = 0; at < tokens.size();) {  // random chunks, 1..8 tokens
        const size_t n = std::min<size_t>(tokens.size() - at, 1 + rng() % 8);
        std::span<const uint32_t> chunk(tokens.data() + at, n);
        h->rows(ctx, chunk, std::span<uint64_t>(got.data() + at * h->n_heads(), n * h->n_heads()));
        ctx = h->next_context(ctx, chunk);
        at += n;
      }
      EXPECT_EQ(got, want);
      for (uint64_t r : got) EXPECT_LT(r, h->padded_rows());
    }
  }
}

}  // namespace
}  // namespace splash::ple
