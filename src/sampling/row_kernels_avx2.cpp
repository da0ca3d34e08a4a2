// AVX2 build of row_exp_weights (this file gets -mavx2 -mfma from the build). Same operations, same
// order and the same 8-lane summation tree as the SSE version in row_kernels.cpp, so the bits agree.
// It includes no header with inline functions of ours and uses no std:: inline code: the linker may
// keep any one copy of an inline function, and an AVX2 copy must never reach a baseline caller.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace splash {
namespace {

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef uint32_t v8u __attribute__((vector_size(32)));
typedef double v4d __attribute__((vector_size(32)));
typedef double v2d __attribute__((vector_size(16)));

inline v8f splat8(float x) { return v8f{x, x, x, x, x, x, x, x}; }

// exp_nonpositive (fast_exp.h), eight lanes, the same operations in the same order.
inline v8f exp8(v8f x) {
  const v8i underflow = ~(x >= splat8(-87.0f));
  const v8f xc = underflow ? splat8(-87.0f) : x;
  const v8f t = xc * splat8(1.44269504088896341f) + splat8(12582912.0f);
  const v8f n = t - splat8(12582912.0f);
  const v8f r = (xc - n * splat8(0.693145751953125f)) - n * splat8(1.42860682030941723212e-6f);
  v8f p = splat8(1.0f / 5040.0f);
  p = p * r + splat8(1.0f / 720.0f);
  p = p * r + splat8(1.0f / 120.0f);
  p = p * r + splat8(1.0f / 24.0f);
  p = p * r + splat8(1.0f / 6.0f);
  p = p * r + splat8(0.5f);
  p = p * r + splat8(1.0f);
  p = p * r + splat8(1.0f);
  const v8i ni = __builtin_convertvector(n, v8i);
  const v8f scale = reinterpret_cast<v8f>(reinterpret_cast<v8u>(ni + 127) << 23);
  return underflow ? splat8(0.0f) : p * scale;
}

}  // namespace

// Declared in row_kernels.h (not included here, see the top of the file).
double row_exp_weights_avx2_raw(const float* l, size_t n, float max, float temperature, float* w) {
  v4d lo = {}, hi = {};  // element lanes 0-3 and 4-7
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    v8f x;
    std::memcpy(&x, l + i, sizeof(x));
    const v8f e = exp8((x - splat8(max)) / splat8(temperature));
    std::memcpy(w + i, &e, sizeof(e));
    lo += __builtin_convertvector(__builtin_shufflevector(e, e, 0, 1, 2, 3), v4d);
    hi += __builtin_convertvector(__builtin_shufflevector(e, e, 4, 5, 6, 7), v4d);
  }
  // The SSE tree: ((L0,L1) + (L2,L3)) + ((L4,L5) + (L6,L7)), then its two lanes.
  const v2d a = v2d{lo[0], lo[1]} + v2d{lo[2], lo[3]};
  const v2d b = v2d{hi[0], hi[1]} + v2d{hi[2], hi[3]};
  const v2d s = a + b;
  double total = s[0] + s[1];
  // Tail: padded with `max` (exp(0) = 1, in range; those lanes are discarded), then summed one by one
  // like the SSE tail.
  if (i < n) {
    float tail[8] = {max, max, max, max, max, max, max, max};
    std::memcpy(tail, l + i, (n - i) * sizeof(float));
    v8f x;
    std::memcpy(&x, tail, sizeof(x));
    const v8f e = exp8((x - splat8(max)) / splat8(temperature));
    for (size_t j = 0; i + j < n; ++j) {
      w[i + j] = e[j];
      total += e[j];
    }
  }
  return total;
}

}  // namespace splash
