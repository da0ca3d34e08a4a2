// The interleaved x8 layouts of Q4_0 / Q8_0 / Q4_K / Q5_K / Q6_K / MLX 4-bit (matmul_repack.h) and their GEMM/GEMV
// kernels, against the scalar kernel on the file (row) layout (same int8 activations) and against
// exact integer sums.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul.h"
#include "core/half.h"
#include "matmul_test_util.h"

namespace splash {
namespace {

// The x8 kernels differ from the scalar kernel only in float summation order (the integer block
// sums are exact in both).
constexpr double kX8VsScalarNmse = 1e-10;

std::vector<IsaLevel> simd_levels() {
  std::vector<IsaLevel> out;
  if (best_isa_level() >= IsaLevel::kAvx2) out.push_back(IsaLevel::kAvx2);
  if (best_isa_level() >= IsaLevel::kAvx512) out.push_back(IsaLevel::kAvx512);
  return out;
}

std::vector<uint8_t> make_blocks(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  if (t == DType::kQ4_K) return test::random_k_blocks(static_cast<size_t>(rows * cols / 256), 144, false, seed);
  if (t == DType::kQ5_K) return test::random_k_blocks(static_cast<size_t>(rows * cols / 256), 176, false, seed);
  if (t == DType::kQ6_K) return test::random_k_blocks(static_cast<size_t>(rows * cols / 256), 210, true, seed);
  const auto v = test::random_floats(static_cast<size_t>(rows * cols), seed, 0.05f);
  return t == DType::kQ4_0 ? test::quantize_q4_0(v) : test::quantize_q8_0(v);
}

std::vector<float> run(const PackedWeights& w, const std::vector<float>& x, int64_t n, ThreadPool& pool) {
  // One guard value past the end: the tail group must not write beyond the matrix's rows.
  std::vector<float> y(static_cast<size_t>(n * w.rows()) + 1, -12345.0f);
  matmul(w, x.data(), y.data(), n, pool);
  EXPECT_EQ(y.back(), -12345.0f);
  y.pop_back();
  return y;
}

struct X8Case {
  DType type;
  int64_t rows;
};

class MatmulX8 : public ::testing::TestWithParam<X8Case> {};

TEST_P(MatmulX8, MatchesScalarKernelOnAwkwardShapes) {
  if (simd_levels().empty()) GTEST_SKIP() << "no AVX2 on this CPU: x8 layouts are not built";
  const X8Case c = GetParam();
  ThreadPool pool2(2), pool1(1);
  // K-quant rows are whole 256-value super-blocks.
  const bool k_quant = c.type == DType::kQ4_K || c.type == DType::kQ5_K || c.type == DType::kQ6_K;
  const std::vector<int64_t> widths = k_quant ? std::vector<int64_t>{256, 768, 1024}
                                                             : std::vector<int64_t>{32, 96, 1024};
  for (int64_t cols : widths) {
    const auto bytes = make_blocks(c.type, c.rows, cols, 11 + static_cast<uint32_t>(cols));
    auto scalar = pack_weights(c.type, bytes.data(), c.rows, cols, IsaLevel::kScalar);
    ASSERT_TRUE(scalar.ok());
    ASSERT_FALSE(scalar->is_x8());
    for (int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 31, 33, 512}) {
      if (n == 512 && cols > 256) continue;  // keeps the scalar reference quick
      SCOPED_TRACE(str_cat(dtype_name(c.type), " rows=", c.rows, " cols=", cols, " n=", n));
      const auto x = test::random_floats(static_cast<size_t>(n * cols), 7 + static_cast<uint32_t>(n));
      const auto want = run(*scalar, x, n, pool2);
      for (IsaLevel level : simd_levels()) {
        SCOPED_TRACE(isa_level_name(level));
        auto w = pack_weights(c.type, bytes.data(), c.rows, cols, level);
        ASSERT_TRUE(w.ok());
        ASSERT_TRUE(w->is_x8());
        EXPECT_TRUE(w->owns_data());
        const auto got = run(*w, x, n, pool2);
        EXPECT_LT(test::nmse(got, want), kX8VsScalarNmse);
        // Every output row is written (no -12345 left) and none drifts alone beyond rounding.
        for (size_t k = 0; k < got.size(); ++k)
          ASSERT_NEAR(got[k], want[k], 1e-4 + 1e-5 * std::fabs(want[k])) << "output " << k;
        EXPECT_EQ(run(*w, x, n, pool1), got);  // the work split does not change any output
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatmulX8,
                         ::testing::Values(X8Case{DType::kQ4_0, 1}, X8Case{DType::kQ4_0, 7}, X8Case{DType::kQ4_0, 8},
                                           X8Case{DType::kQ4_0, 9}, X8Case{DType::kQ4_0, 37},
                                           X8Case{DType::kQ4_0, 72}, X8Case{DType::kQ8_0, 1},
                                           X8Case{DType::kQ8_0, 8}, X8Case{DType::kQ8_0, 13},
                                           X8Case{DType::kQ8_0, 37}, X8Case{DType::kQ8_0, 72},
                                           X8Case{DType::kQ4_K, 1}, X8Case{DType::kQ4_K, 8},
                                           X8Case{DType::kQ4_K, 13}, X8Case{DType::kQ4_K, 37},
                                           X8Case{DType::kQ5_K, 1}, X8Case{DType::kQ5_K, 8},
                                           X8Case{DType::kQ5_K, 13}, X8Case{DType::kQ5_K, 37},
                                           X8Case{DType::kQ6_K, 1}, X8Case{DType::kQ6_K, 8},
                                           X8Case{DType::kQ6_K, 13}, X8Case{DType::kQ6_K, 37}),
                         [](const auto& info) { return str_cat(dtype_name(info.param.type), "_rows", info.param.rows); });

TEST(MatmulX8, DequantizedRowsEqualTheFileLayout) {
  if (simd_levels().empty()) GTEST_SKIP() << "no AVX2 on this CPU";
  for (DType t : {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    const int64_t rows = 19, cols = t == DType::kQ4_0 || t == DType::kQ8_0 ? 96 : 512;
    const auto bytes = make_blocks(t, rows, cols, 3);
    auto file = pack_weights(t, bytes.data(), rows, cols, IsaLevel::kScalar);
    auto x8 = pack_weights(t, bytes.data(), rows, cols, IsaLevel::kAvx2);
    ASSERT_TRUE(file.ok() && x8.ok());
    ASSERT_TRUE(x8->is_x8());
    std::vector<float> a(cols), b(cols);
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_packed_row(*file, r, a.data());
      dequantize_packed_row(*x8, r, b.data());
      EXPECT_EQ(a, b) << dtype_name(t) << " row " << r;
    }
  }
}

TEST(MatmulX8, SourceIsNotReadAfterPacking) {
  if (simd_levels().empty()) GTEST_SKIP() << "no AVX2 on this CPU";
  const int64_t rows = 16, cols = 64;
  auto bytes = make_blocks(DType::kQ4_0, rows, cols, 5);
  auto w = pack_weights(DType::kQ4_0, bytes.data(), rows, cols, IsaLevel::kAvx2);
  ASSERT_TRUE(w.ok());
  ThreadPool pool(2);
  const auto x = test::random_floats(static_cast<size_t>(3 * cols), 8);
  const auto before = run(*w, x, 3, pool);
  std::fill(bytes.begin(), bytes.end(), uint8_t{0x5A});  // what a dropped and reused page could hold
  EXPECT_EQ(run(*w, x, 3, pool), before);
  EXPECT_NE(w->data(), bytes.data());
}

// Activations +-1 quantize to codes of +-127 exactly (d = 1/127), so the products below are exact
// integers times 1/127 and the expected values are known in closed form.
std::vector<float> unit_acts(int64_t n, int64_t cols, bool alternate) {
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (size_t k = 0; k < x.size(); ++k) x[k] = alternate && (k % 2) ? -1.0f : 1.0f;
  return x;
}

TEST(MatmulX8, Q8ExtremeCodesDoNotSaturate) {
  // Codes -128 against activations +127: every vpmaddubsw pair sum is -2 x 128 x 127 = -32512, the
  // int16 limit the kernel must widen after one step. Also 127 against 127, and mixed rows.
  if (simd_levels().empty()) GTEST_SKIP() << "no AVX2 on this CPU";
  // 27 rows: two pairs of groups, the last one partial (the AVX-512 kernel takes 16 rows at a time
  // when a tile has more than 8 activation rows); n = 5 is the decode path, 12 the prefill one.
  const int64_t rows = 27, cols = 128;
  std::vector<uint8_t> q8(static_cast<size_t>(rows * cols / 32 * 34));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < cols / 32; ++b) {
      uint8_t* blk = &q8[static_cast<size_t>((r * cols / 32 + b) * 34)];
      test::put_u16(blk, f32_to_f16(1.0f));
      const int8_t code = r % 3 == 0 ? -128 : r % 3 == 1 ? 127 : (b % 2 ? -128 : 127);
      for (int k = 0; k < 32; ++k) blk[2 + k] = static_cast<uint8_t>(code);
    }
  for (int64_t n : {5, 12}) {
    const auto x = unit_acts(n, cols, false);
    for (IsaLevel level : simd_levels()) {
      auto w = pack_weights(DType::kQ8_0, q8.data(), rows, cols, level);
      ASSERT_TRUE(w.ok() && w->is_x8());
      ThreadPool pool(2);
      const auto y = run(*w, x, n, pool);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t r = 0; r < rows; ++r) {
          const double want = r % 3 == 0 ? -128.0 * cols : r % 3 == 1 ? 127.0 * cols : (127.0 - 128.0) * cols / 2;
          EXPECT_NEAR(y[static_cast<size_t>(i * rows + r)], want, 1e-3 * std::fabs(want) + 1e-3)
              << isa_level_name(level) << " n " << n << " row " << r;
        }
    }
  }
}

TEST(MatmulX8, Q4ExtremeCodesDoNotSaturate) {
  // Codes 15 (value +7 d) and 0 (value -8 d) against activations of +-127: the AVX2 kernel sums a
  // block's 8 vpmaddubsw results in int16, at most 8 x 3810 = 30480.
  if (simd_levels().empty()) GTEST_SKIP() << "no AVX2 on this CPU";
  // 21 rows: a pair of groups and a partial single one; n = 6 decode, 12 prefill (see the Q8 test).
  const int64_t rows = 21, cols = 64;
  std::vector<uint8_t> q4(static_cast<size_t>(rows * cols / 32 * 18));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < cols / 32; ++b) {
      uint8_t* blk = &q4[static_cast<size_t>((r * cols / 32 + b) * 18)];
      test::put_u16(blk, f32_to_f16(1.0f));
      std::memset(blk + 2, r % 2 ? 0x00 : 0xFF, 16);
    }
  for (int64_t n : {6, 12})
  for (bool alternate : {false, true}) {
    const auto x = unit_acts(n, cols, alternate);
    for (IsaLevel level : simd_levels()) {
      auto w = pack_weights(DType::kQ4_0, q4.data(), rows, cols, level);
      ASSERT_TRUE(w.ok() && w->is_x8());
      ThreadPool pool(2);
      const auto y = run(*w, x, n, pool);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t r = 0; r < rows; ++r) {
          const double value = r % 2 ? -8.0 : 7.0;
          const double want = alternate ? 0.0 : value * cols;
          EXPECT_NEAR(y[static_cast<size_t>(i * rows + r)], want, 1e-3)
              << isa_level_name(level) << " n " << n << " row " << r;
        }
    }
  }
}

