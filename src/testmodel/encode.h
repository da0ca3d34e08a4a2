// Turns generated f32 rows into the bytes of a file tensor type.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"

namespace splash::testmodel {

// True for the GGUF matrix types the generator writes.
bool gguf_type_supported(DType t);

// Appends the encoding of `values` (whole rows of `cols` values) in type `t` to `out`.
Status encode_rows(DType t, std::span<const float> values, uint64_t cols, std::vector<uint8_t>& out);

}  // namespace splash::testmodel
