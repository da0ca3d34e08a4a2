#include "backend/cpu/matmul_repack.h"

#include <cstring>

#include "backend/cpu/matmul_kernels.h"
#include "core/check.h"
#include "core/half.h"

namespace splash::cpu {

WeightFormat x8_format_of(WeightFormat f) {
  if (f == WeightFormat::kQ4_0) return WeightFormat::kQ4_0x8;
  if (f == WeightFormat::kQ8_0) return WeightFormat::kQ8_0x8;
  if (f == WeightFormat::kQ4_K) return WeightFormat::kQ4_Kx8;
  if (f == WeightFormat::kQ5_K) return WeightFormat::kQ5_Kx8;
  if (f == WeightFormat::kQ6_K) return WeightFormat::kQ6_Kx8;
  return f;
}

int64_t x8_block_bytes(WeightFormat x8) {
  SPLASH_CHECK(x8 == WeightFormat::kQ4_0x8 || x8 == WeightFormat::kQ8_0x8 || is_k_x8(x8));
  if (x8 == WeightFormat::kQ4_Kx8) return kQ4_Kx8SuperBytes / 8;
  if (x8 == WeightFormat::kQ5_Kx8) return kQ5_Kx8SuperBytes / 8;
  if (x8 == WeightFormat::kQ6_Kx8) return kQ6_Kx8SuperBytes / 8;
  return x8 == WeightFormat::kQ4_0x8 ? kQ4_0x8BlockBytes : kQ8_0x8BlockBytes;
}

void repack_f16x16_rows(const uint8_t* src, int64_t rows, int64_t cols, int64_t row0, uint8_t* dst) {
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t row = row0 + i;
    uint8_t* group = dst + (row / kF16x16Rows) * cols * 2 * kF16x16Rows + 2 * (row % kF16x16Rows);
    const uint8_t* in = src + i * cols * 2;
    for (int64_t c = 0; c < cols; ++c) std::memcpy(group + c * 2 * kF16x16Rows, in + 2 * c, 2);
  }
}