// --- MLX 4-bit and 8-bit (kMlx4x8, kMlx8x8) ------------------------------------------------------

// An MLX affine 4-bit (or 8-bit) matrix as a safetensors file holds it: codes in uint32 words,
// scales and biases per group in `st` (F16, BF16 or F32). Random codes unless `code` >= 0; scales /
// biases random unless given.
struct Mlx4Matrix {
  std::vector<uint8_t> codes;
  std::vector<uint8_t> scales, biases;
  MlxAffineView view;
  Mlx4Matrix(int64_t rows, int64_t cols, int group, uint32_t seed, DType st = DType::kF16, int code = -1,
             float scale = 0.0f, float bias = 0.0f, int bits = 4) {
    codes = test::random_bytes(static_cast<size_t>(rows * cols * bits / 8), seed);
    if (code >= 0)
      std::fill(codes.begin(), codes.end(), static_cast<uint8_t>(bits == 8 ? code : code | (code << 4)));
    const size_t groups = static_cast<size_t>(rows * cols / group);
    const auto s = test::random_floats(groups, seed + 1, 0.01f);
    const auto b = test::random_floats(groups, seed + 2, 0.05f);
    auto put = [st](std::vector<uint8_t>& out, float v) {
      uint8_t bytes[4];
      if (st == DType::kF32) {
        std::memcpy(bytes, &v, 4);
      } else {
        test::put_u16(bytes, st == DType::kBF16 ? f32_to_bf16(v) : f32_to_f16(v));
      }
      out.insert(out.end(), bytes, bytes + (st == DType::kF32 ? 4 : 2));
    };
    for (size_t g = 0; g < groups; ++g) {
      put(scales, code >= 0 ? scale : s[g]);
      put(biases, code >= 0 ? bias : b[g]);
    }
    view.bits = bits;
    view.group_size = group;
    view.scale_dtype = st;
    view.codes = reinterpret_cast<const uint32_t*>(codes.data());
    view.scales = scales.data();
    view.biases = biases.data();
  }
};

