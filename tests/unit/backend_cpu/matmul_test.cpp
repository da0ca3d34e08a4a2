#include "backend/cpu/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <memory>
#include <string>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/prefetch_tuner.h"
#include "core/half.h"
#include "matmul_test_util.h"

namespace splash {
namespace {

using test::nmse;

// Tolerances (normalized MSE):
//  - a SIMD kernel vs the scalar kernel, same int8 activations: only float summation order differs.
constexpr double kSimdVsScalarNmse = 1e-9;
//  - scalar quantized kernel vs an f64 product of the dequantized weights: the error of quantizing
//    activations to int8 per 32 values (about 3e-5 for Gaussian inputs).
constexpr double kQuantActNmse = 2e-4;
//  - float formats vs the f64 product: f32 rounding only.
constexpr double kFloatNmse = 1e-10;

std::vector<IsaLevel> levels_here() {
  std::vector<IsaLevel> out = {IsaLevel::kScalar};
  if (best_isa_level() >= IsaLevel::kAvx2) out.push_back(IsaLevel::kAvx2);
  if (best_isa_level() >= IsaLevel::kAvx512) out.push_back(IsaLevel::kAvx512);
  return out;
}

// One weight matrix in some format, with the bytes it is packed from.
struct Case {
  std::string name;
  bool quantized = true;
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> bytes;  // GGML data, or MLX codes
  DType type = DType::kF32;
  // MLX only
  bool mlx = false;
  MlxAffineView mlx_view;
  std::vector<uint8_t> scales, biases;

