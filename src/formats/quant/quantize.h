// Scalar quantizers f32 -> GGML blocks (the converter's path; not performance-critical).
// Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and Q8_K follow the published GGML reference formulas exactly, so
// their blocks are bit-identical to llama.cpp's reference quantizer. Q4_K, Q5_K and Q6_K use a
// weighted least-squares search over candidate scales (same family of method as llama.cpp's, not
// bit-identical): the result decodes with any GGML-compatible dequantizer.
// F32, F16 and BF16 are accepted too (plain conversion), so a converter can treat every target alike.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"

namespace splash::quant {

// F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, Q8_K.
bool can_quantize(DType type);

// Encodes `n` finite floats into n / block_elems blocks at `dst` (any alignment).
// Contract (checked; a violation is a program bug): can_quantize(type), n a multiple of the block size.
void quantize_row(DType type, const float* src, void* dst, int64_t n);

// Quantizes a row-major tensor whose rows have `row_len` elements, appending the blocks to `out`
// (row after row, as GGUF stores them). Errors (naming the type and sizes): unsupported type,
// row_len not a positive multiple of the block size, src.size() not a multiple of row_len, a NaN or
// infinite input.
Status quantize_tensor(DType type, std::span<const float> src, int64_t row_len, std::vector<uint8_t>& out);

}  // namespace splash::quant