TEST(MatmulX8, Mlx4And8MatchTheRowLayoutKernel) {
  if (simd_levels().empty()) GTEST_SKIP() << "no AVX2 on this CPU: x8 layouts are not built";
  ThreadPool pool2(2), pool1(1);
  // Rows: one partial group, a pair + a partial group, several pairs; groups of 32, 64 and 128.
  // Scales and biases in each type the files use (the layout keeps the file's type).
  for (int bits : {4, 8})
  for (int64_t rows : {5, 21, 40})
    for (int group : {32, 64, 128})
      for (int64_t cols : {int64_t{group}, int64_t{3 * group}}) {
        const DType st = group == 32 ? DType::kF16 : group == 64 ? DType::kBF16 : DType::kF32;
        const Mlx4Matrix m(rows, cols, group, 17 + static_cast<uint32_t>(rows + cols), st, -1, 0.0f, 0.0f, bits);
        auto scalar = pack_mlx_weights(m.view, rows, cols, IsaLevel::kScalar);
        ASSERT_TRUE(scalar.ok());
        ASSERT_EQ(scalar->format(), bits == 8 ? WeightFormat::kMlx8 : WeightFormat::kMlx4);
        for (int64_t n : {1, 3, 8, 9, 33, 130}) {
          SCOPED_TRACE(str_cat(bits, "-bit rows=", rows, " group=", group, " ", dtype_name(st), " cols=", cols, " n=", n));
          const auto x = test::random_floats(static_cast<size_t>(n * cols), 5 + static_cast<uint32_t>(n));
          const auto want = run(*scalar, x, n, pool2);
          for (IsaLevel level : simd_levels()) {
            SCOPED_TRACE(isa_level_name(level));
            auto w = pack_mlx_weights(m.view, rows, cols, level);
            ASSERT_TRUE(w.ok());
            ASSERT_EQ(w->format(), bits == 8 ? WeightFormat::kMlx8x8 : WeightFormat::kMlx4x8);
            ASSERT_TRUE(w->is_x8() && w->owns_data());
            const auto got = run(*w, x, n, pool2);
            EXPECT_LT(test::nmse(got, want), kX8VsScalarNmse);
            for (size_t k = 0; k < got.size(); ++k)
              ASSERT_NEAR(got[k], want[k], 1e-4 + 1e-5 * std::fabs(want[k])) << "output " << k;
            EXPECT_EQ(run(*w, x, n, pool1), got);
          }
        }
      }
}

