// Scalar reference kernels: plain C++, one weight row and one activation row at a time, integer
// sums per 32-block exactly as the SIMD kernels compute them. Every SIMD kernel is tested against
// these, and these against an f32 product of dequantized weights.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/matmul_repack.h"
#include "core/half.h"

namespace splash::cpu {

namespace {

// --- activation-row dot products, one per format --------------------------------------------------

float dot_q8_0(const uint8_t* row, const QuantizedActs& qx, int64_t i) {
  const auto* blocks = reinterpret_cast<const BlockQ8_0*>(row);
  const int8_t* xq = qx.q_row(i);
  const float* xd = qx.d_row(i);
  float acc = 0.0f;
  for (int64_t b = 0; b < qx.blocks(); ++b) {
    BlockQ8_0 blk;
    std::memcpy(&blk, &blocks[b], sizeof(blk));
    int32_t s = 0;
    for (int k = 0; k < 32; ++k) s += blk.qs[k] * xq[b * 32 + k];
    acc += f16_to_f32(blk.d) * xd[b] * static_cast<float>(s);
  }
  return acc;
}

float dot_q4_0(const uint8_t* row, const QuantizedActs& qx, int64_t i) {
  const auto* blocks = reinterpret_cast<const BlockQ4_0*>(row);
  const int8_t* xq = qx.q_row(i);
  const float* xd = qx.d_row(i);
  const float* xs = qx.dsum_row(i);
  float acc = 0.0f;
  for (int64_t b = 0; b < qx.blocks(); ++b) {
    BlockQ4_0 blk;
    std::memcpy(&blk, &blocks[b], sizeof(blk));
    int32_t s = 0;
    for (int k = 0; k < 16; ++k) {
      s += (blk.qs[k] & 0xF) * xq[b * 32 + k];
      s += (blk.qs[k] >> 4) * xq[b * 32 + k + 16];
    }
    const float d = f16_to_f32(blk.d);
    // (q - 8) * d: the offset's contribution is -8 d * sum(x) over the block.
    acc += d * xd[b] * static_cast<float>(s) - 8.0f * d * xs[b];
  }
  return acc;
}

// Q4_K and Q5_K share everything but the fifth bit.
template <bool kFiveBit>
float dot_q45_k(const uint8_t* row, const QuantizedActs& qx, int64_t i) {
  const int8_t* xq = qx.q_row(i);
  const float* xd = qx.d_row(i);
  const float* xs = qx.dsum_row(i);
  const int64_t n_super = qx.cols / 256;
  const size_t block_bytes = kFiveBit ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
  float acc = 0.0f;
  for (int64_t sb = 0; sb < n_super; ++sb) {
    const uint8_t* p = row + sb * block_bytes;
    uint16_t dh, dminh;
    std::memcpy(&dh, p, 2);
    std::memcpy(&dminh, p + 2, 2);
    const uint8_t* scales = p + 4;
    const uint8_t* qh = kFiveBit ? p + 16 : nullptr;
    const uint8_t* qs = kFiveBit ? p + 48 : p + 16;
    const float d = f16_to_f32(dh), dmin = f16_to_f32(dminh);
    for (int j = 0; j < 8; ++j) {  // sub-block of 32
      int sc, m;
      k_scale_min(scales, j, sc, m);
      const uint8_t* q = qs + 32 * (j / 2);
      const int shift = (j % 2) * 4;
      const int64_t b = sb * 8 + j;
      int32_t s = 0;
      for (int l = 0; l < 32; ++l) {
        int code = (q[l] >> shift) & 0xF;
        if (kFiveBit) code += ((qh[l] >> j) & 1) << 4;
        s += code * xq[b * 32 + l];
      }
      acc += d * static_cast<float>(sc) * xd[b] * static_cast<float>(s) - dmin * static_cast<float>(m) * xs[b];
    }
  }
  return acc;
}

float dot_q6_k(const uint8_t* row, const QuantizedActs& qx, int64_t i) {
  const int8_t* xq = qx.q_row(i);
  const float* xd = qx.d_row(i);
  const int64_t n_super = qx.cols / 256;
  float acc = 0.0f;
  for (int64_t sb = 0; sb < n_super; ++sb) {
    BlockQ6_K blk;
    std::memcpy(&blk, row + sb * sizeof(BlockQ6_K), sizeof(blk));
    const float d = f16_to_f32(blk.d);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = blk.ql + 64 * half;
      const uint8_t* qh = blk.qh + 32 * half;
      const int8_t* sc = blk.scales + 8 * half;
      // Four 32-value sub-blocks per half; element l of sub-block t (t = 0..3).
      for (int t = 0; t < 4; ++t) {
        const int64_t b = sb * 8 + half * 4 + t;
        int32_t s16[2] = {0, 0};
        for (int l = 0; l < 32; ++l) {
          const uint8_t lo = (t & 1) ? ql[l + 32] : ql[l];
          const int low4 = (t < 2) ? (lo & 0xF) : (lo >> 4);
          const int high2 = (qh[l] >> (2 * t)) & 3;
          const int code = (low4 | (high2 << 4)) - 32;
          s16[l / 16] += code * xq[b * 32 + l];
        }
        acc += d * xd[b] * (static_cast<float>(sc[2 * t]) * static_cast<float>(s16[0]) +
                            static_cast<float>(sc[2 * t + 1]) * static_cast<float>(s16[1]));
      }
    }
  }
  return acc;
}

template <int kBits>
float dot_mlx(const PackedWeights& w, const uint8_t* row, const QuantizedActs& qx, int64_t i) {
  const int8_t* xq = qx.q_row(i);
  const float* xd = qx.d_row(i);
  const float* xs = qx.dsum_row(i);
  const int subs = w.group_size() / 32;
  const int64_t n_groups = qx.cols / w.group_size();
  float acc = 0.0f;
  for (int64_t g = 0; g < n_groups; ++g) {
    const uint8_t* p = row + g * w.group_bytes();
    float scale, bias;
    std::memcpy(&scale, p, 4);
    std::memcpy(&bias, p + 4, 4);
    const uint8_t* codes = p + 8;
    for (int k = 0; k < subs; ++k) {
      const int64_t b = g * subs + k;
      int32_t s = 0;
      if (kBits == 4) {
        const uint8_t* q = codes + 16 * k;
        for (int l = 0; l < 16; ++l) {
          s += (q[l] & 0xF) * xq[b * 32 + l];
          s += (q[l] >> 4) * xq[b * 32 + l + 16];
        }
      } else {
        const auto* q = reinterpret_cast<const int8_t*>(codes + 32 * k);
        for (int l = 0; l < 32; ++l) s += q[l] * xq[b * 32 + l];
      }
      acc += scale * xd[b] * static_cast<float>(s) + bias * xs[b];
    }
  }
  return acc;
}

template <class Load>
float dot_float(const uint8_t* row, const float* x, int64_t cols, Load load) {
  float acc = 0.0f;
  for (int64_t c = 0; c < cols; ++c) acc += load(row, c) * x[c];
  return acc;
}

float load_f32(const uint8_t* row, int64_t c) {
  float v;
  std::memcpy(&v, row + 4 * c, 4);
  return v;
}
float load_f16(const uint8_t* row, int64_t c) {
  uint16_t h;
  std::memcpy(&h, row + 2 * c, 2);
  return f16_to_f32(h);
}
float load_bf16(const uint8_t* row, int64_t c) {
  uint16_t h;
  std::memcpy(&h, row + 2 * c, 2);
  return bf16_to_f32(h);
}

// --- tile kernels ---------------------------------------------------------------------------------

template <class Dot>
void tile_quant(const KernelArgs& a, Dot dot) {
  const PackedWeights& w = *a.w;
  for (int64_t i = a.i0; i < a.i1; ++i)
    for (int64_t r = a.r0; r < a.r1; ++r) a.y[i * w.rows() + r] = dot(w.row(r), *a.qx, i);
}

template <class Load>
void tile_float(const KernelArgs& a, Load load) {
  const PackedWeights& w = *a.w;
  for (int64_t i = a.i0; i < a.i1; ++i)
    for (int64_t r = a.r0; r < a.r1; ++r)
      a.y[i * w.rows() + r] = dot_float(w.row(r), a.x + i * w.cols(), w.cols(), load);
}

void k_f32(const KernelArgs& a) { tile_float(a, load_f32); }
void k_f16(const KernelArgs& a) { tile_float(a, load_f16); }
void k_bf16(const KernelArgs& a) { tile_float(a, load_bf16); }
void k_q8_0(const KernelArgs& a) { tile_quant(a, dot_q8_0); }
void k_q4_0(const KernelArgs& a) { tile_quant(a, dot_q4_0); }
void k_q4_k(const KernelArgs& a) { tile_quant(a, dot_q45_k<false>); }
void k_q5_k(const KernelArgs& a) { tile_quant(a, dot_q45_k<true>); }
void k_q6_k(const KernelArgs& a) { tile_quant(a, dot_q6_k); }
void k_mlx4(const KernelArgs& a) {
  tile_quant(a, [&a](const uint8_t* row, const QuantizedActs& qx, int64_t i) { return dot_mlx<4>(*a.w, row, qx, i); });
}
void k_mlx8(const KernelArgs& a) {
  tile_quant(a, [&a](const uint8_t* row, const QuantizedActs& qx, int64_t i) { return dot_mlx<8>(*a.w, row, qx, i); });
}

}  // namespace

