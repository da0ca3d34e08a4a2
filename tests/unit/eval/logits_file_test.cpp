// The base-logits file: written and read back, damage found by the checksums, and llama.cpp's own
// --kl-divergence-base layout read as that tool writes it.
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <vector>

#include "eval/logits_file.h"

namespace splash::eval {
namespace {

namespace fs = std::filesystem;

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("splash_logits_test_" + std::to_string(::getpid()) + "_" + name);
}

std::vector<char> read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const fs::path& p, const std::vector<char>& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct Fixture {
  int64_t n_ctx = 8, n_vocab = 11, n_chunk = 2;
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> rows;  // [n_chunk * scored_per_chunk][n_vocab]
  Fixture() {
    std::mt19937 rng(5);
    std::normal_distribution<float> d(0.0f, 2.0f);
    for (int64_t i = 0; i < n_ctx * n_chunk; ++i) tokens.push_back(static_cast<int32_t>(rng() % n_vocab));
    for (int64_t r = 0; r < n_chunk * scored_per_chunk(n_ctx); ++r) {
      std::vector<float> row(static_cast<size_t>(n_vocab));
      for (auto& x : row) x = d(rng);
      rows.push_back(row);
    }
  }
};

void expect_rows(const LogitsBase& b, const Fixture& f) {
  ASSERT_EQ(b.n_ctx(), f.n_ctx);
  ASSERT_EQ(b.n_vocab(), f.n_vocab);
  ASSERT_EQ(b.n_chunk(), f.n_chunk);
  ASSERT_EQ(std::vector<int32_t>(b.tokens().begin(), b.tokens().end()), f.tokens);
  const int64_t per = scored_per_chunk(f.n_ctx);
  for (int64_t c = 0; c < f.n_chunk; ++c)
    for (int64_t i = 0; i < per; ++i) {
      const auto& row = f.rows[static_cast<size_t>(c * per + i)];
      std::vector<uint16_t> codes(row.size());
      const QuantizedHeader h = quantize_log_probs(row, codes);
      const QuantizedLogProbs q = b.row(c, i);
      EXPECT_EQ(q.scale, h.scale);
      EXPECT_EQ(q.min_log_prob, h.min_log_prob);
      EXPECT_EQ(std::vector<uint16_t>(q.codes.begin(), q.codes.end()), codes);
    }
}

TEST(LogitsFile, WriteAndReadBack) {
  Fixture f;
  const fs::path p = temp_path("rt.splg");
  auto w = LogitsWriter::create(p.string(), f.n_ctx, f.n_vocab, f.n_chunk, true, f.tokens);
  ASSERT_TRUE(w.ok()) << w.error_message();
  for (const auto& r : f.rows) ASSERT_TRUE(w->add_row(r).ok());
  EXPECT_FALSE(fs::exists(p)) << "the file appears only once finished";
  ASSERT_TRUE(w->finish().ok());
  auto b = LogitsBase::open(p.string());
  ASSERT_TRUE(b.ok()) << b.error_message();
  EXPECT_FALSE(b->is_llama_cpp());
  expect_rows(*b, f);
  fs::remove(p);
}

TEST(LogitsFile, DamageIsFound) {
  Fixture f;
  const fs::path p = temp_path("dmg.splg");
  {
    auto w = LogitsWriter::create(p.string(), f.n_ctx, f.n_vocab, f.n_chunk, true, f.tokens);
    ASSERT_TRUE(w.ok());
    for (const auto& r : f.rows) ASSERT_TRUE(w->add_row(r).ok());
    ASSERT_TRUE(w->finish().ok());
  }
  const std::vector<char> good = read_all(p);
  auto with = [&](const std::function<void(std::vector<char>&)>& edit) {
    std::vector<char> b = good;
    edit(b);
    write_all(p, b);
    auto r = LogitsBase::open(p.string());
    return r.ok() ? std::string() : r.error_message();
  };
  EXPECT_NE(with([](auto& b) { b[b.size() - 20] ^= 1; }).find("checksum mismatch"), std::string::npos);
  EXPECT_NE(with([](auto& b) { b[9] ^= 1; }).find("header checksum"), std::string::npos);
  EXPECT_NE(with([](auto& b) { b.resize(b.size() - 2); }).find("bytes"), std::string::npos);
  EXPECT_NE(with([](auto& b) { b[0] = 'X'; }).find("not a logits file"), std::string::npos);
  fs::remove(p);
}

TEST(LogitsFile, ReadsLlamaCppLayout) {
  // llama-perplexity --kl-divergence-base: "_logits_", u32 n_ctx, i32 n_vocab, i32 n_chunk, the
  // tokens, then per scored token f32 scale, f32 min_log_prob and n_vocab (rounded up to even)
  // uint16 codes.
  Fixture f;
  std::vector<char> bytes;
  auto put = [&](const void* p, size_t n) {
    bytes.insert(bytes.end(), static_cast<const char*>(p), static_cast<const char*>(p) + n);
  };
  put("_logits_", 8);
  const uint32_t n_ctx = static_cast<uint32_t>(f.n_ctx);
  const int32_t n_vocab = static_cast<int32_t>(f.n_vocab), n_chunk = static_cast<int32_t>(f.n_chunk);
  put(&n_ctx, 4);
  put(&n_vocab, 4);
  put(&n_chunk, 4);
  put(f.tokens.data(), f.tokens.size() * 4);
  for (const auto& r : f.rows) {
    std::vector<uint16_t> codes(static_cast<size_t>(2 * ((n_vocab + 1) / 2)), 0);
    const QuantizedHeader h = quantize_log_probs(r, std::span<uint16_t>(codes.data(), r.size()));
    put(&h.scale, 4);
    put(&h.min_log_prob, 4);
    put(codes.data(), codes.size() * 2);
  }
  const fs::path p = temp_path("llama.kld");
  write_all(p, bytes);
  auto b = LogitsBase::open(p.string());
  ASSERT_TRUE(b.ok()) << b.error_message();
  EXPECT_TRUE(b->is_llama_cpp());
  expect_rows(*b, f);
  fs::remove(p);
}

}  // namespace
}  // namespace splash::eval
