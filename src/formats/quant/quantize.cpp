// Legacy 32-element block quantizers and the entry points. The formulas are GGML's reference ones
// (quantize_row_*_ref), re-derived: they fix the bits, so they are spelled out exactly, including
// multiplying by the reciprocal (not dividing) and the +8.5 / +0.5 truncations.
#include "formats/quant/quantize.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>

#include "core/half.h"
#include "core/ggml_blocks.h"
#include "formats/quant/quantize_k.h"

namespace splash::quant {

namespace {

// float -> integer code as ggml's C casts do for every finite in-range value (truncation), but
// saturating out-of-range values and mapping NaN to 0: a subnormal block gives an infinite inverse
// scale, and casting inf to an integer is undefined behaviour (ggml has it; we must not).
template <typename T>
T saturate_cast(float v) {
  if (!(v == v)) return 0;
  constexpr float lo = static_cast<float>(std::numeric_limits<T>::min());
  constexpr float hi = static_cast<float>(std::numeric_limits<T>::max());
  return static_cast<T>(v < lo ? lo : (v > hi ? hi : v));
}

template <class Block>
void store(const Block& b, uint8_t* p) {
  std::memcpy(p, &b, sizeof(Block));
}

// Largest |x| and the signed value that has it (the first one on ties).
void abs_max(const float* x, int n, float* amax, float* max) {
  *amax = 0.0f;
  *max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > *amax) {
      *amax = std::fabs(x[j]);
      *max = x[j];
    }
  }
}

BlockQ8_0 q8_0(const float* x) {
  float amax, max;
  abs_max(x, kQK8_0, &amax, &max);
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  BlockQ8_0 b;
  b.d = f32_to_f16(d);
  for (int j = 0; j < kQK8_0; ++j) b.qs[j] = saturate_cast<int8_t>(std::roundf(x[j] * id));
  return b;
}