  Result<PackedWeights> pack(IsaLevel level) const {
    if (!mlx) return pack_weights(type, bytes.data(), rows, cols, level, name);
    MlxAffineView v = mlx_view;
    v.codes = reinterpret_cast<const uint32_t*>(bytes.data());
    v.scales = scales.data();
    v.biases = biases.data();
    return pack_mlx_weights(v, rows, cols, level, name);
  }
};

Case make_case(const std::string& name, int64_t rows, int64_t cols, uint32_t seed) {
  Case c;
  c.name = name;
  c.rows = rows;
  c.cols = cols;
  const auto values = test::random_floats(static_cast<size_t>(rows * cols), seed, 0.05f);
  if (name == "F32") {
    c.quantized = false;
    c.type = DType::kF32;
    c.bytes.resize(values.size() * 4);
    std::memcpy(c.bytes.data(), values.data(), c.bytes.size());
  } else if (name == "F16" || name == "BF16") {
    c.quantized = false;
    c.type = name == "F16" ? DType::kF16 : DType::kBF16;
    c.bytes.resize(values.size() * 2);
    for (size_t k = 0; k < values.size(); ++k)
      test::put_u16(&c.bytes[2 * k], name == "F16" ? f32_to_f16(values[k]) : f32_to_bf16(values[k]));
  } else if (name == "Q8_0") {
    c.type = DType::kQ8_0;
    c.bytes = test::quantize_q8_0(values);
  } else if (name == "Q4_0") {
    c.type = DType::kQ4_0;
    c.bytes = test::quantize_q4_0(values);
  } else if (name == "Q4_K" || name == "Q5_K" || name == "Q6_K") {
    c.type = name == "Q4_K" ? DType::kQ4_K : name == "Q5_K" ? DType::kQ5_K : DType::kQ6_K;
    const size_t bb = dtype_traits(c.type).block_bytes;
    c.bytes = test::random_k_blocks(static_cast<size_t>(rows * cols / 256), bb, name == "Q6_K", seed);
  } else {  // "MLX4_g64_bf16", "MLX8_g32_f16", ...
    c.mlx = true;
    c.mlx_view.bits = name.substr(0, 4) == "MLX4" ? 4 : 8;
    c.mlx_view.group_size = std::stoi(name.substr(6, 2));
    c.mlx_view.scale_dtype = name.substr(name.size() - 4) == "bf16" ? DType::kBF16 : DType::kF16;
    c.bytes = test::random_bytes(static_cast<size_t>(rows * cols * c.mlx_view.bits / 8), seed);
    const size_t groups = static_cast<size_t>(rows * cols / c.mlx_view.group_size);
    const auto s = test::random_floats(groups, seed + 1, 0.01f);
    const auto b = test::random_floats(groups, seed + 2, 0.05f);
    c.scales.resize(groups * 2);
    c.biases.resize(groups * 2);
    const bool bf = c.mlx_view.scale_dtype == DType::kBF16;
    for (size_t g = 0; g < groups; ++g) {
      test::put_u16(&c.scales[2 * g], bf ? f32_to_bf16(s[g]) : f32_to_f16(s[g]));
      test::put_u16(&c.biases[2 * g], bf ? f32_to_bf16(b[g]) : f32_to_f16(b[g]));
    }
  }
  return c;
}

// Dequantized weights straight from the packed-from bytes, computed here from the format
// definitions (MLX: value = scale * code + bias with codes read from the uint32 words).
std::vector<float> dequantized(const Case& c) {
  std::vector<float> w(static_cast<size_t>(c.rows * c.cols));
  if (c.mlx) {
    const int bits = c.mlx_view.bits, gs = c.mlx_view.group_size;
    const bool bf = c.mlx_view.scale_dtype == DType::kBF16;
    for (int64_t r = 0; r < c.rows; ++r)
      for (int64_t col = 0; col < c.cols; ++col) {
        const int64_t e = r * c.cols + col;
        uint32_t word;
        std::memcpy(&word, &c.bytes[static_cast<size_t>(e * bits / 32 * 4)], 4);
        const uint32_t code = (word >> ((e % (32 / bits)) * bits)) & ((1u << bits) - 1);
        const size_t g = static_cast<size_t>(e / gs);
        uint16_t sh, bh;
        std::memcpy(&sh, &c.scales[2 * g], 2);
        std::memcpy(&bh, &c.biases[2 * g], 2);
        const float s = bf ? bf16_to_f32(sh) : f16_to_f32(sh);
        const float b = bf ? bf16_to_f32(bh) : f16_to_f32(bh);
        w[static_cast<size_t>(e)] = s * static_cast<float>(code) + b;
      }
    return w;
  }
  // GGML formats: the packed layout is the file layout, so the library's scalar row dequantizer is
  // checked separately against hand-built blocks (BlockLayout tests) and used here.
  auto p = c.pack(IsaLevel::kScalar);
  EXPECT_TRUE(p.ok()) << p.error_message();
  for (int64_t r = 0; r < c.rows; ++r) dequantize_packed_row(*p, r, &w[static_cast<size_t>(r * c.cols)]);
  return w;
}

std::vector<float> run(const PackedWeights& w, const std::vector<float>& x, int64_t n, ThreadPool& pool) {
  std::vector<float> y(static_cast<size_t>(n * w.rows()), -12345.0f);
  matmul(w, x.data(), y.data(), n, pool);
  return y;
}

class MatmulFormat : public ::testing::TestWithParam<std::string> {};

TEST_P(MatmulFormat, EveryLevelMatchesScalarAndReference) {
  const std::string name = GetParam();
  const bool k_quant = name.find("_K") != std::string::npos;
  const bool is_float = name == "F32" || name == "F16" || name == "BF16";
  // Awkward shapes: rows not a multiple of any tile; an odd number of 32-blocks where allowed; a
  // float row length that leaves a tail after the 16- and 8-wide loops.
  const int64_t rows = 37;
  const int64_t cols = k_quant ? 768 : is_float ? 203 : name.rfind("MLX", 0) == 0 ? 384 : 224;
  const Case c = make_case(name, rows, cols, 1234);
  const std::vector<float> wf = dequantized(c);
  ThreadPool pool2(2), pool1(1);

  for (int64_t n : {1, 2, 3, 7, 33, 130}) {
    SCOPED_TRACE(str_cat(name, " n=", n));
    const auto x = test::random_floats(static_cast<size_t>(n * cols), 99 + static_cast<uint32_t>(n));
    const auto ref = test::reference_matmul(wf, x, rows, cols, n);

    auto scalar = c.pack(IsaLevel::kScalar);
    ASSERT_TRUE(scalar.ok()) << scalar.error_message();
    const auto y_scalar = run(*scalar, x, n, pool2);
    const double e_ref = nmse(y_scalar, ref);
    EXPECT_LT(e_ref, c.quantized ? kQuantActNmse : kFloatNmse);
    // The bound must be able to fail: quantized kernels do carry activation-quantization error.
    if (c.quantized) {
      EXPECT_GT(e_ref, 1e-9);
    }

    for (IsaLevel level : levels_here()) {
      SCOPED_TRACE(isa_level_name(level));
      auto packed = c.pack(level);
      ASSERT_TRUE(packed.ok()) << packed.error_message();
      EXPECT_EQ(packed->isa(), level);
      const auto y2 = run(*packed, x, n, pool2);
      EXPECT_LT(nmse(y2, y_scalar), c.quantized ? kSimdVsScalarNmse : kFloatNmse);
      EXPECT_LT(nmse(y2, ref), c.quantized ? kQuantActNmse : kFloatNmse);
      // Work split differs with the pool size; each output is still computed the same way.
      const auto y1 = run(*packed, x, n, pool1);
      EXPECT_EQ(y1, y2);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllFormats, MatmulFormat,
                         ::testing::Values("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K",
                                           "MLX4_g64_bf16", "MLX4_g32_f16", "MLX8_g32_f16", "MLX8_g64_bf16"),
                         [](const auto& info) { return info.param; });

TEST(Matmul, DecodeSplitGivesTheSameResultForEveryThreadCount) {
  // Decode products (n <= 8) split the rows into one share of 64-row chunks per thread, and idle
  // threads take chunks from the back of the others' shares. Rows that are not a multiple of the
  // chunk, more threads than cores, and more than 16 threads (the shares move off the stack): every
  // output row must be computed exactly once, the same way as on one thread.
  for (const char* name : {"Q4_0", "F32", "MLX4_g32_f16"}) {
    const int64_t rows = 1037, cols = name[0] == 'F' ? 96 : 128;
    const Case c = make_case(name, rows, cols, 77);
    auto packed = c.pack(best_isa_level());
    ASSERT_TRUE(packed.ok()) << packed.error_message();
    ThreadPool pool1(1);
    for (int64_t n : {1, 3, 8}) {
      const auto x = test::random_floats(static_cast<size_t>(n * cols), 5 + static_cast<uint32_t>(n));
      const auto y1 = run(*packed, x, n, pool1);
      for (int threads : {2, 3, 5, 17}) {
        SCOPED_TRACE(str_cat(name, " n=", n, " threads=", threads));
        ThreadPool pool(threads);
        for (int rep = 0; rep < 3; ++rep) EXPECT_EQ(run(*packed, x, n, pool), y1);
      }
    }
  }
}

TEST(Matmul, RowRangesOnTheCallingThreadGiveMatmulsRows) {
  // matmul_rows computes rows [r0, r1) of a decode product on the calling thread alone: the same
  // bits as matmul's rows, the other rows of y untouched, whatever the formats' row groups.
  for (const char* name : {"Q4_0", "Q8_0", "Q4_K", "F32", "F16", "MLX4_g32_f16"}) {
    const int64_t rows = 1037, cols = name[0] == 'F' ? 96 : 256;
    const Case c = make_case(name, rows, cols, 91);
    auto packed = c.pack(best_isa_level());
    ASSERT_TRUE(packed.ok()) << packed.error_message();
    ThreadPool pool(2);
    const int64_t group = packed->is_x8() ? packed->group_rows() : 1;
    for (int64_t n : {1, 4, 8}) {
      SCOPED_TRACE(str_cat(name, " n=", n));
      const auto x = test::random_floats(static_cast<size_t>(n * cols), 31 + static_cast<uint32_t>(n));
      const auto full = run(*packed, x, n, pool);
      const int64_t cut = (rows / 3) / group * group;
      constexpr float kUnwritten = -12345.0f;
      std::vector<float> y(static_cast<size_t>(n * rows), kUnwritten);
      matmul_rows(*packed, x.data(), y.data(), n, cut, rows);
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t r = 0; r < rows; ++r) {
          const size_t k = static_cast<size_t>(i * rows + r);
          if (r < cut) ASSERT_EQ(y[k], kUnwritten) << "row " << r;
          else ASSERT_EQ(y[k], full[k]) << "row " << r;
        }
      }
      matmul_rows(*packed, x.data(), y.data(), n, 0, cut);
      EXPECT_EQ(y, full);
    }
  }
}

TEST(Matmul, OneRowGivesTheBitsOfItsRowInASmallBatch) {
  // Greedy speculative decoding verifies a block of proposed tokens in one forward and keeps them
  // only where they match what one-token decoding would have chosen: a row's product must come out
  // bit for bit the same alone (the one-row decode kernels, e.g. matmul_row512_impl.h on AVX-512)
  // as inside a batch of a few rows (the M-row kernels).
  for (const char* name : {"Q4_0", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "MLX4_g64_bf16", "MLX8_g32_f16"}) {
    const int64_t rows = 77, cols = 512;
    const Case c = make_case(name, rows, cols, 808);
    for (IsaLevel level : levels_here()) {
      auto packed = c.pack(level);
      ASSERT_TRUE(packed.ok()) << packed.error_message();
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        for (int64_t n : {2, 3, 4, 8, 9, 16}) {
          SCOPED_TRACE(str_cat(name, " ", isa_level_name(level), " threads=", threads, " n=", n));
          const auto x = test::random_floats(static_cast<size_t>(n * cols), 5 + static_cast<uint32_t>(n));
          const auto batch = run(*packed, x, n, pool);
          for (int64_t i = 0; i < n; ++i) {
            const std::vector<float> xi(x.begin() + i * cols, x.begin() + (i + 1) * cols);
            const auto alone = run(*packed, xi, 1, pool);
            const std::vector<float> in_batch(batch.begin() + i * rows, batch.begin() + (i + 1) * rows);
            ASSERT_EQ(alone, in_batch) << "activation row " << i;
          }
        }
      }
    }
  }
}

TEST(Matmul, DecodePrefetchDistanceDoesNotChangeResults) {
  // The decode kernels prefetch a matrix's stream PackedWeights::stream_prefetch_bytes() ahead (on
  // Intel 1 or 2 KiB by layout, none elsewhere: default_stream_prefetch_bytes until set); any
  // distance, the lines past the end of the matrix included, must give exactly the results without.
  ThreadPool pool(2);
  for (const char* name : {"F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K", "MLX4_g64_bf16", "MLX8_g32_f16"}) {
    const int64_t rows = 77, cols = 512;
    const Case c = make_case(name, rows, cols, 91);
    for (IsaLevel level : levels_here()) {
      auto packed = c.pack(level);
      ASSERT_TRUE(packed.ok()) << packed.error_message();
      if (packed->stream_prefetch_tuned()) {
        // The layout's tuner: a step of its ladder (its start is the layout's default).
        const int64_t pf = packed->stream_prefetch_bytes();
        EXPECT_TRUE(std::find(std::begin(cpu::PrefetchTuner::kLadder), std::end(cpu::PrefetchTuner::kLadder), pf) !=
                    std::end(cpu::PrefetchTuner::kLadder)) << name << " " << pf;
      } else {
        EXPECT_EQ(packed->stream_prefetch_bytes(), default_stream_prefetch_bytes(packed->format())) << name;
      }
      for (int64_t n : {1, 3}) {
        SCOPED_TRACE(str_cat(name, " ", isa_level_name(level), " n=", n));
        const auto x = test::random_floats(static_cast<size_t>(n * cols), 9 + static_cast<uint32_t>(n));
        packed->set_stream_prefetch_bytes(0);
        const auto y0 = run(*packed, x, n, pool);
        for (int64_t pf : {int64_t{64}, int64_t{1024}, int64_t{2048}, int64_t{1} << 20}) {
          packed->set_stream_prefetch_bytes(pf);
          EXPECT_EQ(packed->stream_prefetch_bytes(), pf);
          EXPECT_FALSE(packed->stream_prefetch_tuned());
          EXPECT_EQ(run(*packed, x, n, pool), y0) << "prefetch " << pf;
        }
      }
    }
  }
}

TEST(Matmul, DecodeProductsTuneTheLayoutsPrefetchDistance) {
  // One-row products of a matrix whose distance is not set are timed for its layout's tuner
  // (prefetch_tuner.h) where the CPU has one (the x8 layouts on Intel): after a trial round's worth
  // of products big enough to time, the summary names the layout. The distances tried must not
  // change a single result.
  ThreadPool pool(2);
  const int64_t rows = 1024, cols = 1024;  // 576 KB of Q4_0: above PrefetchTuner::kMinTimedBytes
  const Case c = make_case("Q4_0", rows, cols, 5);
  auto packed = c.pack(best_isa_level());
  ASSERT_TRUE(packed.ok()) << packed.error_message();
  ASSERT_GE(packed->packed_bytes(), cpu::PrefetchTuner::kMinTimedBytes);
  const auto x = test::random_floats(static_cast<size_t>(cols), 3);
  const auto y0 = run(*packed, x, 1, pool);
  const int64_t products = cpu::PrefetchTuner::kHoldAfterMove + 3 * cpu::PrefetchTuner::kSamplesPerStep + 1;
  for (int64_t i = 0; i < products; ++i) ASSERT_EQ(run(*packed, x, 1, pool), y0) << i;
  const std::string summary = decode_prefetch_summary();
  if (packed->stream_prefetch_tuned()) {
    EXPECT_NE(summary.find(weight_format_name(packed->format())), std::string::npos) << summary;
    EXPECT_NE(summary.find(" trials"), std::string::npos) << summary;
  } else {
    EXPECT_EQ(summary, "");
  }
}

TEST(Matmul, DecodeStreamsDoNotChangeResults) {
  // One decode task of an interleaved layout (x8, and the 16-row F16 / BF16 layouts) may read its
  // rows as two runs of groups walked together (PackedWeights::decode_streams: 2 on Intel, 1
  // elsewhere); every row's sum is the same either way, so the results must be exactly those of one
  // stream on every host. Awkward sizes: an odd number of groups per task (a remainder group), a
  // last group of padding rows, one and two threads (one task over the whole matrix, or chunks).
  for (const char* name : {"F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K", "MLX4_g64_bf16", "MLX8_g32_f16"}) {
    for (int64_t rows : {int64_t{8}, int64_t{77}, int64_t{88}, int64_t{300}, int64_t{600}}) {
      const int64_t cols = 512;
      const Case c = make_case(name, rows, cols, 57 + static_cast<uint32_t>(rows));
      for (IsaLevel level : levels_here()) {
        auto packed = c.pack(level);
        ASSERT_TRUE(packed.ok()) << packed.error_message();
        if (!packed->is_x8()) continue;  // the scalar level keeps the file's row layout
        for (int threads : {1, 2}) {
          ThreadPool pool(threads);
          for (int64_t n : {1, 2}) {
            SCOPED_TRACE(str_cat(name, " ", isa_level_name(level), " rows=", rows, " threads=", threads, " n=", n));
            const auto x = test::random_floats(static_cast<size_t>(n * cols), 17 + static_cast<uint32_t>(n));
            packed->set_decode_streams(1);
            const auto y1 = run(*packed, x, n, pool);
            packed->set_decode_streams(2);
            EXPECT_EQ(packed->decode_streams(), 2);
            EXPECT_EQ(run(*packed, x, n, pool), y1);
          }
        }
      }
    }
  }
}

TEST(Matmul, AmxPrefillGivesTheAvx512Results) {
  // Prefill of Q4_0 / Q8_0 / MLX 4- and 8-bit on the AMX tiles (16 x 16 tiles; what does not fill one goes to the
  // AVX-512 kernel) must give exactly the AVX-512 kernel's results: exact integer block sums, the
  // same float steps. Awkward sizes: rows not a multiple of 16 (an odd last group, padding rows),
  // activation rows not a multiple of 16, several 64-row tasks.
  if (!amx_usable()) GTEST_SKIP() << "no AMX-INT8 here (" << cpu_features_summary() << "): the AMX kernels were not exercised";
  ThreadPool pool(2);
  for (const char* name : {"Q4_0", "Q8_0", "MLX4_g64_bf16", "MLX4_g32_f16", "MLX8_g32_f16", "MLX8_g64_bf16"}) {
    for (int64_t rows : {int64_t{16}, int64_t{77}, int64_t{200}}) {
      const int64_t cols = 320;
      const Case c = make_case(name, rows, cols, 13 + static_cast<uint32_t>(rows));
      auto packed = c.pack(IsaLevel::kAvx512);
      ASSERT_TRUE(packed.ok()) << packed.error_message();
      ASSERT_TRUE(packed->uses_amx());
      for (int64_t n : {16, 37, 130}) {
        SCOPED_TRACE(str_cat(name, " rows=", rows, " n=", n));
        const auto x = test::random_floats(static_cast<size_t>(n * cols), 3 + static_cast<uint32_t>(n));
        const auto y_amx = run(*packed, x, n, pool);
        packed->set_amx_allowed(false);
        EXPECT_FALSE(packed->uses_amx());
        EXPECT_EQ(run(*packed, x, n, pool), y_amx);
        packed->set_amx_allowed(true);
      }
    }
  }
}

TEST(Matmul, Avx512PathsNeedAnAvx512Cpu) {
  if (best_isa_level() < IsaLevel::kAvx512)
    GTEST_SKIP() << "this CPU lacks AVX-512 VNNI (" << cpu_features_summary()
                 << "): the AVX-512 kernels were not exercised";
  SUCCEED();
}

TEST(Matmul, LargeValuesDoNotSaturate) {
  // Q8_0 codes of -128/127 against activations at +-127: the int16 pair sums of the AVX2 path are at
  // their limit; MLX 8-bit codes 0/255 likewise.
  const int64_t rows = 4, cols = 64;
  std::vector<uint8_t> q8(static_cast<size_t>(rows * cols / 32 * 34));
  for (size_t b = 0; b < q8.size() / 34; ++b) {
    test::put_u16(&q8[b * 34], f32_to_f16(1.0f));
    for (int k = 0; k < 32; ++k) q8[b * 34 + 2 + k] = static_cast<uint8_t>(k % 2 ? 0x80 : 0x7F);
  }
  std::vector<float> x(static_cast<size_t>(cols));
  for (int64_t c = 0; c < cols; ++c) x[static_cast<size_t>(c)] = c % 2 ? -1.0f : 1.0f;
  ThreadPool pool(2);
  for (IsaLevel level : levels_here()) {
    auto w = pack_weights(DType::kQ8_0, q8.data(), rows, cols, level);
    ASSERT_TRUE(w.ok());
    std::vector<float> y(static_cast<size_t>(rows));
    matmul(*w, x.data(), y.data(), 1, pool);
    for (float v : y) EXPECT_NEAR(v, 64.0f / 2 * 127 + 64.0f / 2 * 128, 1e-2) << isa_level_name(level);
  }
}

TEST(Matmul, ZeroActivationsGiveZero) {
  const Case c = make_case("Q4_0", 9, 64, 5);
  ThreadPool pool(2);
  for (IsaLevel level : levels_here()) {
    auto w = c.pack(level);
    ASSERT_TRUE(w.ok());
    std::vector<float> x(64 * 3, 0.0f);
    const auto y = run(*w, x, 3, pool);
    for (float v : y) EXPECT_EQ(v, 0.0f);
  }
}

// --- packing errors ---------------------------------------------------------------------------------

TEST(PackWeights, RejectsBadShapesWithTheTensorName) {
  std::vector<uint8_t> data(4096);
  auto r = pack_weights(DType::kQ4_K, data.data(), 2, 100, IsaLevel::kAvx2, "blk.0.ffn_up.weight");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_message().find("blk.0.ffn_up.weight"), std::string::npos) << r.error_message();
  EXPECT_NE(r.error_message().find("256"), std::string::npos) << r.error_message();

