#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/byte_reader.h"
#include "core/dtype.h"
#include "core/half.h"
#include "core/sizes.h"
#include "core/weight_arena.h"

namespace splash {
namespace {

TEST(Sizes, ParsesBytesWithSuffixes) {
  EXPECT_EQ(*parse_size_bytes("28G"), 28ull << 30);
  EXPECT_EQ(*parse_size_bytes("512m"), 512ull << 20);
  EXPECT_EQ(*parse_size_bytes("1.5GiB"), 3ull << 29);
  EXPECT_EQ(*parse_size_bytes("4096"), 4096u);
  EXPECT_FALSE(parse_size_bytes("12X").ok());
  EXPECT_FALSE(parse_size_bytes("").ok());
  EXPECT_FALSE(parse_size_bytes("G").ok());
  EXPECT_FALSE(parse_size_bytes("1.2.3G").ok());
}

TEST(Sizes, ParsesTokenCounts) {
  EXPECT_EQ(*parse_token_count("100K"), 102400u);
  EXPECT_EQ(*parse_token_count("256k"), 262144u);
  EXPECT_EQ(*parse_token_count("4096"), 4096u);
  EXPECT_FALSE(parse_token_count("1.5K").ok());
  EXPECT_FALSE(parse_token_count("10M").ok());
}

TEST(Half, F16RoundTripsEveryValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_f16(f), h) << h;
  }
}

TEST(Half, F16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16(1.0f + 1.0f / 2048), 0x3c00);         // tie -> even
  EXPECT_EQ(f32_to_f16(1.0f + 3.0f / 2048), 0x3c02);         // tie -> even (up)
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);      // tie between 0 and min subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -25)), 0x0002);
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(NAN))));
}

TEST(Half, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  uint32_t bits = 0x3f808000;  // exactly halfway, even below
  float f;
  std::memcpy(&f, &bits, 4);
  EXPECT_EQ(f32_to_bf16(f), 0x3f80);
  bits = 0x3f818000;
  std::memcpy(&f, &bits, 4);
  EXPECT_EQ(f32_to_bf16(f), 0x3f82);
  EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);
}

TEST(DType, SizesAndGgufIds) {
  EXPECT_EQ(*dtype_bytes(DType::kQ8_0, 64), 68u);
  EXPECT_EQ(*dtype_bytes(DType::kQ4_K, 512), 288u);
  EXPECT_FALSE(dtype_bytes(DType::kQ4_0, 33).has_value());
  EXPECT_EQ(*dtype_from_gguf(14), DType::kQ6_K);
  EXPECT_EQ(*dtype_to_gguf(DType::kBF16), 30u);
  EXPECT_FALSE(dtype_from_gguf(4).has_value());  // removed Q4_2
  EXPECT_EQ(*dtype_from_name("q5_k"), DType::kQ5_K);
}

TEST(ByteReader, ShortReadsNameTheField) {
  uint8_t buf[6] = {1, 0, 0, 0, 2, 0};
  ByteReader r({buf, 6}, "x.gguf");
  EXPECT_EQ(*r.read<uint32_t>("a"), 1u);
  auto b = r.read<uint32_t>("tensor count");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("tensor count"), std::string::npos);
  EXPECT_NE(b.error().message.find("x.gguf"), std::string::npos);
}


TEST(WeightArena, BuffersAreZeroedAlignedAndDisjoint) {
  std::vector<ArenaBuffer> bufs;
  // Small ones share chunks; 9 MiB gets a mapping of its own; 0 is empty.
  for (size_t n : {size_t{1}, size_t{100}, size_t{4096}, size_t{3} << 20, size_t{9} << 20, size_t{0}, size_t{70}})
    bufs.push_back(ArenaBuffer::allocate(n));
  EXPECT_TRUE(bufs[5].empty());
  EXPECT_EQ(bufs[5].data(), nullptr);
  for (size_t i = 0; i < bufs.size(); ++i) {
    const ArenaBuffer& b = bufs[i];
    if (b.empty()) continue;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u) << i;
    for (size_t k = 0; k < b.size(); k += 997) ASSERT_EQ(b.data()[k], 0) << i << " " << k;
    EXPECT_EQ(b.data()[b.size() - 1], 0);
    std::memset(b.data(), static_cast<int>(i + 1), b.size());
  }
  // Each buffer still holds its own fill: no two overlap.
  for (size_t i = 0; i < bufs.size(); ++i) {
    const ArenaBuffer& b = bufs[i];
    if (b.empty()) continue;
    EXPECT_EQ(b.data()[0], static_cast<uint8_t>(i + 1));
    EXPECT_EQ(b.data()[b.size() - 1], static_cast<uint8_t>(i + 1));
  }
}

TEST(WeightArena, BufferOutlivesItsNeighboursAndFreshOnesAreZero) {
  ArenaBuffer keep;
  {
    ArenaBuffer a = ArenaBuffer::allocate(1000);
    keep = ArenaBuffer::allocate(5000);
    ArenaBuffer c = ArenaBuffer::allocate(1000);
    std::memset(a.data(), 0xAB, a.size());
    std::memset(keep.data(), 0x5A, keep.size());
    std::memset(c.data(), 0xCD, c.size());
  }
  for (size_t k = 0; k < keep.size(); ++k) ASSERT_EQ(keep.data()[k], 0x5A) << k;
  // Memory is never handed out twice: a new buffer is zero even while the old chunk lives.
  ArenaBuffer fresh = ArenaBuffer::allocate(3000);
  for (size_t k = 0; k < fresh.size(); ++k) ASSERT_EQ(fresh.data()[k], 0) << k;
}

TEST(WeightArena, AsksForHugePagesWhereTheKernelOffersThem) {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  if (!f || !std::getline(f, mode)) GTEST_SKIP() << "no transparent huge pages on this kernel";
  ArenaBuffer b = ArenaBuffer::allocate(size_t{16} << 20);
  // madvise(MADV_HUGEPAGE) succeeds whenever THP is compiled in, whatever the current mode.
  EXPECT_TRUE(b.huge_pages_requested()) << mode;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % (size_t{2} << 20), 0u);
}

}  // namespace
}  // namespace splash