TileKernel scalar_kernel(WeightFormat f) {
  switch (f) {
    case WeightFormat::kF32: return k_f32;
    case WeightFormat::kF16: return k_f16;
    case WeightFormat::kBF16: return k_bf16;
    case WeightFormat::kQ8_0: return k_q8_0;
    case WeightFormat::kQ4_0: return k_q4_0;
    case WeightFormat::kQ4_K: return k_q4_k;
    case WeightFormat::kQ5_K: return k_q5_k;
    case WeightFormat::kQ6_K: return k_q6_k;
    case WeightFormat::kMlx4: return k_mlx4;
    case WeightFormat::kMlx8: return k_mlx8;
    case WeightFormat::kQ4_0x8:
    case WeightFormat::kQ8_0x8:
    case WeightFormat::kMlx4x8:
    case WeightFormat::kMlx8x8:
    case WeightFormat::kF16x16:
    case WeightFormat::kBF16x16:
    case WeightFormat::kQ4_Kx8:
    case WeightFormat::kQ5_Kx8:
    case WeightFormat::kQ6_Kx8: return nullptr;  // only packed at AVX2 and above
  }
  return nullptr;
}

void quantize_acts_scalar(const float* x, QuantizedActs& qx, int64_t i0, int64_t i1) {
  const int64_t nb = qx.blocks();
  for (int64_t i = i0; i < i1; ++i) {
    const float* xr = x + i * qx.cols;
    int8_t* q = qx.qs.data() + i * qx.cols;
    for (int64_t b = 0; b < nb; ++b) {
      float amax = 0.0f;
      for (int k = 0; k < 32; ++k) amax = std::max(amax, std::fabs(xr[b * 32 + k]));
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      int32_t sum = 0, sum16 = 0;
      for (int k = 0; k < 32; ++k) {
        // nearbyint (ties to even) matches the SIMD cvtps rounding bit for bit.
        const int32_t v = static_cast<int32_t>(std::nearbyint(xr[b * 32 + k] * id));
        q[b * 32 + k] = static_cast<int8_t>(v);
        sum += v;
        if (k == 15) sum16 = sum;
      }
      qx.d[i * nb + b] = d;
      qx.dsum[i * nb + b] = d * static_cast<float>(sum);
      qx.qsum[i * nb + b] = sum;
      qx.qsum16[i * nb + b] = sum16;
    }
  }
}

