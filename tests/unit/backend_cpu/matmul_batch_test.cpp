#include "backend/cpu/matmul_batch.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "core/dtype.h"
#include "core/result.h"
#include "matmul_test_util.h"

namespace splash {
namespace {

// One matrix of a batch: the GGML bytes it is packed from, packed at the best level and at scalar.
struct Matrix {
  DType type;
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  PackedWeights best, scalar;
};

Matrix make_matrix(DType type, int64_t rows, int64_t cols, uint32_t seed) {
  Matrix m{type, rows, cols, {}, {}, {}};
  const auto values = test::random_floats(static_cast<size_t>(rows * cols), seed, 0.05f);
  if (type == DType::kQ4_0) {
    m.bytes = test::quantize_q4_0(values);
  } else if (type == DType::kQ8_0) {
    m.bytes = test::quantize_q8_0(values);
  } else {
    m.bytes.resize(values.size() * sizeof(float));
    std::memcpy(m.bytes.data(), values.data(), m.bytes.size());
  }
  m.best = pack_weights(type, m.bytes.data(), rows, cols, best_isa_level(), "w").value();
  m.scalar = pack_weights(type, m.bytes.data(), rows, cols, IsaLevel::kScalar, "w").value();
  return m;
}

TEST(MatmulBatch, EveryProductGetsMatmulsBitsAndAgreesWithTheScalarKernel) {
  // A MoE decode step's shape: several experts' products of different sizes and row counts (one
  // with no rows), in the quantized and float formats, with row counts that are not a multiple of
  // a row group and products big enough to be cut into several runs.
  std::vector<Matrix> ms;
  uint32_t seed = 7;
  for (DType type : {DType::kQ4_0, DType::kQ8_0, DType::kF32}) {
    ms.push_back(make_matrix(type, 256, 512, seed++));
    ms.push_back(make_matrix(type, 1037, 256, seed++));
    ms.push_back(make_matrix(type, 8, 512, seed++));
    ms.push_back(make_matrix(type, 1536, 512, seed++));
  }
  const int64_t ns[] = {1, 3, 8, 0, 2, 1, 5, 1, 8, 1, 4, 1};
  std::vector<std::vector<float>> xs, want, want_scalar;
  for (size_t i = 0; i < ms.size(); ++i) {
    const int64_t n = ns[i];
    xs.push_back(test::random_floats(static_cast<size_t>(n * ms[i].cols), 100 + static_cast<uint32_t>(i)));
    want.emplace_back(static_cast<size_t>(n * ms[i].rows));
    want_scalar.emplace_back(static_cast<size_t>(n * ms[i].rows));
    ThreadPool one(1);
    matmul(ms[i].best, xs[i].data(), want[i].data(), n, one);
    matmul(ms[i].scalar, xs[i].data(), want_scalar[i].data(), n, one);
  }
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int rep = 0; rep < 3; ++rep) {
      std::vector<std::vector<float>> got;
      std::vector<MatmulJob> jobs;
      for (size_t i = 0; i < ms.size(); ++i) got.emplace_back(want[i].size(), -1.0f);
      for (size_t i = 0; i < ms.size(); ++i) jobs.push_back({&ms[i].best, xs[i].data(), got[i].data(), ns[i]});
      matmul_batch(jobs, pool);
      for (size_t i = 0; i < ms.size(); ++i) {
        SCOPED_TRACE(str_cat("product ", i, " (", dtype_name(ms[i].type), " ", ms[i].rows, "x", ms[i].cols, ", n ",
                             ns[i], "), threads ", threads));
        EXPECT_EQ(got[i], want[i]);
        // The SIMD kernels against the scalar ones on the same int8 activations: summation order only.
        if (!want[i].empty()) {
          EXPECT_LT(test::nmse(got[i], want_scalar[i]), 1e-9);
        }
      }
    }
  }
}

TEST(MatmulBatch, NoJobsOrNoRowsIsANoOp) {
  ThreadPool pool(2);
  matmul_batch({}, pool);
  Matrix m = make_matrix(DType::kQ4_0, 64, 64, 3);
  std::vector<float> y(64, -1.0f);
  const std::vector<float> x(64, 1.0f);
  const MatmulJob job{&m.best, x.data(), y.data(), 0};
  matmul_batch(std::span<const MatmulJob>(&job, 1), pool);
  EXPECT_EQ(y, std::vector<float>(64, -1.0f));
}

}  // namespace
}  // namespace splash
