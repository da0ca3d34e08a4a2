// No a * b + c fusion: the weights must have the same bits with and without FMA hardware.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "sampling/row_kernels.h"

#include <cstdint>
#include <cstring>
#include <limits>

#include "sampling/fast_exp.h"

namespace splash {
namespace {

typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
typedef uint32_t v4u __attribute__((vector_size(16)));
typedef double v2d __attribute__((vector_size(16)));

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kPosInf = std::numeric_limits<float>::infinity();

inline v4f load(const float* p) {
  v4f v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline v4f splat(float x) { return v4f{x, x, x, x}; }

// exp_nonpositive (fast_exp.h), four lanes, the same operations in the same order.
inline v4f exp4(v4f x) {
  const v4i underflow = ~(x >= splat(-87.0f));
  const v4f xc = underflow ? splat(-87.0f) : x;
  const v4f t = xc * splat(1.44269504088896341f) + splat(12582912.0f);
  const v4f n = t - splat(12582912.0f);
  const v4f r = (xc - n * splat(0.693145751953125f)) - n * splat(1.42860682030941723212e-6f);
  v4f p = splat(1.0f / 5040.0f);
  p = p * r + splat(1.0f / 720.0f);
  p = p * r + splat(1.0f / 120.0f);
  p = p * r + splat(1.0f / 24.0f);
  p = p * r + splat(1.0f / 6.0f);
  p = p * r + splat(0.5f);
  p = p * r + splat(1.0f);
  p = p * r + splat(1.0f);
  const v4i ni = __builtin_convertvector(n, v4i);
  const v4f scale = reinterpret_cast<v4f>(reinterpret_cast<v4u>(ni + 127) << 23);
  return underflow ? splat(0.0f) : p * scale;
}

}  // namespace

RowStats row_stats(std::span<const float> logits) {
  const size_t n = logits.size();
  const float* l = logits.data();
  v4f m0 = splat(kNegInf), m1 = splat(kNegInf);
  v4i bad = {0, 0, 0, 0}, neg_inf = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const v4f a = load(l + i), b = load(l + i + 4);
    m0 = a > m0 ? a : m0;
    m1 = b > m1 ? b : m1;
    bad |= ~(a < splat(kPosInf)) | ~(b < splat(kPosInf));
    neg_inf -= (a == splat(kNegInf)) + (b == splat(kNegInf));  // masks are -1
  }
  float mx = kNegInf;
  bool any_bad = false;
  size_t n_neg_inf = 0;
  for (int j = 0; j < 4; ++j) {
    mx = m0[j] > mx ? m0[j] : mx;
    mx = m1[j] > mx ? m1[j] : mx;
    any_bad |= bad[j] != 0;
    n_neg_inf += static_cast<uint32_t>(neg_inf[j]);
  }
  for (; i < n; ++i) {
    mx = l[i] > mx ? l[i] : mx;
    any_bad |= !(l[i] < kPosInf);
    n_neg_inf += l[i] == kNegInf;
  }
  return RowStats{mx, n - n_neg_inf, any_bad};
}

double detail::row_exp_weights_avx2(std::span<const float> logits, float max, float temperature, float* w) {
  return row_exp_weights_avx2_raw(logits.data(), logits.size(), max, temperature, w);
}

void row_apply_mask(std::span<float> logits, const uint64_t* allowed) {
  const size_t n = logits.size();
  float* x = logits.data();
  const v4u shifts = {0, 1, 2, 3};
  for (size_t w = 0; w * 64 < n; ++w) {
    const uint64_t bits = allowed[w];
    if (bits == ~uint64_t{0}) continue;
    const size_t base = w * 64;
    const size_t end = base + 64 <= n ? base + 64 : n;
    size_t i = base;
    if (bits == 0) {
      for (; i < end; ++i) x[i] = kNegInf;
      continue;
    }
    for (; i + 4 <= end; i += 4) {
      const auto nibble = static_cast<uint32_t>((bits >> (i - base)) & 0xF);
      const v4u keep = (v4u{nibble, nibble, nibble, nibble} >> shifts) & 1u;
      const v4f v = load(x + i);
      const v4f out = keep != 0u ? v : splat(kNegInf);
      std::memcpy(x + i, &out, sizeof(out));
    }
    for (; i < end; ++i) {
      if (!((bits >> (i - base)) & 1)) x[i] = kNegInf;
    }
  }
}

bool detail::cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

double row_exp_weights(std::span<const float> logits, float max, float temperature, float* w) {
  static const bool kAvx2 = detail::cpu_has_avx2();  // immutable after first use
  return kAvx2 ? detail::row_exp_weights_avx2(logits, max, temperature, w)
               : detail::row_exp_weights_sse(logits, max, temperature, w);
}

double detail::row_exp_weights_sse(std::span<const float> logits, float max, float temperature, float* w) {
  const size_t n = logits.size();
  const float* l = logits.data();
  v2d acc[4] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const v4f e0 = exp4((load(l + i) - splat(max)) / splat(temperature));
    const v4f e1 = exp4((load(l + i + 4) - splat(max)) / splat(temperature));
    std::memcpy(w + i, &e0, sizeof(e0));
    std::memcpy(w + i + 4, &e1, sizeof(e1));
    acc[0] += __builtin_convertvector(__builtin_shufflevector(e0, e0, 0, 1), v2d);
    acc[1] += __builtin_convertvector(__builtin_shufflevector(e0, e0, 2, 3), v2d);
    acc[2] += __builtin_convertvector(__builtin_shufflevector(e1, e1, 0, 1), v2d);
    acc[3] += __builtin_convertvector(__builtin_shufflevector(e1, e1, 2, 3), v2d);
  }
  const v2d s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  double total = s[0] + s[1];
  for (; i < n; ++i) {
    w[i] = exp_nonpositive((l[i] - max) / temperature);
    total += w[i];
  }
  return total;
}

}  // namespace splash
