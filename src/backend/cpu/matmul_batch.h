// Several small decode products as one task set (MoE decode: a layer's selected experts).
#pragma once

#include <cstdint>
#include <span>

#include "backend/cpu/matmul.h"
#include "core/thread_pool.h"

namespace splash {

// One product of a batch (matmul_batch): y [n, w->rows()] = x [n, w->cols()] * W^T, n <= 8.
struct MatmulJob {
  const PackedWeights* w = nullptr;
  const float* x = nullptr;
  float* y = nullptr;
  int64_t n = 0;
};

// Several small decode products as one task set of the pool: every product cut into runs of whole
// row groups that the threads take in turn, instead of one dispatch and one wait per product (a MoE
// layer's selected experts: their gate and up products, then their down products). Each y gets the
// bits matmul(*w, x, y, n, pool) gives. Outputs must not overlap each other or any input.
void matmul_batch(std::span<const MatmulJob> jobs, ThreadPool& pool);

}  // namespace splash
