#include "formats/quant/dequant.h"

#include <cstring>

#include "core/check.h"
#include "core/half.h"
#include "core/ggml_blocks.h"

namespace splash::quant {

namespace {

// Blocks are copied out of the (possibly unaligned) source before use.
template <class Block>
Block load(const uint8_t* p) {
  Block b;
  std::memcpy(&b, p, sizeof(Block));
  return b;
}

void dq_q4_0(const BlockQ4_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < kQK4_0 / 2; ++j) {
    y[j] = static_cast<float>((b.qs[j] & 0xF) - 8) * d;
    y[j + kQK4_0 / 2] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
  }
}

void dq_q4_1(const BlockQ4_1& b, float* y) {
  const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
  for (int j = 0; j < kQK4_1 / 2; ++j) {
    y[j] = static_cast<float>(b.qs[j] & 0xF) * d + m;
    y[j + kQK4_1 / 2] = static_cast<float>(b.qs[j] >> 4) * d + m;
  }
}

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void dq_q5_0(const BlockQ5_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  const uint32_t qh = load_u32(b.qh);
  for (int j = 0; j < kQK5_0 / 2; ++j) {
    const int hi0 = (qh >> j) & 1, hi1 = (qh >> (j + 16)) & 1;
    y[j] = static_cast<float>(((b.qs[j] & 0xF) | (hi0 << 4)) - 16) * d;
    y[j + kQK5_0 / 2] = static_cast<float>(((b.qs[j] >> 4) | (hi1 << 4)) - 16) * d;
  }
}

void dq_q5_1(const BlockQ5_1& b, float* y) {
  const float d = f16_to_f32(b.d), m = f16_to_f32(b.m);
  const uint32_t qh = load_u32(b.qh);
  for (int j = 0; j < kQK5_1 / 2; ++j) {
    const int hi0 = (qh >> j) & 1, hi1 = (qh >> (j + 16)) & 1;
    y[j] = static_cast<float>((b.qs[j] & 0xF) | (hi0 << 4)) * d + m;
    y[j + kQK5_1 / 2] = static_cast<float>((b.qs[j] >> 4) | (hi1 << 4)) * d + m;
  }
}

void dq_q8_0(const BlockQ8_0& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int j = 0; j < kQK8_0; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
}

// K-quant element order: a super-block of 256 is two halves of 128; in each half, byte l (0..31) of
// the 32-byte quant group holds elements l, l+32, l+64, l+96 at bit shifts 0, 2, 4, 6 (2-bit types).
void dq_q2_k(const BlockQ2_K& b, float* y) {
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  for (int half = 0; half < 2; ++half) {
    const uint8_t* q = b.qs + 32 * half;
    for (int j = 0; j < 4; ++j) {      // bit pair j
      for (int g = 0; g < 2; ++g) {    // two sub-blocks of 16 per 32-element group
        const uint8_t sc = b.scales[8 * half + 2 * j + g];
        const float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l)
          *y++ = dl * static_cast<float>((q[16 * g + l] >> (2 * j)) & 3) - ml;
      }
    }
  }
}

void dq_q3_k(const BlockQ3_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int half = 0; half < 2; ++half) {
    const uint8_t* q = b.qs + 32 * half;
    for (int j = 0; j < 4; ++j) {
      const uint8_t hbit = static_cast<uint8_t>(1u << (4 * half + j));
      for (int g = 0; g < 2; ++g) {
        const float dl = d * static_cast<float>(q3k_scale(8 * half + 2 * j + g, b.scales) - 32);
        for (int l = 16 * g; l < 16 * g + 16; ++l) {
          const int low = (q[l] >> (2 * j)) & 3;
          *y++ = dl * static_cast<float>(low - ((b.hmask[l] & hbit) ? 0 : 4));
        }
      }
    }
  }
}

