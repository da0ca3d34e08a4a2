// Cross-checks against the formats module, written independently of the kernels: MLX affine
// quantization (formats/mlx_quant.h) and, when present, the GGML quantizers and dequantizers
// (formats/quant/). The kernels must read those blocks exactly as the reference dequantizer does.
#include <gtest/gtest.h>

#include <span>

#include "backend/cpu/matmul.h"
#include "formats/mlx_quant.h"
#include "matmul_test_util.h"

#if __has_include("formats/quant/dequant.h")
#include "formats/quant/dequant.h"
#include "formats/quant/quantize.h"
#define SPLASH_HAVE_QUANT 1
#else
#define SPLASH_HAVE_QUANT 0
#endif

namespace splash {
namespace {

// Activation int8 quantization error bound, as in matmul_test.cpp.
constexpr double kQuantActNmse = 2e-4;

std::vector<IsaLevel> levels_here() {
  std::vector<IsaLevel> out = {IsaLevel::kScalar};
  if (best_isa_level() >= IsaLevel::kAvx2) out.push_back(IsaLevel::kAvx2);
  if (best_isa_level() >= IsaLevel::kAvx512) out.push_back(IsaLevel::kAvx512);
  return out;
}

void check_matmul(const PackedWeights& w, const std::vector<float>& wf, ThreadPool& pool) {
  for (int64_t n : {1, 3, 33}) {
    const auto x = test::random_floats(static_cast<size_t>(n * w.cols()), 7 + static_cast<uint32_t>(n));
    const auto ref = test::reference_matmul(wf, x, w.rows(), w.cols(), n);
    std::vector<float> y(static_cast<size_t>(n * w.rows()));
    matmul(w, x.data(), y.data(), n, pool);
    EXPECT_LT(test::nmse(y, ref), kQuantActNmse) << "n=" << n << " " << isa_level_name(w.isa());
  }
}

struct MlxCase {
  uint32_t bits, group;
  DType scale_dtype;
};

TEST(CrossCheck, MlxAffineMatchesFormatsDequantizer) {
  ThreadPool pool(2);
  const int64_t rows = 19, cols = 384;
  const auto wsrc = test::random_floats(static_cast<size_t>(rows * cols), 42, 0.03f);
  for (MlxCase mc : {MlxCase{4, 64, DType::kBF16}, MlxCase{4, 32, DType::kF16}, MlxCase{8, 32, DType::kF16},
                     MlxCase{8, 64, DType::kBF16}, MlxCase{4, 128, DType::kF32}}) {
    SCOPED_TRACE(str_cat("bits=", mc.bits, " group=", mc.group, " ", dtype_name(mc.scale_dtype)));
    MlxQuantParams p{mc.group, mc.bits};
    auto q = mlx_quantize(wsrc, rows, cols, p, mc.scale_dtype);
    ASSERT_TRUE(q.ok()) << q.error_message();
    std::vector<float> ref(static_cast<size_t>(rows * cols));
    const auto* packed_bytes = reinterpret_cast<const uint8_t*>(q->weight.data());
    ASSERT_TRUE(mlx_dequantize(std::span<const uint8_t>(packed_bytes, q->weight.size() * 4), q->scales, q->biases,
                               mc.scale_dtype, p, rows, cols, ref)
                    .ok());
    MlxAffineView v;
    v.bits = static_cast<int>(mc.bits);
    v.group_size = static_cast<int>(mc.group);
    v.scale_dtype = mc.scale_dtype;
    v.codes = q->weight.data();
    v.scales = q->scales.data();
    v.biases = q->biases.data();
    for (IsaLevel level : levels_here()) {
      auto w = pack_mlx_weights(v, rows, cols, level, "cross");
      ASSERT_TRUE(w.ok()) << w.error_message();
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_packed_row(*w, r, row.data());
        for (int64_t c = 0; c < cols; ++c)  // 8-bit folds 128 * scale into the bias: f32 rounding only
          ASSERT_NEAR(row[static_cast<size_t>(c)], ref[static_cast<size_t>(r * cols + c)], 1e-6)
              << "r=" << r << " c=" << c;
      }
      check_matmul(*w, ref, pool);
    }
  }
}

#if SPLASH_HAVE_QUANT
TEST(CrossCheck, GgmlBlocksMatchFormatsDequantizer) {
  ThreadPool pool(2);
  const int64_t rows = 13, cols = 512;
  const auto wsrc = test::random_floats(static_cast<size_t>(rows * cols), 11, 0.02f);
  for (DType t : {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kF16, DType::kBF16}) {
    SCOPED_TRACE(dtype_name(t));
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(quant::quantize_tensor(t, wsrc, cols, bytes).ok());
    std::vector<float> ref(static_cast<size_t>(rows * cols));
    quant::dequantize_row(t, bytes.data(), ref.data(), rows * cols);
    for (IsaLevel level : levels_here()) {
      auto w = pack_weights(t, bytes.data(), rows, cols, level, "cross");
      ASSERT_TRUE(w.ok()) << w.error_message();
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_packed_row(*w, r, row.data());
        for (int64_t c = 0; c < cols; ++c)
          ASSERT_NEAR(row[static_cast<size_t>(c)], ref[static_cast<size_t>(r * cols + c)],
                      1e-6f * (1.0f + std::fabs(ref[static_cast<size_t>(r * cols + c)])))
              << "r=" << r << " c=" << c;
      }
      if (t != DType::kF16 && t != DType::kBF16) check_matmul(*w, ref, pool);
    }
  }
}
#else
TEST(CrossCheck, GgmlBlocksMatchFormatsDequantizer) {
  GTEST_SKIP() << "formats/quant (GGML quantizer/dequantizer) is not in this tree yet";
}
#endif

}  // namespace
}  // namespace splash