TEST(MatmulX8, Mlx4DequantizedRowsEqualTheRowLayout) {
  if (simd_levels().empty()) GTEST_SKIP() << "no AVX2 on this CPU";
  for (int group : {32, 64})
  for (DType st : {DType::kF16, DType::kBF16, DType::kF32}) {
    const int64_t rows = 19, cols = 4 * group;
    const Mlx4Matrix m(rows, cols, group, 9, st);
    auto file = pack_mlx_weights(m.view, rows, cols, IsaLevel::kScalar);
    auto x8 = pack_mlx_weights(m.view, rows, cols, IsaLevel::kAvx2);
    ASSERT_TRUE(file.ok() && x8.ok());
    ASSERT_TRUE(x8->is_x8());
    EXPECT_EQ(x8->scale_dtype(), st);
    // 3 groups of 8 rows; per MLX group 8 scales + 8 biases in the file's type, 4 bytes per column
    const int64_t sb = st == DType::kF32 ? 4 : 2;
    EXPECT_EQ(x8->packed_bytes(), 3 * cols / group * (16 * sb + 4 * group));
    std::vector<float> a(static_cast<size_t>(cols)), b(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_packed_row(*file, r, a.data());
      dequantize_packed_row(*x8, r, b.data());
      ASSERT_EQ(a, b) << "group " << group << " " << dtype_name(st) << " row " << r;
    }
  }
}