namespace {

inline uint32_t load4(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline void store4(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
constexpr uint32_t kLowNibbles = 0x0F0F0F0Fu;

// Row `lane` of a kQ4_Kx8 / kQ5_Kx8 super-block at `out` from one file super-block (BlockQ4_K /
// BlockQ5_K); lane 0..7. Four code bytes at a time: repacking is part of every load.
template <bool kFive>
void put_q45_k_lane(const uint8_t* blk, int lane, uint8_t* out) {
  // Both blocks start with d, dmin and the 12 scale bytes; Q5_K then has qh[32] before qs[128].
  // File: qs byte 32 i + l holds value 64 i + l (low nibble, sub-block 2i) and 64 i + 32 + l (high
  // nibble, sub-block 2i + 1); Q5_K's qh[l] bit j is the fifth bit of value 32 j + l.
  const uint8_t* scales = blk + 4;
  const uint8_t* qh = blk + 16;
  const uint8_t* qs = kFive ? blk + 48 : blk + 16;
  std::memcpy(out + 2 * lane, blk, 2);
  std::memcpy(out + 16 + 2 * lane, blk + 2, 2);
  const int64_t code_bytes = kFive ? kQ5_Kx8CodeBytes : kQ4_Kx8CodeBytes;
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    k_scale_min(scales, j, sc, m);
    out[kQ4_Kx8ScOffset + 8 * j + lane] = static_cast<uint8_t>(sc);
    out[kQ4_Kx8MinOffset + 8 * j + lane] = static_cast<uint8_t>(m);
    uint8_t* codes = out + kQ4_Kx8CodeOffset + code_bytes * j;
    const uint8_t* q = qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    uint32_t top = 0;
    for (int s = 0; s < 4; ++s) {  // as Q4_0x8: step s, byte k = values 4s + k (low) and 16 + 4s + k (high)
      const uint32_t a = (load4(q + 4 * s) >> shift) & kLowNibbles;
      const uint32_t h = (load4(q + 16 + 4 * s) >> shift) & kLowNibbles;
      store4(codes + 32 * s + 4 * lane, a | (h << 4));
      if (kFive) {  // fifth bits: bit s of the byte for step s's low-nibble value, bit 4 + s for its high
        const uint32_t fa = (load4(qh + 4 * s) >> j) & 0x01010101u;
        const uint32_t fh = (load4(qh + 16 + 4 * s) >> j) & 0x01010101u;
        top |= (fa << s) | (fh << (4 + s));
      }
    }
    if (kFive) store4(codes + 128 + 4 * lane, top);
  }
}

// Row `lane` of a kQ6_Kx8 super-block at `out` from one file super-block (BlockQ6_K), four code
// bytes at a time. File: value v = 128 half + 32 t + l has its low 4 bits in ql[64 half + 32 (t % 2)
// + l] (low nibble for t < 2, high for t >= 2) and its top 2 bits in bits 2t of qh[32 half + l].
void put_q6_k_lane(const uint8_t* blk, int lane, uint8_t* out) {
  const uint8_t* ql = blk;
  const uint8_t* qh = blk + 128;
  const uint8_t* scales = blk + 192;
  std::memcpy(out + 2 * lane, blk + 208, 2);
  for (int j = 0; j < 16; ++j) out[kQ6_Kx8ScOffset + 8 * j + lane] = scales[j];
  for (int j = 0; j < 8; ++j) {  // block j: values 32 j .. 32 j + 31, i.e. half j / 4, t = j % 4
    const int half = j / 4, t = j % 4;
    const uint8_t* lo = ql + 64 * half + 32 * (t % 2);
    const uint8_t* hi = qh + 32 * half;
    const int lshift = t < 2 ? 0 : 4;
    uint8_t* p = out + kQ6_Kx8BlockOffset + kQ6_Kx8BlockBytes * j;
    for (int s = 0; s < 4; ++s) {
      const uint32_t a = (load4(lo + 4 * s) >> lshift) & kLowNibbles;
      const uint32_t h = (load4(lo + 16 + 4 * s) >> lshift) & kLowNibbles;
      store4(p + 32 * s + 4 * lane, a | (h << 4));
      const uint32_t ta = (load4(hi + 4 * s) >> (2 * t)) & 0x03030303u;
      const uint32_t th = (load4(hi + 16 + 4 * s) >> (2 * t)) & 0x03030303u;
      const uint32_t top = ta | (th << 2);  // per byte: a's top 2 bits, then h's
      uint8_t* hb = p + 128 + 32 * (s / 2) + 4 * lane;
      const uint32_t old = load4(hb);
      store4(hb, s % 2 == 0 ? (old & kLowNibbles) | (top << 4) : (old & ~kLowNibbles) | top);
    }
  }
}

// The K-quant x8 layouts, per super-block: their file block size, bytes, and lane writer.
struct KX8 {
  int64_t file_bytes, bytes;
  void (*put)(const uint8_t*, int, uint8_t*);
};
KX8 k_x8(WeightFormat x8) {
  if (x8 == WeightFormat::kQ4_Kx8) return {sizeof(BlockQ4_K), kQ4_Kx8SuperBytes, put_q45_k_lane<false>};
  if (x8 == WeightFormat::kQ5_Kx8) return {sizeof(BlockQ5_K), kQ5_Kx8SuperBytes, put_q45_k_lane<true>};
  return {sizeof(BlockQ6_K), kQ6_Kx8SuperBytes, put_q6_k_lane};
}

}  // namespace

void repack_x8_rows(WeightFormat x8, const uint8_t* src, int64_t rows, int64_t cols, int64_t row0, uint8_t* dst) {
  if (is_k_x8(x8)) {
    const KX8 k = k_x8(x8);
    const int64_t nsb = cols / 256;
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t row = row0 + i;
      uint8_t* group = dst + (row / kX8Rows) * nsb * k.bytes;
      for (int64_t sb = 0; sb < nsb; ++sb)
        k.put(src + (i * nsb + sb) * k.file_bytes, static_cast<int>(row % kX8Rows), group + sb * k.bytes);
    }
    return;
  }
  const bool q4 = x8 == WeightFormat::kQ4_0x8;
  const int64_t nb = cols / 32;
  const int64_t src_block = q4 ? 18 : 34;  // fp16 d + codes
  const int64_t code_bytes = src_block - 2;
  const int64_t block_bytes = x8_block_bytes(x8);
  // Row-outer: one source row is read once, front to back, and its blocks land in one group
  // (nb x block_bytes contiguous bytes), which the group's other 7 rows fill while it is in cache.
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t row = row0 + i;
    const int r = static_cast<int>(row % kX8Rows);
    uint8_t* group = dst + (row / kX8Rows) * nb * block_bytes;
    const uint8_t* in = src + i * nb * src_block;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* out = group + b * block_bytes;
      const uint8_t* blk = in + b * src_block;
      std::memcpy(out + 2 * r, blk, 2);
      for (int64_t s = 0; s < code_bytes / 4; ++s) std::memcpy(out + 16 + s * 32 + 4 * r, blk + 2 + 4 * s, 4);
    }
  }
}

