// Internal to backend/cpu: per-ISA row kernels of norm.h.
#pragma once

#include <cstdint>

namespace splash::cpu {

using RmsNormRowFn = void (*)(const float* x, const float* w, float eps, float* out, int64_t d);

void rms_norm_row_scalar(const float* x, const float* w, float eps, float* out, int64_t d);
void rms_norm_row_avx2(const float* x, const float* w, float eps, float* out, int64_t d);
void rms_norm_row_avx512(const float* x, const float* w, float eps, float* out, int64_t d);

}  // namespace splash::cpu