TEST(MatmulX8, Mlx8DequantizedRowsAreScaleTimesCodePlusBias) {
  // The row layout stores bias + 128 scale in f32 (its own rounding); the x8 layout keeps the file's
  // scale and bias, so its rows must be exactly scale * code + bias in float.
  if (simd_levels().empty()) GTEST_SKIP() << "no AVX2 on this CPU";
  for (int group : {32, 64})
    for (DType st : {DType::kF16, DType::kBF16, DType::kF32}) {
      const int64_t rows = 19, cols = 4 * group;
      const Mlx4Matrix m(rows, cols, group, 9, st, -1, 0.0f, 0.0f, 8);
      auto x8 = pack_mlx_weights(m.view, rows, cols, IsaLevel::kAvx2);
      ASSERT_TRUE(x8.ok());
      ASSERT_EQ(x8->format(), WeightFormat::kMlx8x8);
      const int64_t sb = st == DType::kF32 ? 4 : 2;
      EXPECT_EQ(x8->packed_bytes(), 3 * cols / group * (16 * sb + 8 * group));
      auto load = [&](const std::vector<uint8_t>& v, int64_t idx) {
        if (st == DType::kF32) {
          float f;
          std::memcpy(&f, v.data() + 4 * idx, 4);
          return f;
        }
        uint16_t h;
        std::memcpy(&h, v.data() + 2 * idx, 2);
        return st == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
      };
      std::vector<float> b(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_packed_row(*x8, r, b.data());
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t g = r * (cols / group) + c / group;
          const float want = load(m.scales, g) * static_cast<float>(m.codes[static_cast<size_t>(r * cols + c)]) +
                             load(m.biases, g);
          ASSERT_EQ(b[static_cast<size_t>(c)], want) << "group " << group << " " << dtype_name(st) << " row " << r;
        }
      }
    }
}

TEST(MatmulX8, Mlx4ExtremeCodesAndBiasAreExact) {
  // Codes 15 against activations +127 (scale 1, bias 0): the AVX2 kernel's int16 block sum reaches
  // 8 x 3810 = 30480. Then scale 0, bias 1: the result is the activations' sum alone. 21 rows: a
  // pair of groups and a partial one; n = 6 decode, 12 prefill (the AVX-512 pair kernel).
  if (simd_levels().empty()) GTEST_SKIP() << "no AVX2 on this CPU";
  const int64_t rows = 21, cols = 192;
  const Mlx4Matrix codes15(rows, cols, 64, 1, DType::kBF16, 15, 1.0f, 0.0f);
  const Mlx4Matrix bias1(rows, cols, 64, 1, DType::kF16, 7, 0.0f, 1.0f);
  for (int64_t n : {6, 12})
    for (bool alternate : {false, true}) {
      const auto x = unit_acts(n, cols, alternate);
      for (IsaLevel level : simd_levels()) {
        ThreadPool pool(2);
        auto w15 = pack_mlx_weights(codes15.view, rows, cols, level);
        auto wb = pack_mlx_weights(bias1.view, rows, cols, level);
        ASSERT_TRUE(w15.ok() && wb.ok());
        const auto y15 = run(*w15, x, n, pool);
        const auto yb = run(*wb, x, n, pool);
        const double want = alternate ? 0.0 : static_cast<double>(cols);
        for (size_t k = 0; k < y15.size(); ++k) {
          EXPECT_NEAR(y15[k], 15.0 * want, 1e-3) << isa_level_name(level) << " n " << n << " output " << k;
          EXPECT_NEAR(yb[k], want, 1e-3) << isa_level_name(level) << " n " << n << " output " << k;
        }
      }
    }
}

