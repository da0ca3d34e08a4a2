// Quantizers and dequantizers. Expected blocks below are worked out by hand from the GGML layout
// and reference formulas (written in the comments), not by calling the code under test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "formats/quant/dequant.h"
#include "formats/quant/quantize.h"

namespace splash::quant {
namespace {

uint16_t rd16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// --- bit-exact reference quantizers

TEST(QuantExact, Q8_0HandBlock) {
  // amax = 63.5 -> d = 63.5 / 127 = 0.5 exactly (fp16 0x3800), id = 2, q = round(2x).
  float x[32];
  x[0] = -63.5f;
  for (int j = 1; j < 32; ++j) x[j] = 0.5f * static_cast<float>((j * 37) % 201 - 100);  // |x| <= 50
  x[5] = 0.25f;   // 2x = 0.5 -> roundf rounds half away from zero -> 1
  x[6] = -0.25f;  // -> -1
  uint8_t blk[34];
  quantize_row(DType::kQ8_0, x, blk, 32);
  EXPECT_EQ(rd16(blk), 0x3800);
  EXPECT_EQ(static_cast<int8_t>(blk[2]), -127);
  EXPECT_EQ(static_cast<int8_t>(blk[2 + 5]), 1);
  EXPECT_EQ(static_cast<int8_t>(blk[2 + 6]), -1);
  for (int j = 1; j < 32; ++j) {
    if (j == 5 || j == 6) continue;
    EXPECT_EQ(static_cast<int8_t>(blk[2 + j]), (j * 37) % 201 - 100) << j;
  }
  float y[32];
  dequantize_row(DType::kQ8_0, blk, y, 32);
  EXPECT_EQ(y[0], -63.5f);
  EXPECT_EQ(y[5], 0.5f);
  EXPECT_EQ(y[9], x[9]);
}

TEST(QuantExact, Q4_0HandBlockNegativeExtreme) {
  // Signed extreme -8 -> d = -8 / -8 = 1 (fp16 0x3C00), q = min(15, trunc(x + 8.5)).
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j % 16) - 8.0f;  // -8 .. 7, q = x + 8
  x[3] = 7.4f;    // 15.9 -> 15
  x[4] = 7.6f;    // 16.1 -> 16 -> min 15
  x[17] = -0.5f;  // 8.0 -> 8
  x[18] = -0.6f;  // 7.9 -> 7
  uint8_t blk[18];
  quantize_row(DType::kQ4_0, x, blk, 32);
  EXPECT_EQ(rd16(blk), 0x3C00);
  auto q = [&](int j) { return j < 16 ? (blk[2 + j] & 0xF) : (blk[2 + j - 16] >> 4); };
  EXPECT_EQ(q(0), 0);
  EXPECT_EQ(q(3), 15);
  EXPECT_EQ(q(4), 15);
  EXPECT_EQ(q(17), 8);
  EXPECT_EQ(q(18), 7);
  for (int j : {1, 2, 5, 15, 16, 20, 31}) EXPECT_EQ(q(j), j % 16) << j;
  float y[32];
  dequantize_row(DType::kQ4_0, blk, y, 32);
  EXPECT_EQ(y[0], -8.0f);
  EXPECT_EQ(y[4], 7.0f);
  EXPECT_EQ(y[18], -1.0f);
}

TEST(QuantExact, Q4_0HandBlockPositiveExtreme) {
  // Signed extreme +8 -> d = -1 (fp16 0xBC00), id = -1, q = min(15, trunc(-x + 8.5)).
  float x[32] = {};
  x[0] = 8.0f;    // 0.5 -> 0
  x[1] = -7.0f;   // 15.5 -> 15
  x[2] = -7.9f;   // 16.4 -> 16 -> 15
  x[20] = 2.0f;   // 6.5 -> 6
  uint8_t blk[18];
  quantize_row(DType::kQ4_0, x, blk, 32);
  EXPECT_EQ(rd16(blk), 0xBC00);
  EXPECT_EQ(blk[2] & 0xF, 0);
  EXPECT_EQ(blk[3] & 0xF, 15);
  EXPECT_EQ(blk[4] & 0xF, 15);
  EXPECT_EQ(blk[2 + 4] >> 4, 6);
  EXPECT_EQ(blk[2 + 5] & 0xF, 8);  // x = 0 -> 8.5 -> 8
}

// --- dequantization of hand-assembled blocks

TEST(Dequant, Q5_0Block) {
  // d = 2 (0x4000); element 3: nibble 9 + high bit 1 -> 25 - 16 = 9 -> 18; element 19 (high nibble of
  // byte 3, qh bit 19): nibble 2, bit 0 -> 2 - 16 = -14 -> -28.
  uint8_t b[22] = {};
  b[0] = 0x00; b[1] = 0x40;
  uint32_t qh = 1u << 3;
  std::memcpy(b + 2, &qh, 4);
  b[6 + 3] = 0x29;
  float y[32];
  dequantize_row(DType::kQ5_0, b, y, 32);
  EXPECT_EQ(y[3], 18.0f);
  EXPECT_EQ(y[19], -28.0f);
  EXPECT_EQ(y[0], -32.0f);  // nibble 0, no high bit: -16 * 2
}

TEST(Dequant, Q4_1AndQ5_1Blocks) {
  uint8_t b[20] = {};
  b[1] = 0x3C;            // d = 1
  b[2] = 0x00; b[3] = 0xC0;  // m = -2
  b[4 + 7] = 0xF3;        // element 7 = 3*1 - 2 = 1, element 23 = 15 - 2 = 13
  float y[32];
  dequantize_row(DType::kQ4_1, b, y, 32);
  EXPECT_EQ(y[7], 1.0f);
  EXPECT_EQ(y[23], 13.0f);
  uint8_t c[24] = {};
  c[1] = 0x38;  // d = 0.5
  c[3] = 0x3C;  // m = 1
  uint32_t qh = 1u << 31;  // high bit of element 31 (high nibble of byte 15)
  std::memcpy(c + 4, &qh, 4);
  c[8 + 15] = 0x10;  // element 31 nibble 1 -> 17 * 0.5 + 1 = 9.5
  dequantize_row(DType::kQ5_1, c, y, 32);
  EXPECT_EQ(y[31], 9.5f);
  EXPECT_EQ(y[15], 1.0f);
}

TEST(Dequant, Q4_KBlock) {
  // Layout: d, dmin, scales[12], qs[128]. Sub-block 5 (elements 160..191) lives in the high nibbles of
  // qs[64..95]; its 6-bit scale 37 = 0b10'0101 and min 50 = 0b11'0010 are split as: low nibbles in
  // scales[9] (scale low, min high), top 2 bits in bits 6..7 of scales[1] (scale) and scales[5] (min).
  uint8_t b[144] = {};
  b[1] = 0x3C;  // d = 1
  b[3] = 0x38;  // dmin = 0.5
  uint8_t* sc = b + 4;
  sc[9] = 0x25;
  sc[1] = 0x80 | 3;  // also: sub-block 1 scale 3
  sc[5] = 0xC0 | 4;  // sub-block 1 min 4
  uint8_t* qs = b + 16;
  qs[64 + 3] = 0xA0;  // element 163 = 1 * 37 * 10 - 0.5 * 50 = 345
  qs[0 + 6] = 0x70;   // element 32 + 6 (sub-block 1, high nibble of qs[6]) = 3 * 7 - 0.5 * 4 = 19
  float y[256];
  dequantize_row(DType::kQ4_K, b, y, 256);
  EXPECT_EQ(y[163], 345.0f);
  EXPECT_EQ(y[38], 19.0f);
  EXPECT_EQ(y[160], -25.0f);
  EXPECT_EQ(y[6], 0.0f);  // sub-block 0 scale/min 0
}

TEST(Dequant, Q6_KBlock) {
  // ql[128], qh[64], scales[16] (int8), d. Element 200 = half 1, position 72 in it: 64 + l with l = 8,
  // so its low nibble is the high nibble of ql[64 + 8] and its top bits are bits 4..5 of qh[32 + 8];
  // its scale is scales[200 / 16 = 12].
  uint8_t b[210] = {};
  b[208] = 0x00; b[209] = 0x38;  // d = 0.5
  b[64 + 8] = 0x50;              // low 4 bits 5
  b[128 + 32 + 8] = 0x20;        // high 2 bits = 2 -> q = 2 * 16 + 5 = 37 - 32 = 5
  b[192 + 12] = static_cast<uint8_t>(-6);  // scale -6
  float y[256];
  dequantize_row(DType::kQ6_K, b, y, 256);
  EXPECT_EQ(y[200], 0.5f * -6 * 5);
  EXPECT_EQ(y[199], 0.0f * 1 + 0.5f * -6 * -32);  // q = 0 - 32 with the same scale (199 / 16 = 12)
  EXPECT_EQ(y[0], 0.0f);                            // scale 0
}

TEST(Dequant, Q3_KBlock) {
  // hmask[32], qs[64], scales[12], d. Element 70 = half 0, 2-bit plane j = 2 (64..95), l = 6: low bits
  // at bits 4..5 of qs[6]; high bit = bit 2 of hmask[6] (set means no -4). Scale index 0*8 + 2*2 + 0 = 4:
  // low nibble = low nibble of scales[4], top 2 bits = bits 2..3 of scales[8 + 4 % 4 = 8].
  uint8_t b[110] = {};
  b[108] = 0x00; b[109] = 0x3C;  // d = 1
  b[32 + 6] = 0x30;              // q low = 3
  b[6] = 0x04;                   // high bit set -> q = 3
  b[96 + 4] = 0x05;              // scale low 5
  b[96 + 8] = 0x0C;              // top bits 3 -> 6-bit scale 53 -> 53 - 32 = 21
  float y[256];
  dequantize_row(DType::kQ3_K, b, y, 256);
  EXPECT_EQ(y[70], 21.0f * 3);
  EXPECT_EQ(y[71], 21.0f * -4);  // q low 0, high bit clear -> -4
  // Element 255 = half 1, plane 3, l = 31: scale index 8 + 6 + 1 = 15 -> high nibble of scales[7],
  // top bits 6..7 of scales[11]. All zero -> scale -32; q = 0 - 4 -> 128.
  EXPECT_EQ(y[255], 128.0f);
}

TEST(Dequant, Q2_KBlock) {
  // scales[16], qs[64], d, dmin. Element 140 = half 1, plane 0 (128..159), l = 12: bits 0..1 of
  // qs[32 + 12]; scale index 8 + 0 + 0 = 8: x = d * (sc & 15) * q - dmin * (sc >> 4).
  uint8_t b[84] = {};
  b[8] = 0x37;          // scale 7, min 3
  b[16 + 32 + 12] = 0x02;
  b[80] = 0x00; b[81] = 0x40;  // d = 2
  b[82] = 0x00; b[83] = 0x3C;  // dmin = 1
  float y[256];
  dequantize_row(DType::kQ2_K, b, y, 256);
  EXPECT_EQ(y[140], 2.0f * 7 * 2 - 3);
  EXPECT_EQ(y[141], -3.0f);
}

TEST(Dequant, FloatTypes) {
  const uint16_t h[2] = {0x3C00, 0xC000};  // fp16 1, -2
  const uint16_t bf[2] = {0x3F80, 0x4049};  // bf16 1, 3.140625
  float y[2];
  dequantize_row(DType::kF16, h, y, 2);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -2.0f);
  dequantize_row(DType::kBF16, bf, y, 2);
  EXPECT_EQ(y[1], 3.140625f);
}

