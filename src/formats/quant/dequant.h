// Scalar reference dequantization of GGML types to f32. Clarity over speed: the SIMD kernels in
// backend/ are tested against these functions. Output is bit-identical to llama.cpp's reference
// dequantizers (same operations in the same order, f32 arithmetic).
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace splash::quant {

// True for F32, F16, BF16, F64, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K.
bool can_dequantize(DType type);

// Decodes `n` values. `src` points at n / block_elems whole blocks (any alignment); `dst` has room for n
// floats. Contract (checked, a violation is a program bug): can_dequantize(type) and n a multiple of
// the block size. Callers handling file data validate shapes first (the GGUF reader already does).
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

}  // namespace splash::quant