TEST(MatmulX8, Mlx8ExtremeCodesAreExact) {
  // Codes 255 and 0 (stored as +127 and -128) against activations +-127: every AVX2 vpmaddubsw pair
  // sum reaches 2 x 128 x 127 = 32512, the int16 limit the kernel must widen after one step. Scale
  // 1, bias 0: the result is code x sum(x). n = 6 decode, 12 prefill (the AVX-512 pair kernel).
  if (simd_levels().empty()) GTEST_SKIP() << "no AVX2 on this CPU";
  const int64_t rows = 21, cols = 192;
  for (int code : {0, 255}) {
    const Mlx4Matrix m(rows, cols, 64, 1, DType::kBF16, code, 1.0f, 0.0f, 8);
    for (int64_t n : {6, 12})
      for (bool alternate : {false, true}) {
        const auto x = unit_acts(n, cols, alternate);
        for (IsaLevel level : simd_levels()) {
          ThreadPool pool(2);
          auto w = pack_mlx_weights(m.view, rows, cols, level);
          ASSERT_TRUE(w.ok() && w->format() == WeightFormat::kMlx8x8);
          const auto y = run(*w, x, n, pool);
          const double want = alternate ? 0.0 : static_cast<double>(code) * static_cast<double>(cols);
          for (size_t k = 0; k < y.size(); ++k)
            ASSERT_NEAR(y[k], want, 1e-2) << isa_level_name(level) << " code " << code << " n " << n << " output " << k;
        }
      }
  }
}

// --- F16 / BF16 (kF16x16, kBF16x16: AVX-512 only) -----------------------------------------------

TEST(MatmulX16Float, MatchesTheRowLayoutKernel) {
  if (best_isa_level() < IsaLevel::kAvx512) GTEST_SKIP() << "no AVX-512 on this CPU: the 16-row layouts are not built";
  ThreadPool pool2(2), pool1(1);
  for (DType t : {DType::kF16, DType::kBF16})
    for (int64_t rows : {1, 15, 16, 17, 40})
      for (int64_t cols : {1, 7, 64, 1027}) {
        const auto v = test::random_floats(static_cast<size_t>(rows * cols), 3 + static_cast<uint32_t>(rows * cols));
        std::vector<uint8_t> bytes(static_cast<size_t>(rows * cols * 2));
        for (size_t k = 0; k < v.size(); ++k)
          test::put_u16(bytes.data() + 2 * k, t == DType::kF16 ? f32_to_f16(v[k]) : f32_to_bf16(v[k]));
        auto rowwise = pack_weights(t, bytes.data(), rows, cols, IsaLevel::kAvx2);
        auto x16 = pack_weights(t, bytes.data(), rows, cols, IsaLevel::kAvx512);
        ASSERT_TRUE(rowwise.ok() && x16.ok());
        ASSERT_FALSE(rowwise->is_x8());
        ASSERT_EQ(x16->format(), t == DType::kF16 ? WeightFormat::kF16x16 : WeightFormat::kBF16x16);
        EXPECT_TRUE(is_float_format(x16->format()));  // drafters decide on a Q8_0 copy of a float head by it
        ASSERT_TRUE(x16->owns_data());
        EXPECT_EQ(x16->packed_bytes(), (rows + 15) / 16 * 16 * cols * 2);
        std::vector<float> a(static_cast<size_t>(cols)), b(static_cast<size_t>(cols));
        for (int64_t r = 0; r < rows; ++r) {  // the values are the file's, bit for bit
          dequantize_packed_row(*rowwise, r, a.data());
          dequantize_packed_row(*x16, r, b.data());
          ASSERT_EQ(a, b) << "row " << r;
        }
        for (int64_t n : {1, 2, 5, 8, 9, 16, 33, 70}) {
          SCOPED_TRACE(str_cat(dtype_name(t), " rows=", rows, " cols=", cols, " n=", n));
          const auto x = test::random_floats(static_cast<size_t>(n * cols), 5 + static_cast<uint32_t>(n));
          const auto want = run(*rowwise, x, n, pool2);
          const auto got = run(*x16, x, n, pool2);
          // f32 products and sums both ways; only the order of the additions differs.
          EXPECT_LT(test::nmse(got, want), 1e-12);
          for (size_t k = 0; k < got.size(); ++k)
            ASSERT_NEAR(got[k], want[k], 1e-4 + 1e-5 * std::fabs(want[k])) << "output " << k;
          EXPECT_EQ(run(*x16, x, n, pool1), got);
        }
      }
}

}  // namespace
}  // namespace splash