// --- round trips

double nmse(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    num += (a[k] - b[k]) * static_cast<double>(a[k] - b[k]);
    den += static_cast<double>(a[k]) * a[k];
  }
  return den == 0 ? num : num / den;
}

std::vector<float> round_trip(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q;
  Status s = quantize_tensor(t, x, static_cast<int64_t>(x.size()), q);
  SPLASH_CHECK_MSG(s.ok(), s.error_message());
  std::vector<float> y(x.size());
  dequantize_row(t, q.data(), y.data(), static_cast<int64_t>(x.size()));
  return y;
}

struct Bound {
  DType type;
  double max_nmse;
};

// Measured on this data (gaussian, 64K values): Q8_0 2.9e-5, Q4_0 7.5e-3, Q4_1 6.2e-3, Q5_0 1.8e-3,
// Q5_1 1.4e-3, Q4_K 5.2e-3, Q5_K 1.3e-3, Q6_K 3.2e-4, Q8_K 4.9e-5, F16 4.3e-8, BF16 2.8e-6.
// Bounds leave ~30% headroom.
TEST(QuantRoundTrip, NormalizedMseBounds) {
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(65536);
  for (float& v : x) v = nd(rng);
  const Bound bounds[] = {
      {DType::kQ8_0, 4e-5},   {DType::kQ4_0, 1e-2},   {DType::kQ4_1, 8e-3},   {DType::kQ5_0, 2.4e-3},
      {DType::kQ5_1, 1.9e-3}, {DType::kQ4_K, 6.8e-3}, {DType::kQ5_K, 1.7e-3}, {DType::kQ6_K, 4.2e-4},
      {DType::kQ8_K, 6.4e-5}, {DType::kF16, 6e-8},    {DType::kBF16, 3.7e-6}, {DType::kF32, 0.0},
  };
  for (const Bound& b : bounds) {
    const double e = nmse(x, round_trip(b.type, x));
    std::printf("%-5s nmse %.3g\n", std::string(dtype_name(b.type)).c_str(), e);
    EXPECT_LE(e, b.max_nmse) << dtype_name(b.type);
  }
}

