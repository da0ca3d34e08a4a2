#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/byte_reader.h"
#include "core/dtype.h"
#include "core/half.h"
#include "core/sizes.h"

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

}  // namespace
}  // namespace splash
