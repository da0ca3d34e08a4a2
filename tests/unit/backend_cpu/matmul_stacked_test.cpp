// pack_stacked_weights (fused q/k/v and gate/up projections built straight from the file parts):
// the stacked matrix is the same, row for row and output for output, as pack_weights of the parts'
// concatenation, for the repacked (x8) formats with parts that split an 8-row group and for the
// copied formats; it always owns its data, so the parts may go away.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul.h"
#include "matmul_test_util.h"

namespace splash {
namespace {

std::vector<uint8_t> make_bytes(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  const auto v = test::random_floats(static_cast<size_t>(rows * cols), seed, 0.05f);
  if (t == DType::kQ4_0) return test::quantize_q4_0(v);
  if (t == DType::kQ8_0) return test::quantize_q8_0(v);
  std::vector<uint8_t> out(v.size() * sizeof(float));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

TEST(MatmulStacked, EqualsPackOfTheConcatenation) {
  ThreadPool pool(2);
  const int64_t cols = 96;
  std::vector<IsaLevel> levels{IsaLevel::kScalar};
  if (best_isa_level() >= IsaLevel::kAvx2) levels.push_back(IsaLevel::kAvx2);
  if (best_isa_level() >= IsaLevel::kAvx512) levels.push_back(IsaLevel::kAvx512);
  for (DType t : {DType::kQ4_0, DType::kQ8_0, DType::kF32}) {
    for (const std::vector<int64_t>& rows : {std::vector<int64_t>{5, 11, 3}, {16, 8, 8}, {1}, {7, 1}}) {
      std::vector<std::vector<uint8_t>> parts;
      std::vector<uint8_t> all;
      std::vector<WeightRows> stack;
      int64_t total = 0;
      for (size_t i = 0; i < rows.size(); ++i) {
        parts.push_back(make_bytes(t, rows[i], cols, 100 + static_cast<uint32_t>(i)));
        all.insert(all.end(), parts.back().begin(), parts.back().end());
        total += rows[i];
      }
      for (size_t i = 0; i < rows.size(); ++i) stack.push_back({parts[i].data(), rows[i]});
      for (IsaLevel level : levels) {
        SCOPED_TRACE(str_cat(dtype_name(t), " parts=", rows.size(), " total=", total, " ", isa_level_name(level)));
        auto want = pack_weights(t, all.data(), total, cols, level);
        ASSERT_TRUE(want.ok()) << want.error_message();
        auto got = pack_stacked_weights(t, stack, cols, level);
        ASSERT_TRUE(got.ok()) << got.error_message();
        EXPECT_TRUE(got->owns_data());
        EXPECT_EQ(got->format(), want->format());
        EXPECT_EQ(got->rows(), total);
        EXPECT_EQ(got->packed_bytes(), want->packed_bytes());
        // Same bytes, padding rows included; then the parts are overwritten: nothing reads them.
        EXPECT_EQ(std::memcmp(got->data(), want->data(), static_cast<size_t>(want->packed_bytes())), 0);
        const auto x = test::random_floats(static_cast<size_t>(3 * cols), 9);
        std::vector<float> y_want(static_cast<size_t>(3 * total)), y_got(y_want.size());
        matmul(*want, x.data(), y_want.data(), 3, pool);
        for (auto& p : parts) std::memset(p.data(), 0x5A, p.size());
        matmul(*got, x.data(), y_got.data(), 3, pool);
        EXPECT_EQ(y_got, y_want);
        std::vector<float> r_want(static_cast<size_t>(cols)), r_got(r_want.size());
        for (int64_t r = 0; r < total; ++r) {
          dequantize_packed_row(*want, r, r_want.data());
          dequantize_packed_row(*got, r, r_got.data());
          ASSERT_EQ(r_got, r_want) << "row " << r;
        }
        for (size_t i = 0; i < rows.size(); ++i) parts[i] = make_bytes(t, rows[i], cols, 100 + static_cast<uint32_t>(i));
        all.clear();
        for (const auto& p : parts) all.insert(all.end(), p.begin(), p.end());
        for (size_t i = 0; i < rows.size(); ++i) stack[i].data = parts[i].data();
      }
    }
  }
}

TEST(MatmulStacked, RejectsBadParts) {
  const std::vector<uint8_t> bytes(4 * 32 * sizeof(float));
  EXPECT_FALSE(pack_stacked_weights(DType::kF32, {}, 32).ok());
  const WeightRows zero_rows[] = {{bytes.data(), 2}, {bytes.data(), 0}};
  EXPECT_FALSE(pack_stacked_weights(DType::kF32, zero_rows, 32).ok());
  const WeightRows null_data[] = {{bytes.data(), 2}, {nullptr, 2}};
  EXPECT_FALSE(pack_stacked_weights(DType::kF32, null_data, 32).ok());
  const WeightRows ok[] = {{bytes.data(), 2}, {bytes.data(), 2}};
  EXPECT_FALSE(pack_stacked_weights(DType::kQ4_0, ok, 33).ok());  // not whole blocks
  EXPECT_TRUE(pack_stacked_weights(DType::kF32, ok, 32).ok());
}

}  // namespace
}  // namespace splash