TEST(QuantRoundTrip, KQuantsBeatLegacyOfSameBits) {
  // The scale search must pay off: Q4_K below Q4_0 and Q5_K below Q5_0 on the same data.
  std::mt19937 rng(99);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> x(8192);
  for (float& v : x) v = nd(rng);
  EXPECT_LT(nmse(x, round_trip(DType::kQ4_K, x)), nmse(x, round_trip(DType::kQ4_0, x)));
  EXPECT_LT(nmse(x, round_trip(DType::kQ5_K, x)), nmse(x, round_trip(DType::kQ5_0, x)));
}

TEST(QuantRoundTrip, EdgeCases) {
  const DType types[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                         DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ8_K};
  for (DType t : types) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    std::vector<float> zeros(256, 0.0f);
    for (float v : round_trip(t, zeros)) EXPECT_EQ(v, 0.0f);

    // One huge value among small ones: the huge one survives within a few percent.
    std::vector<float> spike(256, 0.001f);
    spike[77] = 1000.0f;
    auto y = round_trip(t, spike);
    EXPECT_NEAR(y[77], 1000.0f, 30.0f);

    // All negative, the extreme negative: sign and magnitude kept.
    std::vector<float> neg(256);
    for (int k = 0; k < 256; ++k) neg[k] = -1.0f - static_cast<float>(k % 7);
    y = round_trip(t, neg);
    EXPECT_LT(nmse(neg, y), 2e-2);
    EXPECT_NEAR(y[6], -7.0f, 0.5f);

    // Subnormal inputs: no NaN/Inf, results tiny.
    std::vector<float> sub(256, 1e-40f);
    sub[3] = -3e-39f;
    for (float v : round_trip(t, sub)) {
      EXPECT_TRUE(std::isfinite(v));
      EXPECT_LE(std::fabs(v), 1e-30f);
    }

    // Constant block.
    std::vector<float> c(256, 0.75f);
    for (float v : round_trip(t, c)) EXPECT_NEAR(v, 0.75f, 0.75f * 0.02f);
  }
}

