// RopeTable fills its rows lazily, one chunk of positions at a time: only the chunks asked for are
// held, every row equals the formula wherever the table starts, and concurrent first uses of the
// same chunk agree.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "backend/cpu/rope.h"

namespace splash {
namespace {

TEST(RopeLazy, HoldsOnlyTheChunksUsed) {
  auto t = RopeTable::create({128, 0, 1000000.0, RopeStyle::kNeox}, 0, 40960);
  ASSERT_TRUE(t.ok()) << t.error_message();
  EXPECT_EQ(t->resident_bytes(), 0);  // nothing before the first use
  const int64_t chunk_bytes = 2 * RopeTable::kChunkPositions * 64 * static_cast<int64_t>(sizeof(float));
  t->cos_row(0);
  t->sin_row(RopeTable::kChunkPositions - 1);
  EXPECT_EQ(t->resident_bytes(), chunk_bytes);
  t->cos_row(40959);  // the last (full) chunk
  EXPECT_EQ(t->resident_bytes(), 2 * chunk_bytes);
  // 40,960 positions eagerly would be 20 MiB.
  EXPECT_LT(t->resident_bytes(), 40960 * 64 * 2 * 4 / 50);
}

TEST(RopeLazy, RowsMatchTheFormulaAcrossChunkEdgesAndOffsets) {
  const double theta = 10000.0;
  for (int64_t begin : {int64_t{0}, int64_t{3}, int64_t{1000}}) {
    auto t = RopeTable::create({16, 12, theta, RopeStyle::kNeox}, begin, begin + 700);
    ASSERT_TRUE(t.ok());
    const int64_t k = RopeTable::kChunkPositions;
    for (int64_t pos : {begin, begin + k - 1, begin + k, begin + 2 * k + 1, begin + 699}) {
      const float* c = t->cos_row(pos);
      const float* s = t->sin_row(pos);
      for (int i = 0; i < 6; ++i) {
        const double a = static_cast<double>(pos) * std::pow(theta, -2.0 * i / 12);
        EXPECT_EQ(c[i], static_cast<float>(std::cos(a))) << "pos " << pos << " i " << i;
        EXPECT_EQ(s[i], static_cast<float>(std::sin(a))) << "pos " << pos << " i " << i;
      }
    }
  }
}

TEST(RopeLazy, ConcurrentFirstUseAgrees) {
  auto t = RopeTable::create({64, 0, 10000.0, RopeStyle::kInterleaved}, 0, 8 * RopeTable::kChunkPositions);
  ASSERT_TRUE(t.ok());
  std::vector<std::vector<float>> seen(4);
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&, th] {
      for (int64_t pos = 0; pos < 8 * RopeTable::kChunkPositions; pos += 37) {
        const float* c = t->cos_row(pos);
        seen[static_cast<size_t>(th)].insert(seen[static_cast<size_t>(th)].end(), c, c + 32);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int th = 1; th < 4; ++th) EXPECT_EQ(seen[static_cast<size_t>(th)], seen[0]);
  EXPECT_EQ(t->resident_bytes(), 8 * 2 * RopeTable::kChunkPositions * 32 * static_cast<int64_t>(sizeof(float)));
}

}  // namespace
}  // namespace splash
