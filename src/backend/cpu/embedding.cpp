#include "backend/cpu/embedding.h"

namespace splash {

Status embedding_lookup(const PackedWeights& table, const int32_t* tokens, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= table.rows()) {
      return make_error("embedding: token id ", tokens[i], " at index ", i, " is outside the vocabulary [0, ",
                        table.rows(), ")");
    }
  }
  for (int64_t i = 0; i < n; ++i) dequantize_packed_row(table, tokens[i], out + i * table.cols());
  return {};
}

}  // namespace splash
