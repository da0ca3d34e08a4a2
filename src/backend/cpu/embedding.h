// Token embedding lookup. The table is a PackedWeights (matmul.h) so one loaded tensor serves both
// the lookup and, for tied embeddings, the output projection; every weight format matmul packs
// (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, MLX 4/8-bit) works here through
// dequantize_packed_row.
//
// Thread-safety: reads the immutable table, writes out; single-threaded (n rows of one row copy).
#pragma once

#include <cstdint>

#include "backend/cpu/matmul.h"
#include "core/result.h"

namespace splash {

// out: [n, table.cols()] f32, row i = table row tokens[i]. A token id outside [0, table.rows()) is
// an error naming the id and its index (token ids come from requests), and out is left unspecified.
Status embedding_lookup(const PackedWeights& table, const int32_t* tokens, int64_t n, float* out);

}  // namespace splash
