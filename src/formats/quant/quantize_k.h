// K-quant block encoders (one 256-element super-block at a time); used by quantize_row.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace splash::quant {

// type is Q4_K, Q5_K, Q6_K or Q8_K; x holds 256 finite floats; dst receives one block.
void quantize_k_block(DType type, const float* x, uint8_t* dst);

}  // namespace splash::quant
