// GGML block layouts, byte for byte as llama.cpp writes them into GGUF files. Every field is
// little-endian; `d`/`dmin`/`m` are IEEE fp16 except Q8_K's f32 `d`. The structs are packed by
// construction (only uint8 arrays after a 2-byte field), and their sizes are checked below. Source
// pointers into a file may be unaligned: read blocks with memcpy or through uint8_t pointers, never
// by dereferencing a cast pointer.
// They live in core because two layers read them: formats/quant (dequantize, quantize) and
// backend/cpu (repacking and the scalar kernels); formats must not depend on a backend, and a backend
// reading a file format's header would tie every future backend to formats/.
#pragma once

#include <cstdint>


namespace splash::quant {

inline constexpr int kQK4_0 = 32, kQK4_1 = 32, kQK5_0 = 32, kQK5_1 = 32, kQK8_0 = 32;
inline constexpr int kQK_K = 256;
inline constexpr int kKScaleBytes = 12;  // 8 six-bit scales + 8 six-bit mins (Q4_K, Q5_K)

// x[j] = (q[j] - 8) * d; low nibbles of qs hold elements 0..15, high nibbles 16..31.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK4_0 / 2];
};
// x[j] = q[j] * d + m; nibbles as Q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK4_1 / 2];
};
// 5-bit q = nibble | (bit j of qh) << 4, x = (q - 16) * d; qh bit j belongs to element j (0..31).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK5_0 / 2];
};
// As Q5_0 without the -16, plus m.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK5_1 / 2];
};
// x[j] = qs[j] * d.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};
// 16 sub-blocks of 16; scales[i] = scale (low nibble) | min (high nibble); 2-bit quants.
// x = d * (scales[i] & 15) * q - dmin * (scales[i] >> 4).
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
// 16 sub-blocks of 16; 6-bit signed scales (minus 32) packed into 12 bytes; 2 low bits in qs, the
// third bit in hmask (set means +0, clear means -4). x = d * (scale - 32) * (q - (hbit ? 0 : 4)).
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};
// 8 sub-blocks of 32; 6-bit scale and min per sub-block packed in `scales`; 4-bit quants.
// x = d * scale * q - dmin * min.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK_K / 2];
};
// As Q4_K with a fifth bit per element in qh.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
// 16 sub-blocks of 16; int8 scales; 6-bit quants (4 low bits in ql, 2 high in qh), x = d * scale * (q - 32).
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
// Intermediate type for dot products: x = d * qs[j]; bsums[i] = sum of qs over group i of 16.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);

// Sub-block j (0..7) of the 12-byte Q4_K/Q5_K scale field: bytes 0..3 hold scales 0..3 (low 6 bits)
// and the top 2 bits of scales 4..7; bytes 4..7 the same for mins; bytes 8..11 the low 4 bits of
// scale (low nibble) and min (high nibble) of sub-blocks 4..7. `static`: the CPU kernels include this
// header from files built with AVX2 / AVX-512 flags, and an inline function with external linkage
// could have its ISA-flagged copy picked by the linker for the baseline code too.
static inline void k_scale_min(const uint8_t* scales, int j, int& sc, int& m) {
  if (j < 4) {
    sc = scales[j] & 63;
    m = scales[j + 4] & 63;
  } else {
    sc = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4);
    m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// Sub-block j (0..15) of the 12-byte Q3_K scale field, as the stored unsigned 6-bit value (subtract 32).
// Low 4 bits: bytes 0..7 (low nibbles for j < 8, high nibbles for j >= 8); high 2 bits: bytes 8..11.
static inline int q3k_scale(int j, const uint8_t* s) {
  int low = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
  int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return low | (high << 4);
}

}  // namespace splash::quant
