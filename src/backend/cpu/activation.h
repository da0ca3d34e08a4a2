// Element-wise ops of the transformer block: SwiGLU, softmax, residual add. Each picks the best
// kernel at or below `level` (clamped to what the CPU runs), so tests can force a lower tier.
//
// Thread-safety: pure functions over caller-owned buffers; callers may run them concurrently on
// disjoint outputs. They are single-threaded: rows are cheap next to the matmuls around them.
#pragma once

#include <cstdint>

#include "backend/cpu/cpu_features.h"

namespace splash {

// out[i, j] = silu(gate[i, j]) * up[i, j], silu(x) = x / (1 + exp(-x)).
// gate, up: [n, f] rows `in_stride` floats apart (in_stride = 2f when gate and up are the two halves
// of a fused projection); out: [n, f] contiguous. out may alias gate when in_stride == f.
void swiglu(const float* gate, const float* up, int64_t in_stride, float* out, int64_t n, int64_t f,
            IsaLevel level = IsaLevel::kAvx512);

// In place, x: [n] -> exp(x - max) / sum. Rows of -inf only (fully masked) become all zeros.
void softmax(float* x, int64_t n, IsaLevel level = IsaLevel::kAvx512);

// out[i] = a[i] + b[i], x: [n]. out may alias a or b (the residual stream is updated in place).
void add(const float* a, const float* b, float* out, int64_t n);

}  // namespace splash
