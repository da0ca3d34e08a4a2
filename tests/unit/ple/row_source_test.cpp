// Every placement returns the numpy reference's table rows byte for byte (the tiny qwen4_exp
// fixtures: bf16 and fp8 Hugging Face shards, the fp8 tensors spread over 4 files, GGUF), for id
// sets with duplicates, adjacent runs, shard boundaries and the padded tail; and the ssd placement's
// cache bound, hit/miss counts, read coalescing and prefetch.
#include "ple/row_source.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "ple_test_util.h"

namespace splash::ple {
namespace {

constexpr const char* kPrefix = "model.language_model.layers.1.ple.ple_embedding.";
constexpr uint64_t kShardRows = 144;  // 1,152 padded rows in 8 shards
constexpr uint64_t kLogicalRows = 1104;

struct Layout {
  const char* name;
  const char* path;      // under fixtures/
  const char* expected;  // rows_<expected>.f32
};
const Layout kLayouts[] = {{"hf", "hf", "hf"},
                           {"hf_fp8", "hf_fp8", "hf_fp8"},
                           {"hf_fp8_spread", "hf_fp8_spread", "hf_fp8"},
                           {"gguf", "gguf/model.gguf", "gguf"}};

Result<TableLayout> locate(const Layout& l) {
  const std::string path = test::ReferenceData::get().dir() + "/fixtures/" + l.path;
  if (std::string(l.name) == "gguf") return locate_gguf_table(path);
  return locate_hf_table(path, kPrefix);
}

std::vector<std::vector<uint64_t>> id_sets() {
  std::vector<std::vector<uint64_t>> sets;
  std::mt19937_64 rng(43);
  std::vector<uint64_t> random(300);
  for (auto& r : random) r = rng() % (kShardRows * 8);
  sets.push_back(random);
  sets.push_back({5, 5, 5, 900, 5, 900});  // duplicates
  std::vector<uint64_t> run(41);
  std::iota(run.begin(), run.end(), 100);  // adjacent rows
  sets.push_back(run);
  std::vector<uint64_t> edges;
  for (uint64_t s = 1; s < 8; ++s) edges.insert(edges.end(), {s * kShardRows - 1, s * kShardRows});
  edges.insert(edges.end(), {0, kShardRows * 8 - 1});
  sets.push_back(edges);
  std::vector<uint64_t> tail(kShardRows * 8 - kLogicalRows);
  std::iota(tail.begin(), tail.end(), kLogicalRows);  // the padded rows no hash reaches
  sets.push_back(tail);
  return sets;
}

RowSourceOptions opts(Placement p, uint64_t cache_bytes, bool direct_io, uint32_t io_depth = 16) {
  RowSourceOptions o;
  o.io_depth = io_depth;
  o.placement = p;
  o.cache_bytes = cache_bytes;
  o.direct_io = direct_io;
  return o;
}

struct Case {
  const char* name;
  RowSourceOptions options;
};
const Case kCases[] = {
    {"resident", opts(Placement::kResident, 0, false)},
    {"mmap", opts(Placement::kMmap, 0, false)},
    {"ssd_nocache_direct", opts(Placement::kSsd, 0, true)},
    {"ssd_small_direct", opts(Placement::kSsd, 16 * 8, true)},
    {"ssd_small_buffered", opts(Placement::kSsd, 16 * 8, false)},
    {"ssd_small_depth1", opts(Placement::kSsd, 16 * 8, true, 1)},
    {"ssd_big_buffered", opts(Placement::kSsd, 1 << 20, false)},
};

class PleRowSource : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::ReferenceData::get().dir().empty()) GTEST_SKIP() << test::ReferenceData::get().why();
  }
  static std::unique_ptr<RowSource> open(const char* layout, RowSourceOptions o) {
    for (const auto& l : kLayouts)
      if (std::string(l.name) == layout) {
        auto t = locate(l);
        EXPECT_TRUE(t.ok()) << t.error_message();
        auto s = open_row_source(*t, o);
        EXPECT_TRUE(s.ok()) << s.error_message();
        return std::move(*s);
      }
    return nullptr;
  }
};