  r = pack_weights(DType::kQ4_1, data.data(), 2, 64, IsaLevel::kAvx2, "t");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_message().find("Q4_1"), std::string::npos) << r.error_message();

  r = pack_weights(DType::kF32, data.data(), 0, 64, IsaLevel::kAvx2, "t");
  EXPECT_FALSE(r.ok());
  r = pack_weights(DType::kF32, nullptr, 2, 64, IsaLevel::kAvx2, "t");
  EXPECT_FALSE(r.ok());
  r = pack_weights(DType::kF32, data.data(), INT64_MAX / 2, 64, IsaLevel::kAvx2, "t");
  EXPECT_FALSE(r.ok());
}

TEST(PackWeights, RejectsBadMlxParameters) {
  std::vector<uint32_t> codes(64);
  std::vector<uint16_t> s(8), b(8);
  MlxAffineView v;
  v.codes = codes.data();
  v.scales = s.data();
  v.biases = b.data();
  v.bits = 3;
  EXPECT_FALSE(pack_mlx_weights(v, 2, 128, IsaLevel::kAvx2, "q").ok());
  v.bits = 4;
  v.group_size = 48;
  EXPECT_FALSE(pack_mlx_weights(v, 2, 96, IsaLevel::kAvx2, "q").ok());
  v.group_size = 64;
  auto r = pack_mlx_weights(v, 2, 96, IsaLevel::kAvx2, "model.layers.0.mlp.up_proj");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_message().find("up_proj"), std::string::npos);
  v.scale_dtype = DType::kI32;
  EXPECT_FALSE(pack_mlx_weights(v, 2, 128, IsaLevel::kAvx2, "q").ok());
}

TEST(PackWeights, LevelIsClampedToTheCpu) {
  std::vector<float> data(64);
  auto r = pack_weights(DType::kF32, data.data(), 2, 32, IsaLevel::kAvx512);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->isa(), best_isa_level());
  EXPECT_FALSE(r->owns_data());
  EXPECT_EQ(r->data(), reinterpret_cast<const uint8_t*>(data.data()));
}

}  // namespace
}  // namespace splash
