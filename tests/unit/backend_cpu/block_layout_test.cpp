// Hand-built blocks with known values, read back through dequantize_packed_row and through matmul at
// every level with one-hot activations (x = identity, so y[i, r] = W[r, i]). These pin the GGML
// layouts themselves, independently of the random-block comparisons in matmul_test.cpp.
#include <gtest/gtest.h>

#include <vector>

#include "backend/cpu/matmul.h"
#include "core/half.h"
#include "matmul_test_util.h"

namespace splash {
namespace {

constexpr uint16_t kOne = 0x3C00;  // fp16 1.0

std::vector<IsaLevel> levels_here() {
  std::vector<IsaLevel> out = {IsaLevel::kScalar};
  if (best_isa_level() >= IsaLevel::kAvx2) out.push_back(IsaLevel::kAvx2);
  if (best_isa_level() >= IsaLevel::kAvx512) out.push_back(IsaLevel::kAvx512);
  return out;
}

// Checks one row of `cols` values both ways at every level.
void expect_row(DType type, const std::vector<uint8_t>& bytes, int64_t cols, const std::vector<float>& want) {
  ThreadPool pool(2);
  std::vector<float> eye(static_cast<size_t>(cols * cols), 0.0f);
  for (int64_t c = 0; c < cols; ++c) eye[static_cast<size_t>(c * cols + c)] = 1.0f;
  for (IsaLevel level : levels_here()) {
    SCOPED_TRACE(isa_level_name(level));
    auto w = pack_weights(type, bytes.data(), 1, cols, level);
    ASSERT_TRUE(w.ok()) << w.error_message();
    std::vector<float> row(static_cast<size_t>(cols));
    dequantize_packed_row(*w, 0, row.data());
    std::vector<float> y(static_cast<size_t>(cols));
    matmul(*w, eye.data(), y.data(), cols, pool);  // prefill regime
    std::vector<float> y1(1);
    for (int64_t c = 0; c < cols; ++c) {
      EXPECT_EQ(row[static_cast<size_t>(c)], want[static_cast<size_t>(c)]) << "element " << c;
      // One-hot activations quantize exactly (code 127, scale 1/127), up to f32 rounding.
      EXPECT_NEAR(y[static_cast<size_t>(c)], want[static_cast<size_t>(c)], 1e-4 * (1 + std::fabs(want[c])))
          << "element " << c;
    }
    matmul(*w, eye.data() + 5 * cols, y1.data(), 1, pool);  // decode regime
    EXPECT_NEAR(y1[0], want[5], 1e-4 * (1 + std::fabs(want[5])));
  }
}

TEST(BlockLayout, Q4_0) {
  // Element k (k < 16) is the low nibble of qs[k], element k + 16 the high nibble; value = q - 8.
  std::vector<uint8_t> b(18);
  test::put_u16(b.data(), 0x4000);  // 2.0
  for (int k = 0; k < 16; ++k) b[2 + k] = static_cast<uint8_t>(k | ((15 - k) << 4));
  std::vector<float> want(32);
  for (int k = 0; k < 16; ++k) {
    want[k] = 2.0f * static_cast<float>(k - 8);
    want[k + 16] = 2.0f * static_cast<float>(7 - k);
  }
  expect_row(DType::kQ4_0, b, 32, want);
}

TEST(BlockLayout, Q8_0) {
  std::vector<uint8_t> b(34);
  test::put_u16(b.data(), 0x3800);  // 0.5
  std::vector<float> want(32);
  for (int k = 0; k < 32; ++k) {
    const int q = k * 8 - 128;  // -128 .. 120
    b[2 + k] = static_cast<uint8_t>(static_cast<int8_t>(q));
    want[k] = 0.5f * static_cast<float>(q);
  }
  expect_row(DType::kQ8_0, b, 32, want);
}

// Q4_K / Q5_K scales: bytes 0-3 hold the 6-bit scales of sub-blocks 0-3, bytes 4-7 their mins; bytes
// 8-11 hold the low 4 bits of scale (low nibble) and min (high nibble) of sub-blocks 4-7, whose top
// 2 bits sit in the top bits of bytes 0-3 (scales) and 4-7 (mins).
std::vector<uint8_t> k_scales() {
  // sc = {1, 2, 3, 4, 5, 6, 7, 40}, m = {0, 0, 0, 9, 0, 0, 1, 2}: sc7 = 40 = 0b10'1000 needs top bits.
  return {1, 2, 3, static_cast<uint8_t>(4 | (2 << 6)), 0, 0, 0, 9, 0x05, 0x06, 0x17, 0x28};
}
const float kSc[8] = {1, 2, 3, 4, 5, 6, 7, 40};
const float kMin[8] = {0, 0, 0, 9, 0, 0, 1, 2};

TEST(BlockLayout, Q4_K) {
  // 64-value chunk c uses qs[32c .. 32c+31]: low nibbles are sub-block 2c, high nibbles 2c + 1.
  std::vector<uint8_t> b(144);
  test::put_u16(&b[0], kOne);
  test::put_u16(&b[2], 0x3800);  // dmin 0.5
  const auto sc = k_scales();
  std::copy(sc.begin(), sc.end(), b.begin() + 4);
  for (int l = 0; l < 128; ++l) b[16 + l] = static_cast<uint8_t>(((l % 32) % 16) | (((l / 32) + 1) << 4));
  std::vector<float> want(256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, l = e % 32;
    const int code = j % 2 == 0 ? l % 16 : (j / 2) + 1;
    want[e] = kSc[j] * static_cast<float>(code) - 0.5f * kMin[j];
  }
  expect_row(DType::kQ4_K, b, 256, want);
}

TEST(BlockLayout, Q5_K) {
  // As Q4_K plus qh[32]: value 32 j + l takes bit j of qh[l] as its fifth bit.
  std::vector<uint8_t> b(176);
  test::put_u16(&b[0], kOne);
  test::put_u16(&b[2], 0x3800);
  const auto sc = k_scales();
  std::copy(sc.begin(), sc.end(), b.begin() + 4);
  for (int l = 0; l < 32; ++l) b[16 + l] = static_cast<uint8_t>(l % 2 ? 0xAA : 0x01);  // odd l: odd j
  for (int l = 0; l < 128; ++l) b[48 + l] = static_cast<uint8_t>(3 | (5 << 4));
  std::vector<float> want(256);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, l = e % 32;
    int code = j % 2 == 0 ? 3 : 5;
    const bool high = l % 2 ? (j % 2 == 1) : (j == 0);
    if (high) code += 16;
    want[e] = kSc[j] * static_cast<float>(code) - 0.5f * kMin[j];
  }
  expect_row(DType::kQ5_K, b, 256, want);
}

TEST(BlockLayout, Q6_K) {
  // Per 128-value half: value l (< 32) = ql[l] low | qh[l] bits 0-1; l + 32 = ql[l+32] low | bits 2-3;
  // l + 64 = ql[l] high | bits 4-5; l + 96 = ql[l+32] high | bits 6-7; minus 32; one int8 scale per 16.
  std::vector<uint8_t> b(210);
  for (int l = 0; l < 128; ++l) b[l] = static_cast<uint8_t>((l % 16) | (((l / 16) % 4) << 4));
  for (int l = 0; l < 64; ++l) b[128 + l] = 0xE4;  // bits 0-1: 0, 2-3: 1, 4-5: 2, 6-7: 3
  for (int s = 0; s < 16; ++s) b[192 + s] = static_cast<uint8_t>(static_cast<int8_t>(s % 2 ? -(s + 1) : s + 1));
  test::put_u16(&b[208], 0x3800);  // 0.5
  std::vector<float> want(256);
  for (int e = 0; e < 256; ++e) {
    const int half = e / 128, t = (e % 128) / 32, l = e % 32;
    const uint8_t ql = b[64 * half + l + (t % 2 ? 32 : 0)];
    const int low = t < 2 ? (ql & 15) : (ql >> 4);
    const int code = (low | (t << 4)) - 32;
    const int s = 8 * half + 2 * t + l / 16;
    const float scale = static_cast<float>(s % 2 ? -(s + 1) : s + 1);
    want[e] = 0.5f * scale * static_cast<float>(code);
  }
  expect_row(DType::kQ6_K, b, 256, want);
}

}  // namespace
}  // namespace splash