TEST_F(PleRowSource, EveryPlacementMatchesTheReference) {
  const auto sets = id_sets();
  for (const auto& l : kLayouts) {
    auto t = locate(l);
    ASSERT_TRUE(t.ok()) << l.name << ": " << t.error_message();
    EXPECT_EQ(t->n_rows, kShardRows * 8) << l.name;
    EXPECT_EQ(t->width, 4u) << l.name;
    const std::vector<float> want =
        test::ReferenceData::read_f32(test::ReferenceData::get().dir() + "/rows_" + l.expected + ".f32");
    ASSERT_EQ(want.size(), t->n_rows * t->width);
    for (const auto& c : kCases) {
      SCOPED_TRACE(std::string(l.name) + " " + c.name);
      auto src = open_row_source(*t, c.options);
      ASSERT_TRUE(src.ok()) << src.error_message();
      for (int pass = 0; pass < 2; ++pass) {  // the second pass finds rows in the cache
        for (const auto& ids : sets) {
          std::vector<float> got(ids.size() * t->width, -1.0f);
          auto st = (*src)->gather(ids, got);
          ASSERT_TRUE(st.ok()) << st.error_message();
          for (size_t i = 0; i < ids.size(); ++i)
            ASSERT_EQ(std::memcmp(got.data() + i * 4, want.data() + ids[i] * 4, 16), 0) << "row " << ids[i];
        }
      }
      // rows past the table are refused, not read
      std::vector<uint64_t> bad = {3, kShardRows * 8};
      std::vector<float> out(8);
      auto st = (*src)->gather(bad, out);
      ASSERT_FALSE(st.ok());
      EXPECT_NE(st.error_message().find("past the table"), std::string::npos) << st.error_message();
    }
  }
}

TEST_F(PleRowSource, LayoutsNameTheirFormat) {
  EXPECT_EQ(row_format_name(*locate(kLayouts[0])), "bf16");
  EXPECT_EQ(row_format_name(*locate(kLayouts[1])), "fp8");
  EXPECT_EQ(row_format_name(*locate(kLayouts[3])), "f32");
  auto spread = locate(kLayouts[2]);
  ASSERT_TRUE(spread.ok()) << spread.error_message();
  EXPECT_EQ(spread->segments.size(), 8u);
  std::set<std::string> files;
  for (const auto& s : spread->segments) files.insert(s.path);
  EXPECT_GE(files.size(), 3u);  // the spread export really spans files
  EXPECT_NE(locate(kLayouts[1])->scale, 1.0f);
  auto missing =
      locate_hf_table(test::ReferenceData::get().dir() + "/fixtures/hf", "model.layers.1.ple.ple_embedding.");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error_message().find("no PLE table shards"), std::string::npos);
}

TEST_F(PleRowSource, SsdCacheObeysItsBoundAndCounts) {
  auto src = open("hf", opts(Placement::kSsd, 16 * 8, false));
  std::vector<float> out(400 * 4);
  auto gather = [&](std::vector<uint64_t> ids) {
    auto st = src->gather(ids, std::span<float>(out.data(), ids.size() * 4));
    ASSERT_TRUE(st.ok()) << st.error_message();
  };
  gather({1, 2, 3});
  PleStats s = src->stats();
  EXPECT_EQ(s.cache_misses, 3u);
  EXPECT_EQ(s.cache_hits, 0u);
  EXPECT_EQ(s.cache_bytes, 16u * 8);
  gather({3, 2, 1, 1});
  s = src->stats();
  EXPECT_EQ(s.cache_misses, 3u);
  EXPECT_EQ(s.cache_hits, 3u);  // one per distinct row
  const uint64_t bytes = s.bytes_read;
  gather({600, 600, 600});
  s = src->stats();
  EXPECT_EQ(s.cache_misses, 4u);
  EXPECT_EQ(s.bytes_read, bytes + 8);  // one row read once
  std::vector<uint64_t> many;
  for (uint64_t r = 0; r < 400; ++r) many.push_back(r * 2);
  gather(many);
  s = src->stats();
  EXPECT_LE(s.resident_bytes, 16u * 8);
  EXPECT_EQ(s.resident_bytes, 16u * 8);
  EXPECT_EQ(s.rows_gathered, 3u + 4 + 3 + 400);
  EXPECT_EQ(s.placement, Placement::kSsd);
  EXPECT_EQ(s.table_bytes, kShardRows * 8 * 8);
}

TEST_F(PleRowSource, SsdCoalescesAdjacentRowsOnly) {
  auto src = open("hf", opts(Placement::kSsd, 1 << 20, false));
  std::vector<uint64_t> run(10);
  std::iota(run.begin(), run.end(), 10);
  std::vector<float> out(10 * 4);
  ASSERT_TRUE(src->gather(run, out).ok());
  PleStats s = src->stats();
  EXPECT_EQ(s.reads, 1u);
  EXPECT_EQ(s.bytes_read, 10u * 8);
  std::vector<uint64_t> gap = {30, 32};  // a gap is not bridged
  ASSERT_TRUE(src->gather(gap, std::span<float>(out.data(), 8)).ok());
  s = src->stats();
  EXPECT_EQ(s.reads, 3u);
  EXPECT_EQ(s.bytes_read, 12u * 8);
  EXPECT_FALSE(s.direct_io);
}

TEST_F(PleRowSource, SsdDirectReadsWholeBlocksOnce) {
  auto src = open("hf", opts(Placement::kSsd, 1 << 20, true));
  if (!src->stats().direct_io) GTEST_SKIP() << "the file system refuses O_DIRECT";
  std::vector<uint64_t> ids = {10, 12, 14, 11};  // one 4 KiB block
  std::vector<float> out(ids.size() * 4);
  ASSERT_TRUE(src->gather(ids, out).ok());
  PleStats s = src->stats();
  EXPECT_EQ(s.reads, 1u);
  EXPECT_EQ(s.cache_misses, 4u);
  EXPECT_LE(s.bytes_read, 8192u);
}

