// Test helpers for the matmul tests: random weight blocks in every format, an f64 reference product,
// normalized MSE. Independent of the kernels: blocks are built from the GGML / MLX layout definitions.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"

namespace splash::test {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng() & 0xFF);
  return v;
}

inline void put_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// Q8_0 from floats: d = max|x| / 127, q = round(x / d).
inline std::vector<uint8_t> quantize_q8_0(const std::vector<float>& x) {
  std::vector<uint8_t> out(x.size() / 32 * 34);
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0;
    for (int k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(x[b * 32 + k]));
    const float d = amax / 127.0f;
    put_u16(&out[b * 34], f32_to_f16(d));
    for (int k = 0; k < 32; ++k)
      out[b * 34 + 2 + k] = static_cast<uint8_t>(static_cast<int8_t>(d ? std::lround(x[b * 32 + k] / d) : 0));
  }
  return out;
}

// Q4_0 from floats: d = (value of largest magnitude) / -8, q = clamp(round(x / d) + 8, 0, 15).
inline std::vector<uint8_t> quantize_q4_0(const std::vector<float>& x) {
  std::vector<uint8_t> out(x.size() / 32 * 18);
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float mx = 0;
    for (int k = 0; k < 32; ++k)
      if (std::fabs(x[b * 32 + k]) > std::fabs(mx)) mx = x[b * 32 + k];
    const float d = mx / -8.0f;
    put_u16(&out[b * 18], f32_to_f16(d));
    auto code = [&](int k) {
      long q = d ? std::lround(x[b * 32 + k] / d) + 8 : 8;
      return static_cast<uint8_t>(std::clamp<long>(q, 0, 15));
    };
    for (int k = 0; k < 16; ++k) out[b * 18 + 2 + k] = static_cast<uint8_t>(code(k) | (code(k + 16) << 4));
  }
  return out;
}

// K-quant super-blocks with random codes and scales, and super-scales small enough to keep values
// in a realistic range (any byte pattern is a valid block).
inline std::vector<uint8_t> random_k_blocks(size_t n_blocks, size_t block_bytes, bool q6, uint32_t seed) {
  std::vector<uint8_t> v = random_bytes(n_blocks * block_bytes, seed);
  std::mt19937 rng(seed ^ 0x9e3779b9u);
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  for (size_t b = 0; b < n_blocks; ++b) {
    uint8_t* p = &v[b * block_bytes];
    if (q6) {
      put_u16(p + 208, f32_to_f16(0.0005f * u(rng)));
    } else {
      put_u16(p, f32_to_f16(0.002f * u(rng)));
      put_u16(p + 2, f32_to_f16(0.004f * u(rng)));
    }
  }
  return v;
}

// Reference product in double: y[i, r] = sum_c x[i, c] * w[r, c].
inline std::vector<double> reference_matmul(const std::vector<float>& w, const std::vector<float>& x, int64_t rows,
                                            int64_t cols, int64_t n) {
  std::vector<double> y(static_cast<size_t>(n * rows));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t c = 0; c < cols; ++c) s += static_cast<double>(w[r * cols + c]) * x[i * cols + c];
      y[i * rows + r] = s;
    }
  return y;
}

template <class A, class B>
double nmse(const std::vector<A>& got, const std::vector<B>& ref) {
  double num = 0, den = 0;
  for (size_t k = 0; k < ref.size(); ++k) {
    const double d = static_cast<double>(got[k]) - static_cast<double>(ref[k]);
    num += d * d;
    den += static_cast<double>(ref[k]) * static_cast<double>(ref[k]);
  }
  return den > 0 ? num / den : num;
}

}  // namespace splash::test