namespace {

// value = scale * code + bias, as the file defines it (kMlx8x8 stores code - 128).
void dequantize_mlx_x8_row(const PackedWeights& w, int64_t r, float* out) {
  const int gs = w.group_size();
  const DType st = w.scale_dtype();
  const int sb = st == DType::kF32 ? 4 : 2;
  const bool eight = w.format() == WeightFormat::kMlx8x8;
  const int64_t gb = eight ? mlx8x8_group_bytes(gs, sb) : mlx4x8_group_bytes(gs, sb);
  const uint8_t* group = w.data() + (r / kX8Rows) * w.group_bytes();
  const int lane = static_cast<int>(r % kX8Rows);
  auto load = [&](const uint8_t* q) {
    if (sb == 4) {
      float v;
      std::memcpy(&v, q, 4);
      return v;
    }
    uint16_t h;
    std::memcpy(&h, q, 2);
    return st == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
  };
  for (int64_t g = 0; g < w.cols() / gs; ++g) {
    const uint8_t* p = group + g * gb;
    const float scale = load(p + sb * lane);
    const float bias = load(p + 8 * sb + sb * lane);
    for (int k = 0; k < gs / 32; ++k) {
      if (eight) {
        const uint8_t* codes = p + 16 * sb + 256 * k;
        for (int e = 0; e < 32; ++e)
          out[g * gs + 32 * k + e] = scale * static_cast<float>(codes[32 * (e / 4) + 4 * lane + e % 4] ^ 0x80) + bias;
        continue;
      }
      const uint8_t* codes = p + 16 * sb + 128 * k;
      float* o = out + g * gs + 32 * k;
      for (int s = 0; s < 4; ++s)
        for (int j = 0; j < 4; ++j) {
          const uint8_t byte = codes[s * 32 + 4 * lane + j];
          o[4 * s + j] = scale * static_cast<float>(byte & 0xF) + bias;
          o[16 + 4 * s + j] = scale * static_cast<float>(byte >> 4) + bias;
        }
    }
  }
}

// As the file's own dequantization: (d sc) code - (dmin m), in that order.
void dequantize_q45_kx8_row(const PackedWeights& w, int64_t r, float* out) {
  const bool five = w.format() == WeightFormat::kQ5_Kx8;
  const int64_t super_bytes = five ? kQ5_Kx8SuperBytes : kQ4_Kx8SuperBytes;
  const int64_t code_bytes = five ? kQ5_Kx8CodeBytes : kQ4_Kx8CodeBytes;
  const uint8_t* group = w.data() + (r / kX8Rows) * w.group_bytes();
  const int lane = static_cast<int>(r % kX8Rows);
  for (int64_t sb = 0; sb < w.cols() / 256; ++sb) {
    const uint8_t* p = group + sb * super_bytes;
    uint16_t h;
    std::memcpy(&h, p + 2 * lane, 2);
    const float d = f16_to_f32(h);
    std::memcpy(&h, p + 16 + 2 * lane, 2);
    const float dmin = f16_to_f32(h);
    for (int j = 0; j < 8; ++j) {
      const float d1 = d * static_cast<float>(p[kQ4_Kx8ScOffset + 8 * j + lane]);
      const float m1 = dmin * static_cast<float>(p[kQ4_Kx8MinOffset + 8 * j + lane]);
      const uint8_t* codes = p + kQ4_Kx8CodeOffset + code_bytes * j;
      float* o = out + sb * 256 + 32 * j;
      for (int s = 0; s < 4; ++s)
        for (int k = 0; k < 4; ++k) {
          const uint8_t byte = codes[32 * s + 4 * lane + k];
          const int top = five ? codes[128 + 4 * lane + k] : 0;
          o[4 * s + k] = d1 * static_cast<float>((byte & 0xF) | (((top >> s) & 1) << 4)) - m1;
          o[16 + 4 * s + k] = d1 * static_cast<float>((byte >> 4) | (((top >> (4 + s)) & 1) << 4)) - m1;
        }
    }
  }
}

// As the file's own dequantization: (d sc) (code - 32).
void dequantize_q6_kx8_row(const PackedWeights& w, int64_t r, float* out) {
  const uint8_t* group = w.data() + (r / kX8Rows) * w.group_bytes();
  const int lane = static_cast<int>(r % kX8Rows);
  for (int64_t sb = 0; sb < w.cols() / 256; ++sb) {
    const uint8_t* p = group + sb * kQ6_Kx8SuperBytes;
    uint16_t h;
    std::memcpy(&h, p + 2 * lane, 2);
    const float d = f16_to_f32(h);
    for (int j = 0; j < 8; ++j) {
      const uint8_t* blk = p + kQ6_Kx8BlockOffset + kQ6_Kx8BlockBytes * j;
      float* o = out + sb * 256 + 32 * j;
      for (int s = 0; s < 4; ++s)
        for (int k = 0; k < 4; ++k) {
          const uint8_t byte = blk[32 * s + 4 * lane + k];
          const uint8_t hb = blk[128 + 32 * (s / 2) + 4 * lane + k];
          const int top = s % 2 == 0 ? hb >> 4 : hb & 0xF;
          const int a = (byte & 0xF) | ((top & 3) << 4), b = (byte >> 4) | ((top >> 2) << 4);
          const auto sc_a = static_cast<int8_t>(p[kQ6_Kx8ScOffset + 8 * (2 * j) + lane]);
          const auto sc_b = static_cast<int8_t>(p[kQ6_Kx8ScOffset + 8 * (2 * j + 1) + lane]);
          o[4 * s + k] = d * static_cast<float>(sc_a) * static_cast<float>(a - 32);
          o[16 + 4 * s + k] = d * static_cast<float>(sc_b) * static_cast<float>(b - 32);
        }
    }
  }
}

}  // namespace