// Q4_K / Q5_K: four groups of 64; in group i byte l of the 32 quant bytes holds element l (low
// nibble, sub-block 2i) and element 32 + l (high nibble, sub-block 2i+1). Q5_K's fifth bits: qh[l]
// bit 2i for the low-nibble element, bit 2i+1 for the high one.
void dq_q4_k(const BlockQ4_K& b, float* y) {
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  for (int i = 0; i < 4; ++i) {
    const uint8_t* q = b.qs + 32 * i;
    int sc, m;
    k_scale_min(b.scales, 2 * i, sc, m);
    const float d1 = d * sc, m1 = dmin * m;
    k_scale_min(b.scales, 2 * i + 1, sc, m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
  }
}

void dq_q5_k(const BlockQ5_K& b, float* y) {
  const float d = f16_to_f32(b.d), dmin = f16_to_f32(b.dmin);
  for (int i = 0; i < 4; ++i) {
    const uint8_t* q = b.qs + 32 * i;
    int sc, m;
    k_scale_min(b.scales, 2 * i, sc, m);
    const float d1 = d * sc, m1 = dmin * m;
    k_scale_min(b.scales, 2 * i + 1, sc, m);
    const float d2 = d * sc, m2 = dmin * m;
    const uint8_t u1 = static_cast<uint8_t>(1u << (2 * i)), u2 = static_cast<uint8_t>(2u << (2 * i));
    for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>((q[l] & 0xF) + ((b.qh[l] & u1) ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>((q[l] >> 4) + ((b.qh[l] & u2) ? 16 : 0)) - m2;
  }
}

// Q6_K: per half of 128, ql bytes l and 32+l carry the low nibbles of elements l, 32+l (low nibble)
// and 64+l, 96+l (high nibble); qh byte l carries their 2 high bits at shifts 0, 2, 4, 6.
void dq_q6_k(const BlockQ6_K& b, float* y) {
  const float d = f16_to_f32(b.d);
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = b.ql + 64 * half;
    const uint8_t* qh = b.qh + 32 * half;
    const int8_t* sc = b.scales + 8 * half;
    float* out = y + 128 * half;
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      out[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      out[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      out[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      out[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
  }
}

void dq_q8_k(const BlockQ8_K& b, float* y) {
  for (int j = 0; j < kQK_K; ++j) y[j] = b.d * static_cast<float>(b.qs[j]);
}

template <class Block, void (*Fn)(const Block&, float*)>
void blocks(const uint8_t* src, float* dst, int64_t n, int block_elems) {
  for (int64_t k = 0; k < n / block_elems; ++k) Fn(load<Block>(src + k * sizeof(Block)), dst + k * block_elems);
}

}  // namespace

bool can_dequantize(DType type) {
  switch (type) {
    case DType::kF32: case DType::kF16: case DType::kBF16: case DType::kF64:
    case DType::kQ4_0: case DType::kQ4_1: case DType::kQ5_0: case DType::kQ5_1: case DType::kQ8_0:
    case DType::kQ2_K: case DType::kQ3_K: case DType::kQ4_K: case DType::kQ5_K: case DType::kQ6_K:
    case DType::kQ8_K:
      return true;
    default:
      return false;
  }
}

void dequantize_row(DType type, const void* src_v, float* dst, int64_t n) {
  SPLASH_CHECK_MSG(can_dequantize(type), "dequantize_row: unsupported type");
  SPLASH_CHECK_MSG(n >= 0 && n % dtype_traits(type).block_elems == 0,
                   "dequantize_row: n is not a multiple of the block size");
  const auto* src = static_cast<const uint8_t*>(src_v);
  switch (type) {
    case DType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case DType::kF64:
      for (int64_t k = 0; k < n; ++k) {
        double v;
        std::memcpy(&v, src + 8 * k, 8);
        dst[k] = static_cast<float>(v);
      }
      return;
    case DType::kF16:
    case DType::kBF16:
      for (int64_t k = 0; k < n; ++k) {
        uint16_t h;
        std::memcpy(&h, src + 2 * k, 2);
        dst[k] = type == DType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      return;
    case DType::kQ4_0: return blocks<BlockQ4_0, dq_q4_0>(src, dst, n, kQK4_0);
    case DType::kQ4_1: return blocks<BlockQ4_1, dq_q4_1>(src, dst, n, kQK4_1);
    case DType::kQ5_0: return blocks<BlockQ5_0, dq_q5_0>(src, dst, n, kQK5_0);
    case DType::kQ5_1: return blocks<BlockQ5_1, dq_q5_1>(src, dst, n, kQK5_1);
    case DType::kQ8_0: return blocks<BlockQ8_0, dq_q8_0>(src, dst, n, kQK8_0);
    case DType::kQ2_K: return blocks<BlockQ2_K, dq_q2_k>(src, dst, n, kQK_K);
    case DType::kQ3_K: return blocks<BlockQ3_K, dq_q3_k>(src, dst, n, kQK_K);
    case DType::kQ4_K: return blocks<BlockQ4_K, dq_q4_k>(src, dst, n, kQK_K);
    case DType::kQ5_K: return blocks<BlockQ5_K, dq_q5_k>(src, dst, n, kQK_K);
    case DType::kQ6_K: return blocks<BlockQ6_K, dq_q6_k>(src, dst, n, kQK_K);
    case DType::kQ8_K: return blocks<BlockQ8_K, dq_q8_k>(src, dst, n, kQK_K);
    default: break;
  }
  SPLASH_CHECK_MSG(false, "dequantize_row: unhandled type");
}

}  // namespace splash::quant
