#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "core/half.h"
#include "formats/mlx_quant.h"
#include "formats/safetensors_writer.h"

namespace splash {
namespace {

// MLX's byte layout for the widths that do not divide 32, restated from its CPU kernel: 3-bit packs
// 8 codes into 3 bytes, 5-bit 8 codes into 5 bytes, 6-bit 4 codes into 3 bytes, lowest code in the
// lowest bits. These decoders are written byte by byte, independently of our bit-stream code.
std::vector<uint8_t> decode_mlx_bytes(const std::vector<uint8_t>& b, uint32_t bits, size_t n) {
  std::vector<uint8_t> c;
  for (size_t i = 0; c.size() < n; ) {
    const uint8_t* w = b.data() + i;
    if (bits == 3) {
      c.insert(c.end(), {uint8_t(w[0] & 7), uint8_t((w[0] >> 3) & 7), uint8_t((w[0] >> 6) | ((w[1] & 1) << 2)),
                         uint8_t((w[1] >> 1) & 7), uint8_t((w[1] >> 4) & 7), uint8_t((w[1] >> 7) | ((w[2] & 3) << 1)),
                         uint8_t((w[2] >> 2) & 7), uint8_t(w[2] >> 5)});
      i += 3;
    } else if (bits == 5) {
      c.insert(c.end(), {uint8_t(w[0] & 31), uint8_t((w[0] >> 5) | ((w[1] & 3) << 3)), uint8_t((w[1] >> 2) & 31),
                         uint8_t((w[1] >> 7) | ((w[2] & 15) << 1)), uint8_t((w[2] >> 4) | ((w[3] & 1) << 4)),
                         uint8_t((w[3] >> 1) & 31), uint8_t((w[3] >> 6) | ((w[4] & 7) << 2)), uint8_t(w[4] >> 3)});
      i += 5;
    } else if (bits == 6) {
      c.insert(c.end(), {uint8_t(w[0] & 63), uint8_t((w[0] >> 6) | ((w[1] & 15) << 2)),
                         uint8_t((w[1] >> 4) | ((w[2] & 3) << 4)), uint8_t(w[2] >> 2)});
      i += 3;
    } else {  // 2, 4, 8: 8/bits codes per byte, low bits first
      for (uint32_t k = 0; k < 8 / bits; ++k) c.push_back(uint8_t((w[0] >> (k * bits)) & ((1u << bits) - 1)));
      i += 1;
    }
  }
  return c;
}

std::vector<uint8_t> word_bytes(const std::vector<uint32_t>& w) {
  std::vector<uint8_t> b(w.size() * 4);
  std::memcpy(b.data(), w.data(), b.size());  // x86-64 is little-endian, as the format
  return b;
}

TEST(MlxQuantPacking, KnownWordsPerBitWidth) {
  // Codes 1..8 (mod 2^bits) then zeros, 32 codes. Expected words worked out by hand from the rule
  // "code j at bit j*bits":
  std::vector<uint8_t> codes(32, 0);
  for (int j = 0; j < 8; ++j) codes[static_cast<size_t>(j)] = static_cast<uint8_t>(j + 1);
  // 4 bits: nibbles 1..8 -> 0x87654321.
  EXPECT_EQ(mlx_pack_codes(codes, 4)[0], 0x87654321u);
  // 8 bits: bytes 1,2,3,4 -> 0x04030201, then 0x08070605.
  auto w8 = mlx_pack_codes(codes, 8);
  EXPECT_EQ(w8[0], 0x04030201u);
  EXPECT_EQ(w8[1], 0x08070605u);
  // 2 bits: codes 1,2,3,0(=4 mod 4),1,2,3,0 -> 0b00111001 twice = 0x3939.
  std::vector<uint8_t> c2(codes);
  for (auto& c : c2) c &= 3;
  EXPECT_EQ(mlx_pack_codes(c2, 2)[0], 0x3939u);
  // 3 bits: codes 1..7,0 -> 1 | 2<<3 | 3<<6 | 4<<9 | 5<<12 | 6<<15 | 7<<18 = 0x1F58D1 (24 bits).
  std::vector<uint8_t> c3(codes);
  for (auto& c : c3) c &= 7;
  EXPECT_EQ(mlx_pack_codes(c3, 3)[0], 0x001F58D1u);
  // 6 bits: codes 1,2,3,4 -> 1 | 2<<6 | 3<<12 | 4<<18 = 0x103081; codes 5,6 -> 5<<24 | (6&3)<<30 in
  // word 0 (0x85103081), the high bits of 6 (6>>2 = 1) at bit 0 of word 1, then 7<<4 | 8<<10.
  auto w6 = mlx_pack_codes(codes, 6);
  EXPECT_EQ(w6[0], 0x85103081u);
  EXPECT_EQ(w6[1], 0x00002071u);
  // 5 bits: 1 | 2<<5 | 3<<10 | 4<<15 | 5<<20 | 6<<25 | (7&3)<<30 = 0xCC520C41, then 7>>2 = 1 | 8<<3.
  auto w5 = mlx_pack_codes(codes, 5);
  EXPECT_EQ(w5[0], 0xCC520C41u);
  EXPECT_EQ(w5[1], 0x00000041u);
}

TEST(MlxQuantPacking, MatchesMlxByteLayoutForEveryWidth) {
  std::mt19937 rng(7);
  for (uint32_t bits : {2u, 3u, 4u, 5u, 6u, 8u}) {
    std::vector<uint8_t> codes(128);
    for (auto& c : codes) c = static_cast<uint8_t>(rng() & ((1u << bits) - 1));
    auto words = mlx_pack_codes(codes, bits);
    ASSERT_EQ(words.size(), 128 * bits / 32) << bits;
    EXPECT_EQ(decode_mlx_bytes(word_bytes(words), bits, 128), codes) << bits;
    std::vector<uint8_t> back(128);
    mlx_unpack_codes(word_bytes(words), bits, back);
    EXPECT_EQ(back, codes) << bits;
  }
}

TEST(MlxQuantize, EdgeHandlingFollowsMlxFormula) {
  // A 4-bit group holding 0..15 (max dominates): scale = -1, bias = 15, code = 15 - w.
  std::vector<float> w(64);
  for (int j = 0; j < 32; ++j) w[static_cast<size_t>(j)] = static_cast<float>(j % 16);
  // Second group -15..0 (min dominates): scale = 1, bias = -15, code = w + 15.
  for (int j = 32; j < 64; ++j) w[static_cast<size_t>(j)] = -static_cast<float>(j % 16);
  auto q = mlx_quantize(w, 1, 64, {32, 4}, DType::kF32);
  ASSERT_TRUE(q.ok()) << q.error_message();
  float s[2], b[2];
  std::memcpy(s, q->scales.data(), 8);
  std::memcpy(b, q->biases.data(), 8);
  EXPECT_EQ(s[0], -1.0f);
  EXPECT_EQ(b[0], 15.0f);
  EXPECT_EQ(s[1], 1.0f);
  EXPECT_EQ(b[1], -15.0f);
  std::vector<uint8_t> codes(64);
  mlx_unpack_codes(word_bytes(q->weight), 4, codes);
  EXPECT_EQ(codes[0], 15);
  EXPECT_EQ(codes[3], 12);
  EXPECT_EQ(codes[32], 15);  // w = -0 -> 15
  EXPECT_EQ(codes[33], 14);  // w = -1
  // Exact reconstruction of integer grids.
  std::vector<float> out(64);
  ASSERT_TRUE(mlx_dequantize(word_bytes(q->weight), q->scales, q->biases, DType::kF32, {32, 4}, 1, 64, out).ok());
  for (size_t j = 0; j < 64; ++j) EXPECT_EQ(out[j], w[j]) << j;

  // A constant group: range 0 -> scale eps; the value itself is the edge and comes back exactly.
  std::vector<float> c(32, 0.37f);
  auto qc = mlx_quantize(c, 1, 32, {32, 8}, DType::kF32);
  ASSERT_TRUE(qc.ok());
  std::vector<float> oc(32);
  ASSERT_TRUE(mlx_dequantize(word_bytes(qc->weight), qc->scales, qc->biases, DType::kF32, {32, 8}, 1, 32, oc).ok());
  EXPECT_NEAR(oc[5], 0.37f, 1e-6f);
  std::vector<float> z(32, 0.0f);
  auto qz = mlx_quantize(z, 1, 32, {32, 4}, DType::kF16);
  ASSERT_TRUE(qz.ok());
  std::vector<float> oz(32);
  ASSERT_TRUE(mlx_dequantize(word_bytes(qz->weight), qz->scales, qz->biases, DType::kF16, {32, 4}, 1, 32, oz).ok());
  EXPECT_EQ(oz[0], 0.0f);
}

// Normalized MSE (sum (w - w')^2 / sum w^2) of a quantize -> dequantize round trip of N(0, 1)
// weights, 64 rows x 512, fixed seed. Measured (f32 scales / bf16 scales):
//   bits 2: g32 0.130/0.130   g64 0.155/0.155   g128 0.181/0.181
//   bits 3: g32 0.0293/0.0293 g64 0.0361/0.0361 g128 0.0437/0.0437
//   bits 4: g32 6.59e-3/6.61e-3 g64 8.30e-3/8.32e-3 g128 1.01e-2/1.01e-2
//   bits 5: g32 1.53e-3/1.56e-3 g64 1.94e-3/1.98e-3 g128 2.40e-3/2.43e-3
//   bits 6: g32 3.69e-4/4.03e-4 g64 4.75e-4/5.18e-4 g128 5.85e-4/6.20e-4
//   bits 8: g32 2.27e-5/5.80e-5 g64 2.88e-5/7.42e-5 g128 3.55e-5/8.13e-5
// (4-bit/64 agrees with the uniform-quantizer estimate step^2/12 = (4.8/15)^2/12 = 8.5e-3.)
// Bounds are those values + 10%: a packing or rounding bug shows up as a far larger error.
TEST(MlxQuantize, RoundTripErrorPerBitsAndGroup) {
  struct Case {
    uint32_t bits, group;
    double f32, bf16;
  };
  const Case cases[] = {
      {2, 32, 0.130, 0.130},      {2, 64, 0.155, 0.155},      {2, 128, 0.181, 0.181},
      {3, 32, 0.0293, 0.0293},    {3, 64, 0.0361, 0.0361},    {3, 128, 0.0437, 0.0437},
      {4, 32, 6.59e-3, 6.61e-3},  {4, 64, 8.30e-3, 8.32e-3},  {4, 128, 1.01e-2, 1.01e-2},
      {5, 32, 1.53e-3, 1.56e-3},  {5, 64, 1.94e-3, 1.98e-3},  {5, 128, 2.40e-3, 2.43e-3},
      {6, 32, 3.69e-4, 4.03e-4},  {6, 64, 4.75e-4, 5.18e-4},  {6, 128, 5.85e-4, 6.20e-4},
      {8, 32, 2.27e-5, 5.80e-5},  {8, 64, 2.88e-5, 7.42e-5},  {8, 128, 3.55e-5, 8.13e-5},
  };
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const uint64_t rows = 64, in = 512;
  std::vector<float> w(rows * in);
  for (auto& x : w) x = nd(rng);
  for (const auto& cs : cases) {
    for (DType sd : {DType::kF32, DType::kBF16}) {
      MlxQuantParams p{cs.group, cs.bits};
      auto q = mlx_quantize(w, rows, in, p, sd);
      ASSERT_TRUE(q.ok()) << q.error_message();
      std::vector<float> out(w.size());
      ASSERT_TRUE(mlx_dequantize(word_bytes(q->weight), q->scales, q->biases, sd, p, rows, in, out).ok());
      double num = 0, den = 0;
      for (size_t i = 0; i < w.size(); ++i) {
        num += (w[i] - out[i]) * (w[i] - out[i]);
        den += w[i] * w[i];
      }
      double nmse = num / den;
      double bound = 1.1 * (sd == DType::kF32 ? cs.f32 : cs.bf16);
      EXPECT_LT(nmse, bound) << "bits " << cs.bits << " group " << cs.group << " " << dtype_name(sd);
      // Lower bound too: an error far below the quantizer's own would mean nothing was quantized.
      EXPECT_GT(nmse, 0.8 * (sd == DType::kF32 ? cs.f32 : cs.bf16));
    }
  }
}

TEST(MlxQuantConfig, ResolvesPerModuleWithFalse) {
  auto c = MlxQuantConfig::parse(R"({"architectures":["Qwen3ForCausalLM"],"quantization":{"group_size":64,"bits":4,
      "model.layers.0.mlp.down_proj":{"group_size":32,"bits":8},"model.layers.1.mlp.down_proj":{"bits":6},
      "lm_head":false,"model.embed_tokens":true}})",
                                 "config.json");
  ASSERT_TRUE(c.ok()) << c.error_message();
  ASSERT_TRUE(c->has_value());
  const MlxQuantConfig& q = **c;
  EXPECT_EQ(q.params_for("model.layers.3.self_attn.q_proj"), (MlxQuantParams{64, 4}));
  EXPECT_EQ(q.params_for("model.layers.0.mlp.down_proj"), (MlxQuantParams{32, 8}));
  EXPECT_EQ(q.params_for("model.layers.1.mlp.down_proj"), (MlxQuantParams{64, 6}));  // group from defaults
  EXPECT_FALSE(q.params_for("lm_head").has_value());
  EXPECT_EQ(q.params_for("model.embed_tokens"), (MlxQuantParams{64, 4}));

  auto hf = MlxQuantConfig::parse(R"({"quantization_config":{"group_size":32,"bits":8}})", "config.json");
  ASSERT_TRUE(hf.ok());
  EXPECT_EQ((*hf)->defaults(), (MlxQuantParams{32, 8}));

  auto none = MlxQuantConfig::parse(R"({"hidden_size":8})", "config.json");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  auto bad = MlxQuantConfig::parse(R"({"quantization":{"group_size":64,"bits":7}})", "m/config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error_message().find("m/config.json"), std::string::npos);
  EXPECT_NE(bad.error_message().find("bits 7"), std::string::npos);
  auto bad2 = MlxQuantConfig::parse(R"({"quantization":{"group_size":64,"bits":4,"x.y":{"group_size":48}}})", "c");
  ASSERT_FALSE(bad2.ok());
  EXPECT_NE(bad2.error_message().find("['x.y']"), std::string::npos);
  EXPECT_NE(bad2.error_message().find("group_size 48"), std::string::npos);
  EXPECT_FALSE(MlxQuantConfig::parse(R"({"quantization":{"group_size":32,"bits":4,"mode":"mxfp4"}})", "c").ok());
}

class QuantCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("splash_mlx_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(QuantCheckpoint, FindsAndDequantizesModules) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 0.5f);
  const uint64_t out = 8, in = 128;
  std::vector<float> w(out * in);
  for (auto& x : w) x = nd(rng);
  auto q4 = mlx_quantize(w, out, in, {64, 4}, DType::kBF16);
  auto q8 = mlx_quantize(w, out, in, {32, 8}, DType::kBF16);
  ASSERT_TRUE(q4.ok() && q8.ok());
  std::vector<float> plain(16, 1.0f);
  auto bytes = [](const auto& v) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(v[0]));
  };
  std::vector<SafeTensorWrite> ts = {
      {"a.weight", DType::kU32, {out, in * 4 / 32}, bytes(q4->weight), {}},
      {"a.scales", DType::kBF16, {out, in / 64}, q4->scales, {}},
      {"a.biases", DType::kBF16, {out, in / 64}, q4->biases, {}},
      {"b.weight", DType::kU32, {out, in * 8 / 32}, bytes(q8->weight), {}},
      {"b.scales", DType::kBF16, {out, in / 32}, q8->scales, {}},
      {"b.biases", DType::kBF16, {out, in / 32}, q8->biases, {}},
      {"norm.weight", DType::kF32, {16}, bytes(plain), {}},
      {"c.weight", DType::kU32, {out, in * 4 / 32}, bytes(q4->weight), {}},
      {"c.scales", DType::kBF16, {out, in / 64}, q4->scales, {}},
      {"d.weight", DType::kU32, {out, in * 4 / 32}, bytes(q4->weight), {}},
      {"d.scales", DType::kBF16, {out, in / 32}, q8->scales, {}},  // wrong group count for 4-bit/64
      {"d.biases", DType::kBF16, {out, in / 32}, q8->biases, {}},
  };
  std::string path = (dir_ / "model.safetensors").string();
  ASSERT_TRUE(write_safetensors(path, ts).ok());
  auto model = SafeTensorsModel::open(path);
  ASSERT_TRUE(model.ok()) << model.error_message();
  auto cfg = MlxQuantConfig::parse(R"({"quantization":{"group_size":64,"bits":4,"b":{"group_size":32,"bits":8},
      "norm":false}})", "config.json");
  ASSERT_TRUE(cfg.ok());
  const MlxQuantConfig* qc = &**cfg;

  auto a = find_mlx_quantized(*model, qc, "a");
  ASSERT_TRUE(a.ok()) << a.error_message();
  ASSERT_TRUE(a->has_value());
  EXPECT_EQ((*a)->rows, out);
  EXPECT_EQ((*a)->in_features, in);
  auto b = find_mlx_quantized(*model, qc, "b");
  ASSERT_TRUE(b.ok() && b->has_value()) << b.error_message();
  EXPECT_EQ((*b)->params, (MlxQuantParams{32, 8}));
  auto da = mlx_dequantize(**a);
  auto db = mlx_dequantize(**b);
  ASSERT_TRUE(da.ok() && db.ok());
  double ea = 0, eb = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    ea = std::max(ea, static_cast<double>(std::fabs((*da)[i] - w[i])));
    eb = std::max(eb, static_cast<double>(std::fabs((*db)[i] - w[i])));
  }
  EXPECT_LT(ea, 0.25);   // 4-bit step for a ~[-1.5, 1.5] group is ~0.2; half a step plus bf16
  EXPECT_LT(eb, 0.025);  // 8-bit: bf16 rounding of scale (x up to 255) and bias dominates (measured 0.017)
  EXPECT_LT(eb, ea);

  auto norm = find_mlx_quantized(*model, qc, "norm");
  ASSERT_TRUE(norm.ok());
  EXPECT_FALSE(norm->has_value());

  auto c = find_mlx_quantized(*model, qc, "c");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error_message().find("module 'c': has .scales but no .biases"), std::string::npos);
  auto d = find_mlx_quantized(*model, qc, "d");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error_message().find("module 'd'"), std::string::npos);
  EXPECT_NE(d.error_message().find(".scales has 4 per row"), std::string::npos) << d.error_message();

  auto off = MlxQuantConfig::parse(R"({"quantization":{"group_size":64,"bits":4,"a":false}})", "config.json");
  auto a_off = find_mlx_quantized(*model, &**off, "a");
  ASSERT_FALSE(a_off.ok());
  EXPECT_NE(a_off.error_message().find("unquantized (false)"), std::string::npos);
  EXPECT_FALSE(find_mlx_quantized(*model, nullptr, "a").ok());
}

}  // namespace
}  // namespace splash