TEST_F(PleRowSource, PrefetchThenGatherReadsNothingMore) {
  auto src = open("hf_fp8", opts(Placement::kSsd, 1 << 20, false));
  std::vector<uint64_t> ids = {7, 500, 501, 502, 1000, 7, 143, 144};
  src->prefetch(ids);
  src->wait_prefetch();
  const PleStats before = src->stats();
  EXPECT_EQ(before.rows_prefetched, 7u);
  EXPECT_EQ(before.cache_misses, 7u);
  std::vector<float> out(ids.size() * 4);
  ASSERT_TRUE(src->gather(ids, out).ok());
  const PleStats after = src->stats();
  EXPECT_EQ(after.bytes_read, before.bytes_read);
  EXPECT_EQ(after.reads, before.reads);
  EXPECT_EQ(after.cache_hits, 7u);
}

// A gather right behind its prefetch waits for the rows in flight instead of reading them again.
TEST_F(PleRowSource, GatherWaitsForRowsInFlight) {
  auto src = open("hf", opts(Placement::kSsd, 1 << 20, false));
  const std::vector<float> want = test::ReferenceData::read_f32(test::ReferenceData::get().dir() + "/rows_hf.f32");
  std::set<uint64_t> distinct;
  for (int round = 0; round < 20; ++round) {
    std::vector<uint64_t> ids;
    for (uint64_t k = 0; k < 16; ++k) ids.push_back((round * 37 + k * 61) % 1152);
    distinct.insert(ids.begin(), ids.end());
    src->prefetch(ids);
    std::vector<float> out(ids.size() * 4);
    ASSERT_TRUE(src->gather(ids, out).ok());
    for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(std::memcmp(out.data() + i * 4, want.data() + ids[i] * 4, 16), 0);
  }
  src->wait_prefetch();
  const PleStats s = src->stats();
  EXPECT_EQ(s.cache_hits, 20u * 16);              // no gathered row was read by the gather
  EXPECT_EQ(s.rows_prefetched, distinct.size());  // every row read once, by the prefetch thread
  EXPECT_EQ(s.cache_misses, distinct.size());
}

TEST_F(PleRowSource, PrefetchWithoutCacheReadsNothing) {
  auto src = open("hf", opts(Placement::kSsd, 0, false));
  std::vector<uint64_t> ids = {1, 2};
  src->prefetch(ids);
  src->wait_prefetch();
  EXPECT_EQ(src->stats().bytes_read, 0u);
}

TEST_F(PleRowSource, MmapAndResidentReportResidency) {
  auto res = open("hf", opts(Placement::kResident, 0, false));
  EXPECT_EQ(res->stats().resident_bytes, kShardRows * 8 * 8);
  EXPECT_EQ(res->stats().bytes_read, kShardRows * 8 * 8);
  auto mm = open("hf", opts(Placement::kMmap, 0, false));
  std::vector<uint64_t> ids = {0, 1000};
  mm->prefetch(ids);
  std::vector<float> out(8);
  ASSERT_TRUE(mm->gather(ids, out).ok());
  EXPECT_GT(mm->stats().resident_bytes, 0u);  // the gathered pages are in the page cache
  EXPECT_LE(mm->stats().resident_bytes, mm->stats().table_bytes);
  EXPECT_EQ(mm->stats().rows_gathered, 2u);
}

}  // namespace
}  // namespace splash::ple

namespace splash::ple {
namespace {

// tmpfs took O_DIRECT only from Linux 6.6 on: whichever way the ssd placement reads it (direct with
// AIO, or the buffered fallback), the rows are the reference's.
TEST_F(PleRowSource, SsdReadsFromTmpfs) {
  if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  std::string dir = "/dev/shm/splash-ple-XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  const std::string src_path = test::ReferenceData::get().dir() + "/fixtures/gguf/model.gguf";
  std::filesystem::copy_file(src_path, dir + "/model.gguf");
  auto t = locate_gguf_table(dir + "/model.gguf");
  ASSERT_TRUE(t.ok()) << t.error_message();
  auto src = open_row_source(*t, opts(Placement::kSsd, 1 << 20, true));
  ASSERT_TRUE(src.ok()) << src.error_message();
  const std::vector<float> want = test::ReferenceData::read_f32(test::ReferenceData::get().dir() + "/rows_gguf.f32");
  std::vector<uint64_t> ids = {0, 1, 2, 500, 1151};
  std::vector<float> out(ids.size() * 4);
  ASSERT_TRUE((*src)->gather(ids, out).ok());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(std::memcmp(out.data() + i * 4, want.data() + ids[i] * 4, 16), 0);
  src->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace splash::ple