BlockQ4_0 q4_0(const float* x) {
  float amax, max;
  abs_max(x, kQK4_0, &amax, &max);
  // The signed extreme maps to -8, so the full range [-8, 7] is used on the side of the extreme.
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  BlockQ4_0 b;
  b.d = f32_to_f16(d);
  for (int j = 0; j < kQK4_0 / 2; ++j) {
    const int lo = std::min(15, static_cast<int>(saturate_cast<int8_t>(x[j] * id + 8.5f)));
    const int hi = std::min(15, static_cast<int>(saturate_cast<int8_t>(x[j + kQK4_0 / 2] * id + 8.5f)));
    b.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
  return b;
}

void min_max(const float* x, int n, float* mn, float* mx) {
  *mn = x[0];
  *mx = x[0];
  for (int j = 1; j < n; ++j) {
    *mn = std::min(*mn, x[j]);
    *mx = std::max(*mx, x[j]);
  }
}

BlockQ4_1 q4_1(const float* x) {
  float mn, mx;
  min_max(x, kQK4_1, &mn, &mx);
  const float d = (mx - mn) / 15.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  BlockQ4_1 b;
  b.d = f32_to_f16(d);
  b.m = f32_to_f16(mn);
  for (int j = 0; j < kQK4_1 / 2; ++j) {
    const int lo = std::min(15, static_cast<int>(saturate_cast<int8_t>((x[j] - mn) * id + 0.5f)));
    const int hi = std::min(15, static_cast<int>(saturate_cast<int8_t>((x[j + kQK4_1 / 2] - mn) * id + 0.5f)));
    b.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
  return b;
}

BlockQ5_0 q5_0(const float* x) {
  float amax, max;
  abs_max(x, kQK5_0, &amax, &max);
  const float d = max / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  BlockQ5_0 b;
  b.d = f32_to_f16(d);
  uint32_t qh = 0;
  for (int j = 0; j < kQK5_0 / 2; ++j) {
    const int lo = std::min(31, static_cast<int>(saturate_cast<int8_t>(x[j] * id + 16.5f)));
    const int hi = std::min(31, static_cast<int>(saturate_cast<int8_t>(x[j + kQK5_0 / 2] * id + 16.5f)));
    b.qs[j] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
    qh |= static_cast<uint32_t>((lo >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((hi >> 4) & 1) << (j + 16);
  }
  std::memcpy(b.qh, &qh, 4);
  return b;
}

BlockQ5_1 q5_1(const float* x) {
  float mn, mx;
  min_max(x, kQK5_1, &mn, &mx);
  const float d = (mx - mn) / 31.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  BlockQ5_1 b;
  b.d = f32_to_f16(d);
  b.m = f32_to_f16(mn);
  uint32_t qh = 0;
  for (int j = 0; j < kQK5_1 / 2; ++j) {
    const int lo = saturate_cast<uint8_t>((x[j] - mn) * id + 0.5f);
    const int hi = saturate_cast<uint8_t>((x[j + kQK5_1 / 2] - mn) * id + 0.5f);
    b.qs[j] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
    qh |= static_cast<uint32_t>((lo >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((hi >> 4) & 1) << (j + 16);
  }
  std::memcpy(b.qh, &qh, 4);
  return b;
}

template <class Block, Block (*Fn)(const float*)>
void blocks(const float* x, uint8_t* dst, int64_t n, int block_elems) {
  for (int64_t k = 0; k < n / block_elems; ++k) store(Fn(x + k * block_elems), dst + k * sizeof(Block));
}

}  // namespace

bool can_quantize(DType type) {
  switch (type) {
    case DType::kF32: case DType::kF16: case DType::kBF16:
    case DType::kQ4_0: case DType::kQ4_1: case DType::kQ5_0: case DType::kQ5_1: case DType::kQ8_0:
    case DType::kQ4_K: case DType::kQ5_K: case DType::kQ6_K: case DType::kQ8_K:
      return true;
    default:
      return false;
  }
}

void quantize_row(DType type, const float* src, void* dst_v, int64_t n) {
  SPLASH_CHECK_MSG(can_quantize(type), "quantize_row: unsupported type");
  SPLASH_CHECK_MSG(n >= 0 && n % dtype_traits(type).block_elems == 0,
                   "quantize_row: n is not a multiple of the block size");
  auto* dst = static_cast<uint8_t*>(dst_v);
  switch (type) {
    case DType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case DType::kF16:
    case DType::kBF16:
      for (int64_t k = 0; k < n; ++k) {
        const uint16_t h = type == DType::kF16 ? f32_to_f16(src[k]) : f32_to_bf16(src[k]);
        std::memcpy(dst + 2 * k, &h, 2);
      }
      return;
    case DType::kQ4_0: return blocks<BlockQ4_0, q4_0>(src, dst, n, kQK4_0);
    case DType::kQ4_1: return blocks<BlockQ4_1, q4_1>(src, dst, n, kQK4_1);
    case DType::kQ5_0: return blocks<BlockQ5_0, q5_0>(src, dst, n, kQK5_0);
    case DType::kQ5_1: return blocks<BlockQ5_1, q5_1>(src, dst, n, kQK5_1);
    case DType::kQ8_0: return blocks<BlockQ8_0, q8_0>(src, dst, n, kQK8_0);
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kQ8_K:
      for (int64_t k = 0; k < n / kQK_K; ++k)
        quantize_k_block(type, src + k * kQK_K, dst + k * dtype_traits(type).block_bytes);
      return;
    default: break;
  }
  SPLASH_CHECK_MSG(false, "quantize_row: unhandled type");
}

Status quantize_tensor(DType type, std::span<const float> src, int64_t row_len, std::vector<uint8_t>& out) {
  if (!can_quantize(type)) return make_error("quantize: cannot quantize to ", dtype_name(type));
  const int64_t block = dtype_traits(type).block_elems;
  if (row_len <= 0 || row_len % block != 0)
    return make_error("quantize: row length ", row_len, " is not a positive multiple of the ", dtype_name(type),
                      " block size ", block);
  if (src.size() % static_cast<size_t>(row_len) != 0)
    return make_error("quantize: ", src.size(), " values are not a whole number of rows of ", row_len);
  for (size_t k = 0; k < src.size(); ++k)
    if (!std::isfinite(src[k]))
      return make_error("quantize: value ", k, " (row ", k / static_cast<size_t>(row_len), ") is not finite");
  const size_t n_rows = src.size() / static_cast<size_t>(row_len);
  const size_t row_bytes = static_cast<size_t>(row_len / block) * dtype_traits(type).block_bytes;
  const size_t start = out.size();
  out.resize(start + n_rows * row_bytes);
  for (size_t r = 0; r < n_rows; ++r)
    quantize_row(type, src.data() + r * static_cast<size_t>(row_len), out.data() + start + r * row_bytes, row_len);
  return {};
}

}  // namespace splash::quant