void dequantize_x8_row(const PackedWeights& w, int64_t r, float* out) {
  SPLASH_CHECK(w.is_x8() && r >= 0 && r < w.rows());
  if (w.format() == WeightFormat::kF16x16 || w.format() == WeightFormat::kBF16x16) {
    const uint8_t* p = w.data() + (r / kF16x16Rows) * w.group_bytes() + 2 * (r % kF16x16Rows);
    for (int64_t c = 0; c < w.cols(); ++c) {
      uint16_t h;
      std::memcpy(&h, p + c * 2 * kF16x16Rows, 2);
      out[c] = w.format() == WeightFormat::kF16x16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
    return;
  }
  if (w.format() == WeightFormat::kMlx4x8 || w.format() == WeightFormat::kMlx8x8) {
    dequantize_mlx_x8_row(w, r, out);
    return;
  }
  if (w.format() == WeightFormat::kQ4_Kx8 || w.format() == WeightFormat::kQ5_Kx8) {
    dequantize_q45_kx8_row(w, r, out);
    return;
  }
  if (w.format() == WeightFormat::kQ6_Kx8) {
    dequantize_q6_kx8_row(w, r, out);
    return;
  }
  const bool q4 = w.format() == WeightFormat::kQ4_0x8;
  const int64_t nb = w.cols() / 32;
  const int64_t block_bytes = x8_block_bytes(w.format());
  const uint8_t* group = w.data() + (r / kX8Rows) * w.group_bytes();
  const int lane = static_cast<int>(r % kX8Rows);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = group + b * block_bytes;
    uint16_t h;
    std::memcpy(&h, blk + 2 * lane, 2);
    const float d = f16_to_f32(h);
    float* o = out + b * 32;
    if (q4) {
      for (int s = 0; s < 4; ++s)
        for (int j = 0; j < 4; ++j) {
          const uint8_t byte = blk[16 + s * 32 + 4 * lane + j];
          o[4 * s + j] = d * static_cast<float>((byte & 0xF) - 8);
          o[16 + 4 * s + j] = d * static_cast<float>((byte >> 4) - 8);
        }
    } else {
      for (int s = 0; s < 8; ++s)
        for (int j = 0; j < 4; ++j)
          o[4 * s + j] = d * static_cast<float>(static_cast<int8_t>(blk[16 + s * 32 + 4 * lane + j]));
    }
  }
}

}  // namespace splash::cpu