void dequantize_row_scalar(const PackedWeights& w, int64_t r, float* out) {
  if (w.is_x8()) {
    dequantize_x8_row(w, r, out);
    return;
  }
  const uint8_t* row = w.row(r);
  const int64_t cols = w.cols();
  switch (w.format()) {
    case WeightFormat::kF32:
      for (int64_t c = 0; c < cols; ++c) out[c] = load_f32(row, c);
      return;
    case WeightFormat::kF16:
      for (int64_t c = 0; c < cols; ++c) out[c] = load_f16(row, c);
      return;
    case WeightFormat::kBF16:
      for (int64_t c = 0; c < cols; ++c) out[c] = load_bf16(row, c);
      return;
    case WeightFormat::kQ8_0:
      for (int64_t b = 0; b < cols / 32; ++b) {
        BlockQ8_0 blk;
        std::memcpy(&blk, row + b * sizeof(blk), sizeof(blk));
        for (int k = 0; k < 32; ++k) out[b * 32 + k] = f16_to_f32(blk.d) * blk.qs[k];
      }
      return;
    case WeightFormat::kQ4_0:
      for (int64_t b = 0; b < cols / 32; ++b) {
        BlockQ4_0 blk;
        std::memcpy(&blk, row + b * sizeof(blk), sizeof(blk));
        const float d = f16_to_f32(blk.d);
        for (int k = 0; k < 16; ++k) {
          out[b * 32 + k] = d * static_cast<float>((blk.qs[k] & 0xF) - 8);
          out[b * 32 + k + 16] = d * static_cast<float>((blk.qs[k] >> 4) - 8);
        }
      }
      return;
    case WeightFormat::kQ4_K:
    case WeightFormat::kQ5_K: {
      const bool five = w.format() == WeightFormat::kQ5_K;
      const size_t bytes = five ? sizeof(BlockQ5_K) : sizeof(BlockQ4_K);
      for (int64_t sb = 0; sb < cols / 256; ++sb) {
        const uint8_t* p = row + sb * bytes;
        uint16_t dh, dminh;
        std::memcpy(&dh, p, 2);
        std::memcpy(&dminh, p + 2, 2);
        const uint8_t* qh = p + 16;
        const uint8_t* qs = five ? p + 48 : p + 16;
        for (int j = 0; j < 8; ++j) {
          int sc, m;
          k_scale_min(p + 4, j, sc, m);
          for (int l = 0; l < 32; ++l) {
            int code = (qs[32 * (j / 2) + l] >> ((j % 2) * 4)) & 0xF;
            if (five) code += ((qh[l] >> j) & 1) << 4;
            out[sb * 256 + j * 32 + l] = f16_to_f32(dh) * static_cast<float>(sc) * static_cast<float>(code) -
                                         f16_to_f32(dminh) * static_cast<float>(m);
          }
        }
      }
      return;
    }
    case WeightFormat::kQ6_K:
      for (int64_t sb = 0; sb < cols / 256; ++sb) {
        BlockQ6_K blk;
        std::memcpy(&blk, row + sb * sizeof(blk), sizeof(blk));
        const float d = f16_to_f32(blk.d);
        for (int half = 0; half < 2; ++half)
          for (int t = 0; t < 4; ++t)
            for (int l = 0; l < 32; ++l) {
              const uint8_t lo = blk.ql[64 * half + l + ((t & 1) ? 32 : 0)];
              const int low4 = (t < 2) ? (lo & 0xF) : (lo >> 4);
              const int high2 = (blk.qh[32 * half + l] >> (2 * t)) & 3;
              const int code = (low4 | (high2 << 4)) - 32;
              out[sb * 256 + half * 128 + t * 32 + l] = d * blk.scales[8 * half + 2 * t + l / 16] * code;
            }
      }
      return;
    case WeightFormat::kQ4_0x8:
    case WeightFormat::kQ8_0x8:
    case WeightFormat::kMlx4x8:
    case WeightFormat::kMlx8x8:
    case WeightFormat::kF16x16:
    case WeightFormat::kBF16x16:
    case WeightFormat::kQ4_Kx8:
    case WeightFormat::kQ5_Kx8:
    case WeightFormat::kQ6_Kx8: return;  // handled above
    case WeightFormat::kMlx4:
    case WeightFormat::kMlx8: {
      const int gs = w.group_size();
      for (int64_t g = 0; g < cols / gs; ++g) {
        const uint8_t* p = row + g * w.group_bytes();
        float scale, bias;
        std::memcpy(&scale, p, 4);
        std::memcpy(&bias, p + 4, 4);
        for (int e = 0; e < gs; ++e) {
          float code;
          if (w.format() == WeightFormat::kMlx4) {
            const uint8_t byte = p[8 + 16 * (e / 32) + (e % 16)];
            code = static_cast<float>((e % 32) < 16 ? (byte & 0xF) : (byte >> 4));
          } else {
            code = static_cast<float>(static_cast<int8_t>(p[8 + e]));
          }
          out[g * gs + e] = scale * code + bias;
        }
      }
      return;
    }
  }
}

}  // namespace splash::cpu
