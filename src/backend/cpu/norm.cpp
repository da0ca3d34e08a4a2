#include "backend/cpu/norm.h"

#include <cmath>

#include "backend/cpu/norm_kernels.h"
#include "core/check.h"

namespace splash {

namespace cpu {

void rms_norm_row_scalar(const float* x, const float* w, float eps, float* out, int64_t d) {
  double ss = 0.0;
  for (int64_t j = 0; j < d; ++j) ss += static_cast<double>(x[j]) * x[j];
  const float r = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(d) + eps));
  for (int64_t j = 0; j < d; ++j) out[j] = x[j] * r * w[j];
}

}  // namespace cpu

void rms_norm(const float* x, const float* weight, float eps, float* out, int64_t n, int64_t d, IsaLevel level) {
  SPLASH_CHECK(n >= 0 && d > 0);
  const IsaLevel l = clamp_isa_level(level);
  const cpu::RmsNormRowFn fn = l >= IsaLevel::kAvx512 ? cpu::rms_norm_row_avx512
                               : l >= IsaLevel::kAvx2 ? cpu::rms_norm_row_avx2
                                                      : cpu::rms_norm_row_scalar;
  for (int64_t i = 0; i < n; ++i) fn(x + i * d, weight, eps, out + i * d, d);
}

}  // namespace splash