TEST(QuantTensor, Errors) {
  std::vector<float> x(96, 1.0f);
  std::vector<uint8_t> out;
  EXPECT_FALSE(quantize_tensor(DType::kQ8_0, x, 48, out).ok());   // 48 not a multiple of 32
  EXPECT_FALSE(quantize_tensor(DType::kQ4_K, x, 96, out).ok());   // 96 not a multiple of 256
  EXPECT_FALSE(quantize_tensor(DType::kQ8_0, x, 64, out).ok());   // 96 values not whole rows of 64
  EXPECT_FALSE(quantize_tensor(DType::kQ2_K, x, 96, out).ok());   // no Q2_K quantizer
  EXPECT_FALSE(quantize_tensor(DType::kI32, x, 96, out).ok());
  x[5] = NAN;
  EXPECT_FALSE(quantize_tensor(DType::kQ8_0, x, 32, out).ok());
  x[5] = 1.0f;
  ASSERT_TRUE(quantize_tensor(DType::kQ8_0, x, 32, out).ok());
  EXPECT_EQ(out.size(), 3u * 34u);
  ASSERT_TRUE(quantize_tensor(DType::kQ8_0, x, 96, out).ok());  // appends
  EXPECT_EQ(out.size(), 6u * 34u);
}

TEST(QuantDeathTest, RowNotAWholeBlockIsAProgramBug) {
  float x[48] = {};
  uint8_t blk[64];
  EXPECT_DEATH(quantize_row(DType::kQ8_0, x, blk, 48), "multiple of the block size");
  EXPECT_DEATH(dequantize_row(DType::kQ4_K, blk, x, 32), "multiple of the block size");
}

}  // namespace
}  // namespace splash::quant
