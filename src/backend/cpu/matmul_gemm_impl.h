// Internal to backend/cpu: the kernels of the interleaved x8 layouts (matmul_repack.h), written once
// and compiled twice, by matmul_avx2.cpp (vpmaddubsw + vpmaddwd) and matmul_avx512.cpp (vpdpbusd on
// 256-bit vectors). Include it inside an anonymous namespace after matmul_simd_impl.h, for the same
// reason as that file (two ISA-flagged copies the linker must never merge).
//
// One micro-kernel call computes 8 weight rows (one group) x M activation rows (M <= 4) over the
// whole row length: per block and per 4-byte step, one 32-byte load of codes (4 bytes of each of the
// 8 rows) meets a broadcast of 4 activation bytes, so one integer vector holds the 8 rows' partial
// sums; the block ends in a single FMA with the 8 row scales times the activation scale. The same
// call with M = n serves decode (GEMV): the group's bytes are one contiguous stream. Decode may also
// take S = 2 groups per call (one activation row), from two runs of a task's rows: two streams
// (walk_streams, PackedWeights::decode_streams).

// Software prefetch distance for the x8 streams (bytes ahead in a group's contiguous data), used by
// the 512-bit prefill kernels (matmul_gemm512_impl.h; matmul_float512_impl.h for tiles of several
// rows). These 256-bit kernels, which serve decode and tiles of fewer than 8 activation rows, take
// theirs from the matrix instead (`pf`, PackedWeights::stream_prefetch_bytes, 0 = none): each group
// is one sequential stream on huge pages, which AMD's hardware prefetchers follow to the end (there
// the prefetch instructions only cost issue slots and miss buffers: one thread's decode 10-25% faster
// without them) while Intel's stop at every 4 KiB boundary (there decode is 23% faster with them).
constexpr int64_t kX8PrefetchBytes = 1536;

// Prefetches the cache lines of [p, p + bytes) into L1 (a prefetch never faults, so the lines past
// the end of a matrix are harmless).
inline void prefetch_l1(const uint8_t* p, int64_t bytes) {
  for (int64_t o = 0; o < bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
}

inline __m256i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

#if SPLASH_SIMD_VNNI
// acc + the dot products of the unsigned bytes q with the 4 activation bytes at x, broadcast, for a
// tile of M activation rows. M >= 2 (batched decode, speculative verification, small prefill tiles):
// one vpdpbusd with an embedded broadcast ({1to8}) of x, which GCC 12 does not form on its own (it
// does for vpaddd and vmulps), so a step saved a separate vpbroadcastd: from L2 on a Zen 4 host
// Q4_0 tiles of 2-8 rows ran 7-19% faster, Q8_0 3-8%, Q5_K 8-15% (docs/PERFORMANCE.md, "Folded
// broadcasts"). M = 1 keeps the separate broadcast: one-row decode streams from DRAM, where the
// folded form measured slower (0.6B Q4_0 tg128 0.88x, 4 of 4 alternating pairs).
template <int M>
inline __m256i dpbusd_x4(__m256i acc, __m256i q, const int8_t* x) {
  if constexpr (M == 1) {
    return _mm256_dpbusd_epi32(acc, q, bcast4(x));
  } else {
    asm("vpdpbusd %[x]%{1to8%}, %[q], %[acc]"
        : [acc] "+v"(acc)
        : [q] "v"(q), [x] "m"(*reinterpret_cast<const int32_t*>(x)));
    return acc;
  }
}
// One 32-byte step of codes at p. For M >= 2 it is kept in a register: GCC otherwise folds the load
// into both instructions that take the step apart (vpand, vpandn) and reads it twice.
template <int M>
inline __m256i code_step(const uint8_t* p) {
  __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if constexpr (M > 1) asm("" : "+v"(v));
  return v;
}
#endif

// The int32 sums of one 32-value block of 4-bit codes (the 4 code steps of a Q4_0x8 block at `c`)
// against block b of M activation rows (`xq[m]`), each started from `init[m]`. VNNI sums in
// int32, so the high nibbles need no shift per step: masked in place they are 16 times their value,
// summed apart and shifted once per block (exact: that sum is a multiple of 16), two instructions per
// step instead of three. AVX2 keeps the sums in int16 (each vpmaddubsw lane at most 2 x 15 x 127 =
// 3810, and 8 of them stay below 32767) and widens them once per block with vpmaddwd.
template <int M>
inline void nibble_block_sums(const uint8_t* c, const int8_t* const* xq, int64_t b, const __m256i* init,
                              __m256i* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const int8_t* x[M];
  for (int m = 0; m < M; ++m) x[m] = xq[m] + b * 32;
#if SPLASH_SIMD_VNNI
  __m256i lo_sum[M], hi_sum[M];
  for (int m = 0; m < M; ++m) {
    lo_sum[m] = init[m];
    hi_sum[m] = _mm256_setzero_si256();
  }
  for (int s = 0; s < 4; ++s) {
    const __m256i v = code_step<M>(c + 32 * s);
    const __m256i lo = _mm256_and_si256(v, m4);
    const __m256i hi16 = _mm256_andnot_si256(m4, v);
    for (int m = 0; m < M; ++m) {
      lo_sum[m] = dpbusd_x4<M>(lo_sum[m], lo, x[m] + 4 * s);
      hi_sum[m] = dpbusd_x4<M>(hi_sum[m], hi16, x[m] + 16 + 4 * s);
    }
  }
  for (int m = 0; m < M; ++m) out[m] = _mm256_add_epi32(lo_sum[m], _mm256_srai_epi32(hi_sum[m], 4));
#else
  __m256i isum[M];
  for (int m = 0; m < M; ++m) isum[m] = _mm256_setzero_si256();
  for (int s = 0; s < 4; ++s) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 32 * s));
    const __m256i lo = _mm256_and_si256(v, m4);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    for (int m = 0; m < M; ++m)
      isum[m] = _mm256_add_epi16(isum[m], _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast4(x[m] + 4 * s)),
                                                           _mm256_maddubs_epi16(hi, bcast4(x[m] + 16 + 4 * s))));
  }
  for (int m = 0; m < M; ++m) out[m] = _mm256_add_epi32(init[m], _mm256_madd_epi16(isum[m], _mm256_set1_epi16(1)));
#endif
}

template <int M>
inline void signed_code_sums(const uint8_t* c, const int8_t* const* xq, int64_t b, const int32_t* const* xs,
                             __m256i* out);

// The integer sums of one 32-value block of Q5_Kx8 codes (the 4 nibble steps at c, the fifth bits
// at c + 128) against block b of M activation rows, for 8 rows, without any offset.
template <int M>
inline void five_bit_block_sums(const uint8_t* c, const int8_t* const* xq, int64_t b, __m256i* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
  const __m256i top = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 128));
  for (int m = 0; m < M; ++m) out[m] = _mm256_setzero_si256();
  for (int s = 0; s < 4; ++s) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 32 * s));
    // bit s -> bit 4 for the low nibble, bit 4 + s -> bit 4 for the high
    const __m256i lo = _mm256_or_si256(_mm256_and_si256(v, m4), _mm256_and_si256(_mm256_slli_epi16(top, 4 - s), b4));
    const __m256i hi =
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), _mm256_and_si256(_mm256_srli_epi16(top, s), b4));
    for (int m = 0; m < M; ++m) {
      const int8_t* xl = xq[m] + b * 32 + 4 * s;
      const int8_t* xh = xl + 16;
#if SPLASH_SIMD_VNNI
      out[m] = dpbusd_x4<M>(dpbusd_x4<M>(out[m], lo, xl), hi, xh);
#else
      // 5-bit codes: 2 x 31 x 127 x 2 per step fits int16, four steps would not
      const __m256i pair = _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast4(xl)), _mm256_maddubs_epi16(hi, bcast4(xh)));
      out[m] = _mm256_add_epi32(out[m], _mm256_madd_epi16(pair, _mm256_set1_epi16(1)));
#endif
    }
  }
}

// The integer sums of one 32-value block of Q6_Kx8 codes (the 4 low-nibble steps at c, then the 2
// steps of top bits at c + 128) against block b of M activation rows, for 8 rows: sa over the block's
// first 16 values (the low nibbles), sb over its last 16 (the high ones), without the - 32 offset.
template <int M>
inline void six_bit_block_sums(const uint8_t* c, const int8_t* const* xq, int64_t b, __m256i* sa, __m256i* sb) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m30 = _mm256_set1_epi8(0x30);
  for (int m = 0; m < M; ++m) sa[m] = sb[m] = _mm256_setzero_si256();
  for (int h = 0; h < 2; ++h) {
    const __m256i top = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 128 + 32 * h));
    for (int e = 0; e < 2; ++e) {
      const int s = 2 * h + e;
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 32 * s));
      // Top bits to bits 4-5: step 2h keeps them in bits 4-7 of the byte, step 2h + 1 in bits 0-3.
      const __m256i tl = e == 0 ? top : _mm256_slli_epi16(top, 4);
      const __m256i th = e == 0 ? _mm256_srli_epi16(top, 2) : _mm256_slli_epi16(top, 2);
      const __m256i lo = _mm256_or_si256(_mm256_and_si256(v, m4), _mm256_and_si256(tl, m30));
      const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), _mm256_and_si256(th, m30));
      for (int m = 0; m < M; ++m) {
        const int8_t* xl = xq[m] + b * 32 + 4 * s;
        const int8_t* xh = xl + 16;
#if SPLASH_SIMD_VNNI
        sa[m] = dpbusd_x4<M>(sa[m], lo, xl);
        sb[m] = dpbusd_x4<M>(sb[m], hi, xh);
#else
        // 63 x 127 x 2 per int16 pair: one step fits, two would not; widen every step.
        const __m256i one = _mm256_set1_epi16(1);
        sa[m] = _mm256_add_epi32(sa[m], _mm256_madd_epi16(_mm256_maddubs_epi16(lo, bcast4(xl)), one));
        sb[m] = _mm256_add_epi32(sb[m], _mm256_madd_epi16(_mm256_maddubs_epi16(hi, bcast4(xh)), one));
#endif
      }
    }
  }
}

// The block sums the Q4_0, Q8_0, MLX and K-quant x8 kernels take as a policy (`Sums`): these 256-bit
// ones by default; the AVX-512 build passes 512-bit ones for one-row decode (WideSums,
// matmul_row512_impl.h). nibble: 4-bit codes from `init` (Q4_0, MLX 4-bit, Q4_K); signed_codes:
// 8-bit codes, - 128 sum(x) included; five_bit: Q5_K; six_bit: Q6_K's two half-block sums.
struct NarrowSums {
  template <int M>
  static void nibble(const uint8_t* c, const int8_t* const* xq, int64_t b, const __m256i* init, __m256i* out) {
    nibble_block_sums<M>(c, xq, b, init, out);
  }
  template <int M>
  static void signed_codes(const uint8_t* c, const int8_t* const* xq, int64_t b, const int32_t* const* xs,
                           __m256i* out) {
    signed_code_sums<M>(c, xq, b, xs, out);
  }
  template <int M>
  static void five_bit(const uint8_t* c, const int8_t* const* xq, int64_t b, __m256i* out) {
    five_bit_block_sums<M>(c, xq, b, out);
  }
  template <int M>
  static void six_bit(const uint8_t* c, const int8_t* const* xq, int64_t b, __m256i* sa, __m256i* sb) {
    six_bit_block_sums<M>(c, xq, b, sa, sb);
  }
};

// Q4_0x8, S groups of 8 rows (`gp[k]`) x M activation rows; out[k * M + m].
template <int M, int S, class Sums = NarrowSums>
void q4_0x8_micro(const uint8_t* const* gp, int64_t nb, const splash::cpu::QuantizedActs& qx, int64_t i0,
                  __m256* out, int64_t pf) {
  const int8_t* xq[M];
  const float* xd[M];
  const int32_t* xs[M];
  __m256 acc[S * M];
  for (int m = 0; m < M; ++m) {
    xq[m] = qx.q_row(i0 + m);
    xd[m] = qx.d_row(i0 + m);
    xs[m] = qx.qsum_row(i0 + m);
  }
  for (int k = 0; k < S * M; ++k) acc[k] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    for (int k = 0; k < S; ++k) {
      const uint8_t* p = gp[k] + b * splash::cpu::kQ4_0x8BlockBytes;
      if (pf) prefetch_l1(p + pf, splash::cpu::kQ4_0x8BlockBytes);
      // (q - 8) x = q x - 8 sum(x): the offset folds into the integer sum exactly.
      __m256i i32[M];
      for (int m = 0; m < M; ++m) i32[m] = _mm256_set1_epi32(-8 * xs[m][b]);
      Sums::template nibble<M>(p + 16, xq, b, i32, i32);
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      for (int m = 0; m < M; ++m)
        acc[k * M + m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i32[m]), _mm256_mul_ps(d, _mm256_set1_ps(xd[m][b])),
                                         acc[k * M + m]);
    }
  }
  for (int k = 0; k < S * M; ++k) out[k] = acc[k];
}

// The int32 sums of one 32-value block of signed 8-bit codes (the 8 code steps of a Q8_0x8 block at
// `c`) against block b of M activation rows, for 8 rows. With VNNI the codes go in as unsigned w + 128
// (the top bit flipped) against the signed activations, one vpdpbusd per step and row, and - 128
// sum(x) (xs: the activation blocks' code sums) starts the sum: exact. AVX2 uses the sign trick
// |w| x (x sign(w)) (|-128| read as u8 128); a vpmaddubsw pair sum then reaches 2 x 128 x 127 =
// 32512, which fits int16 once but not twice, so every step widens to int32.
template <int M>
inline void signed_code_sums(const uint8_t* c, const int8_t* const* xq, int64_t b, const int32_t* const* xs,
                             __m256i* out) {
#if SPLASH_SIMD_VNNI
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int m = 0; m < M; ++m) out[m] = _mm256_set1_epi32(-128 * xs[m][b]);
  for (int s = 0; s < 8; ++s) {
    const __m256i u = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 32 * s)), flip);
    for (int m = 0; m < M; ++m) out[m] = dpbusd_x4<M>(out[m], u, xq[m] + b * 32 + 4 * s);
  }
#else
  (void)xs;  // the sign trick needs no offset
  for (int m = 0; m < M; ++m) out[m] = _mm256_setzero_si256();
  for (int s = 0; s < 8; ++s) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 32 * s));
    const __m256i av = _mm256_sign_epi8(v, v);
    for (int m = 0; m < M; ++m) {
      const __m256i sx = _mm256_sign_epi8(bcast4(xq[m] + b * 32 + 4 * s), v);
      out[m] = _mm256_add_epi32(out[m], _mm256_madd_epi16(_mm256_maddubs_epi16(av, sx), _mm256_set1_epi16(1)));
    }
  }
#endif
}

// Q8_0x8, S groups of 8 rows x M activation rows (signed_code_sums per block).
template <int M, int S, class Sums = NarrowSums>
void q8_0x8_micro(const uint8_t* const* gp, int64_t nb, const splash::cpu::QuantizedActs& qx, int64_t i0,
                  __m256* out, int64_t pf) {
  const int8_t* xq[M];
  const float* xd[M];
  const int32_t* xs[M];
  __m256 acc[S * M];
  for (int m = 0; m < M; ++m) {
    xq[m] = qx.q_row(i0 + m);
    xd[m] = qx.d_row(i0 + m);
    xs[m] = qx.qsum_row(i0 + m);
  }
  for (int k = 0; k < S * M; ++k) acc[k] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    for (int k = 0; k < S; ++k) {
      const uint8_t* p = gp[k] + b * splash::cpu::kQ8_0x8BlockBytes;
      if (pf) prefetch_l1(p + pf, splash::cpu::kQ8_0x8BlockBytes);
      __m256i isum[M];
      Sums::template signed_codes<M>(p + 16, xq, b, xs, isum);
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      for (int m = 0; m < M; ++m)
        acc[k * M + m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[m]), _mm256_mul_ps(d, _mm256_set1_ps(xd[m][b])),
                                         acc[k * M + m]);
    }
  }
  for (int k = 0; k < S * M; ++k) out[k] = acc[k];
}

// Q4_Kx8, 8 rows x M activation rows. Per sub-block of 32 values the integer sums are those of the
// Q4_0x8 kernel without the -8; they meet the 8 rows' 6-bit scales (bytes widened to floats, shared
// by the M activation rows) and the activation block's scale in one FMA, and the mins meet the
// activation's d * sum(codes) in another; d and dmin multiply once per super-block.
// kFive: Q5_Kx8, the same with each block's fifth bits ORed in as bit 4 of the codes.
template <int M, bool kFive, int S, class Sums = NarrowSums>
void q45_kx8_micro(const uint8_t* const* gp, int64_t nb, const splash::cpu::QuantizedActs& qx, int64_t i0,
                   __m256* out, int64_t pf) {
  constexpr int64_t kSuper = kFive ? splash::cpu::kQ5_Kx8SuperBytes : splash::cpu::kQ4_Kx8SuperBytes;
  constexpr int64_t kCodes = kFive ? splash::cpu::kQ5_Kx8CodeBytes : splash::cpu::kQ4_Kx8CodeBytes;
  const int8_t* xq[M];
  const float* xd[M];
  const float* xs[M];
  __m256 acc[S * M];
  for (int m = 0; m < M; ++m) {
    xq[m] = qx.q_row(i0 + m);
    xd[m] = qx.d_row(i0 + m);
    xs[m] = qx.dsum_row(i0 + m);
  }
  for (int k = 0; k < S * M; ++k) acc[k] = _mm256_setzero_ps();
  for (int64_t b0 = 0; b0 < nb; b0 += 8) {
    for (int k = 0; k < S; ++k) {
      const uint8_t* p = gp[k] + b0 / 8 * kSuper;
      __m256 ssum[M], msum[M];
      for (int m = 0; m < M; ++m) {
        ssum[m] = _mm256_setzero_ps();
        msum[m] = _mm256_setzero_ps();
      }
      for (int j = 0; j < 8; ++j) {
        const int64_t b = b0 + j;
        const uint8_t* c = p + splash::cpu::kQ4_Kx8CodeOffset + kCodes * j;
        if (pf) prefetch_l1(p + pf + kSuper * j / 8, kSuper / 8);  // the super-block ahead, an eighth per block
        __m256i isum[M];
        if constexpr (kFive) {
          Sums::template five_bit<M>(c, xq, b, isum);
        } else {
          __m256i zero[M];
          for (int m = 0; m < M; ++m) zero[m] = _mm256_setzero_si256();
          Sums::template nibble<M>(c, xq, b, zero, isum);
        }
        const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + splash::cpu::kQ4_Kx8ScOffset + 8 * j))));
        const __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + splash::cpu::kQ4_Kx8MinOffset + 8 * j))));
        for (int m = 0; m < M; ++m) {
          ssum[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[m]), _mm256_mul_ps(sc, _mm256_set1_ps(xd[m][b])), ssum[m]);
          msum[m] = _mm256_fmadd_ps(mn, _mm256_set1_ps(xs[m][b]), msum[m]);
        }
      }
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)));
      for (int m = 0; m < M; ++m)
        acc[k * M + m] = _mm256_fnmadd_ps(msum[m], dmin, _mm256_fmadd_ps(ssum[m], d, acc[k * M + m]));
    }
  }
  for (int k = 0; k < S * M; ++k) out[k] = acc[k];
}

// Q6_Kx8, 8 rows x M activation rows. Per block of 32 values, the low nibbles (the first 16 values)
// and the high nibbles (the last 16) take their top 2 bits and go to separate integer sums, one per
// 16-value scale; code - 32 folds in as 32 x the activation codes' sum of those 16 values
// (QuantizedActs::qsum16), the scales multiply in int32 (|sum| < 2^17, |scale| <= 128: exact), and
// the block ends in one FMA with the activation scale; d multiplies once per super-block.
template <int M, int S, class Sums = NarrowSums>
void q6_kx8_micro(const uint8_t* const* gp, int64_t nb, const splash::cpu::QuantizedActs& qx, int64_t i0,
                  __m256* out, int64_t pf) {
  using splash::cpu::kQ6_Kx8BlockBytes;
  using splash::cpu::kQ6_Kx8SuperBytes;
  const int8_t* xq[M];
  const float* xd[M];
  const int32_t* xs[M];
  const int32_t* xs16[M];
  __m256 acc[S * M];
  for (int m = 0; m < M; ++m) {
    xq[m] = qx.q_row(i0 + m);
    xd[m] = qx.d_row(i0 + m);
    xs[m] = qx.qsum_row(i0 + m);
    xs16[m] = qx.qsum16_row(i0 + m);
  }
  for (int k = 0; k < S * M; ++k) acc[k] = _mm256_setzero_ps();
  for (int64_t b0 = 0; b0 < nb; b0 += 8) {
    for (int k = 0; k < S; ++k) {
      const uint8_t* p = gp[k] + b0 / 8 * kQ6_Kx8SuperBytes;
      __m256 ssum[M];
      for (int m = 0; m < M; ++m) ssum[m] = _mm256_setzero_ps();
      for (int j = 0; j < 8; ++j) {
        const int64_t b = b0 + j;
        const uint8_t* c = p + splash::cpu::kQ6_Kx8BlockOffset + kQ6_Kx8BlockBytes * j;
        if (pf) prefetch_l1(p + pf + kQ6_Kx8SuperBytes * j / 8, kQ6_Kx8SuperBytes / 8);
        __m256i sa[M], sb[M];
        Sums::template six_bit<M>(c, xq, b, sa, sb);
        const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + splash::cpu::kQ6_Kx8ScOffset + 16 * j));
        const __m256i sc_a = _mm256_cvtepi8_epi32(sc);
        const __m256i sc_b = _mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8));
        for (int m = 0; m < M; ++m) {
          const int32_t x16 = xs16[m][b];
          const __m256i a = _mm256_sub_epi32(sa[m], _mm256_set1_epi32(32 * x16));
          const __m256i bb = _mm256_sub_epi32(sb[m], _mm256_set1_epi32(32 * (xs[m][b] - x16)));
          const __m256i t = _mm256_add_epi32(_mm256_mullo_epi32(a, sc_a), _mm256_mullo_epi32(bb, sc_b));
          ssum[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t), _mm256_set1_ps(xd[m][b]), ssum[m]);
        }
      }
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      for (int m = 0; m < M; ++m) acc[k * M + m] = _mm256_fmadd_ps(ssum[m], d, acc[k * M + m]);
    }
  }
  for (int k = 0; k < S * M; ++k) out[k] = acc[k];
}

// y[i0 + m, row0 .. row0 + 8) = v[m], cut to the matrix's real rows in the last group.
template <int M>
void store_x8(const __m256* v, float* y, int64_t ld, int64_t i0, int64_t row0, int64_t rows) {
  const int64_t valid = rows - row0;
  for (int m = 0; m < M; ++m) {
    float* dst = y + (i0 + m) * ld + row0;
    if (valid >= 8) {
      _mm256_storeu_ps(dst, v[m]);
    } else {
      alignas(32) float t[8];
      _mm256_store_ps(t, v[m]);
      std::memcpy(dst, t, static_cast<size_t>(valid) * sizeof(float));
    }
  }
}

#include "backend/cpu/matmul_mlx_scales_impl.h"


// MLX 4-bit x8 (kMlx4x8), 8 rows x M activation rows. Per 32 values the integer sums are those of
// the Q4_0x8 kernel without the -8 (codes 0..15 are the values up to scale and bias); they are
// weighed by the activation block's scale in float, and per MLX group (`subs` blocks) the sum meets
// the 8 row scales in one FMA, the bias the activation's d * sum(codes) of the group in another.
// kEight: MLX 8-bit x8 (kMlx8x8), Q8_0x8's signed-code integer loop on code - 128, and the bias
// taken as bias + 128 x scale.
// kSubs: the blocks per MLX group when known at compile time (2: groups of 64, MLX's default), so the
// block loop unrolls (one-row MLX 4-bit decode from L2 +25% on a Zen 5 host); 0: run_subs.
template <int ST, bool kEight, int M, int S, class Sums = NarrowSums, int kSubs = 0>
void mlx_x8_micro(const uint8_t* const* gp, int64_t nb, int run_subs, const splash::cpu::QuantizedActs& qx, int64_t i0,
                  __m256* out, int64_t pf) {
  const int subs = kSubs > 0 ? kSubs : run_subs;
  constexpr int kSb = mlx_scale_bytes(ST);
  constexpr int64_t kCodes = kEight ? 256 : 128;  // code bytes per 32 values
  const int8_t* xq[M];
  const float* xd[M];
  const float* xs[M];
  const int32_t* xi[M];
  __m256 acc[S * M];
  for (int m = 0; m < M; ++m) {
    xq[m] = qx.q_row(i0 + m);
    xd[m] = qx.d_row(i0 + m);
    xs[m] = qx.dsum_row(i0 + m);
    xi[m] = qx.qsum_row(i0 + m);
  }
  for (int k = 0; k < S * M; ++k) acc[k] = _mm256_setzero_ps();
  const int64_t gb = kEight ? splash::cpu::mlx8x8_group_bytes(32 * subs, kSb)
                           : splash::cpu::mlx4x8_group_bytes(32 * subs, kSb);
  const int64_t slice = (gb + subs - 1) / subs;  // prefetched per block (no division in the loop)
  __m256i zero[M];
  for (int m = 0; m < M; ++m) zero[m] = _mm256_setzero_si256();
  for (int64_t b0 = 0, group = 0; b0 < nb; b0 += subs, ++group) {  // no division per group: subs is a run-time value
    for (int k = 0; k < S; ++k) {
      const uint8_t* p = gp[k] + group * gb;
      __m256 gsum[M];
      float dsum[M];
      for (int m = 0; m < M; ++m) {
        gsum[m] = _mm256_setzero_ps();
        dsum[m] = 0.0f;
      }
      for (int k = 0; k < subs; ++k) {
        const int64_t b = b0 + k;
        const uint8_t* c = p + 16 * kSb + kCodes * k;
        if (pf) prefetch_l1(p + pf + slice * k, slice);  // the group ahead, a share per block
        __m256i isum[M];
        if constexpr (kEight) {
          Sums::template signed_codes<M>(c, xq, b, xi, isum);  // the stored code - 128, as Q8_0's codes
        } else {
          Sums::template nibble<M>(c, xq, b, zero, isum);
        }
        for (int m = 0; m < M; ++m) {
          gsum[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[m]), _mm256_set1_ps(xd[m][b]), gsum[m]);
          dsum[m] += xs[m][b];
        }
      }
      const __m256 scale = mlx_scales8<ST>(p);
      __m256 bias = mlx_scales8<ST>(p + 8 * kSb);
      if constexpr (kEight) bias = _mm256_fmadd_ps(scale, _mm256_set1_ps(128.0f), bias);
      for (int m = 0; m < M; ++m)
        acc[k * M + m] =
            _mm256_fmadd_ps(bias, _mm256_set1_ps(dsum[m]), _mm256_fmadd_ps(gsum[m], scale, acc[k * M + m]));
    }
  }
  for (int k = 0; k < S * M; ++k) out[k] = acc[k];
}

// The micro-kernels behind one interface: `w` gives what a layout needs beyond the group pointer.
template <class Sums>
struct MicroQ4_0x8With {
  template <int M, int S>
  static void run(const splash::PackedWeights&, const uint8_t* const* gp, int64_t nb,
                  const splash::cpu::QuantizedActs& qx, int64_t i0, __m256* out, int64_t pf) {
    q4_0x8_micro<M, S, Sums>(gp, nb, qx, i0, out, pf);
  }
};
using MicroQ4_0x8 = MicroQ4_0x8With<NarrowSums>;
template <class Sums>
struct MicroQ8_0x8With {
  template <int M, int S>
  static void run(const splash::PackedWeights&, const uint8_t* const* gp, int64_t nb,
                  const splash::cpu::QuantizedActs& qx, int64_t i0, __m256* out, int64_t pf) {
    q8_0x8_micro<M, S, Sums>(gp, nb, qx, i0, out, pf);
  }
};
using MicroQ8_0x8 = MicroQ8_0x8With<NarrowSums>;
template <class Sums>
struct MicroQ4_Kx8With {
  template <int M, int S>
  static void run(const splash::PackedWeights&, const uint8_t* const* gp, int64_t nb,
                  const splash::cpu::QuantizedActs& qx, int64_t i0, __m256* out, int64_t pf) {
    q45_kx8_micro<M, false, S, Sums>(gp, nb, qx, i0, out, pf);
  }
};
using MicroQ4_Kx8 = MicroQ4_Kx8With<NarrowSums>;
template <class Sums>
struct MicroQ5_Kx8With {
  template <int M, int S>
  static void run(const splash::PackedWeights&, const uint8_t* const* gp, int64_t nb,
                  const splash::cpu::QuantizedActs& qx, int64_t i0, __m256* out, int64_t pf) {
    q45_kx8_micro<M, true, S, Sums>(gp, nb, qx, i0, out, pf);
  }
};
using MicroQ5_Kx8 = MicroQ5_Kx8With<NarrowSums>;
template <class Sums>
struct MicroQ6_Kx8With {
  template <int M, int S>
  static void run(const splash::PackedWeights&, const uint8_t* const* gp, int64_t nb,
                  const splash::cpu::QuantizedActs& qx, int64_t i0, __m256* out, int64_t pf) {
    q6_kx8_micro<M, S, Sums>(gp, nb, qx, i0, out, pf);
  }
};
using MicroQ6_Kx8 = MicroQ6_Kx8With<NarrowSums>;
template <bool kEight, class Sums = NarrowSums>
struct MicroMlxX8 {
  template <int M, int S>
  static void run(const splash::PackedWeights& w, const uint8_t* const* gp, int64_t nb,
                  const splash::cpu::QuantizedActs& qx, int64_t i0, __m256* out, int64_t pf) {
    const int subs = w.group_size() / 32;
    auto go = [&]<int kSubs>() {
      switch (mlx_scale_kind(w.scale_dtype())) {
        case 1: mlx_x8_micro<1, kEight, M, S, Sums, kSubs>(gp, nb, subs, qx, i0, out, pf); break;
        case 2: mlx_x8_micro<2, kEight, M, S, Sums, kSubs>(gp, nb, subs, qx, i0, out, pf); break;
        default: mlx_x8_micro<0, kEight, M, S, Sums, kSubs>(gp, nb, subs, qx, i0, out, pf); break;
      }
    };
    if (subs == 2) go.template operator()<2>();  // groups of 64, MLX's default: unrolled
    else go.template operator()<0>();
  }
};
using MicroMlx4x8 = MicroMlxX8<false>;
using MicroMlx8x8 = MicroMlxX8<true>;

// One micro-kernel call: S groups (`gp[k]`, starting at weight rows row0[k]) x M activation rows from i.
template <class Micro, int M, int S>
void x8_step(const splash::PackedWeights& w, const uint8_t* const* gp, const int64_t* row0, int64_t nb,
             const splash::cpu::KernelArgs& a, int64_t i, int64_t pf) {
  __m256 v[S * M];
  Micro::template run<M, S>(w, gp, nb, *a.qx, i, v, pf);
  for (int k = 0; k < S; ++k) store_x8<M>(v + k * M, a.y, w.rows(), i, row0[k], w.rows());
}

// Decode (one activation row) with S streams: rows [r0, r1) (r0 on a group) cut into S runs of
// whole groups, walked together, one group of each per step, so S sequential streams are in flight
// (Intel's prefetchers pull more from two than from one: PackedWeights::decode_streams); a remainder
// group goes alone. step(count, gp, row0) takes `count` (std::integral_constant: S, or 1 for a
// remainder) groups at gp[k], weight rows from row0[k]. Shared by the x8 and 16-row float kernels.
template <int S, class Step>
void walk_streams(const splash::PackedWeights& w, int64_t r0, int64_t r1, Step&& step) {
  const int64_t gr = w.group_rows();
  const int64_t g0 = r0 / gr, g1 = (r1 + gr - 1) / gr, run = (g1 - g0) / S;
  for (int64_t j = 0; j < run; ++j) {
    const uint8_t* gp[S];
    int64_t row0[S];
    for (int k = 0; k < S; ++k) {
      gp[k] = w.data() + (g0 + j + k * run) * w.group_bytes();
      row0[k] = (g0 + j + k * run) * gr;
    }
    step(std::integral_constant<int, S>{}, gp, row0);
  }
  for (int64_t g = g0 + S * run; g < g1; ++g) {
    const uint8_t* gp[1] = {w.data() + g * w.group_bytes()};
    const int64_t row0[1] = {g * gr};
    step(std::integral_constant<int, 1>{}, gp, row0);
  }
}

// Rows [r0, r1) (r0 a multiple of 8) x activation rows [i0, i1). Group outer, activation rows inner:
// the group's bytes (nb x 144 or 272) stay in L1 while the activation tile streams from L2.
template <class Micro>
void x8_tile(const splash::cpu::KernelArgs& a) {
  const splash::PackedWeights& w = *a.w;
  const int64_t nb = w.cols() / 32;
  if (a.i1 - a.i0 == 1 && a.streams == 2) {
    walk_streams<2>(w, a.r0, a.r1, [&](auto count, const uint8_t* const* gp, const int64_t* row0) {
      x8_step<Micro, 1, decltype(count)::value>(w, gp, row0, nb, a, a.i0, a.prefetch);
    });
    return;
  }
  for (int64_t g = a.r0 / 8; g * 8 < a.r1; ++g) {
    const uint8_t* gp[1] = {w.data() + g * w.group_bytes()};
    const int64_t row0[1] = {g * 8};
    int64_t i = a.i0;
    // Only the first pass over the group streams it from memory; the later ones find it in L1.
    auto pf = [&a](int64_t at) { return at == a.i0 ? a.prefetch : 0; };
    for (; i + 4 <= a.i1; i += 4) x8_step<Micro, 4, 1>(w, gp, row0, nb, a, i, pf(i));
    switch (a.i1 - i) {
      case 3: x8_step<Micro, 3, 1>(w, gp, row0, nb, a, i, pf(i)); break;
      case 2: x8_step<Micro, 2, 1>(w, gp, row0, nb, a, i, pf(i)); break;
      case 1: x8_step<Micro, 1, 1>(w, gp, row0, nb, a, i, pf(i)); break;
      default: break;
    }
  }
}

[[maybe_unused]] splash::cpu::TileKernel x8_kernel(splash::WeightFormat f) {
  if (f == splash::WeightFormat::kQ4_0x8) return x8_tile<MicroQ4_0x8>;
  if (f == splash::WeightFormat::kQ8_0x8) return x8_tile<MicroQ8_0x8>;
  if (f == splash::WeightFormat::kMlx4x8) return x8_tile<MicroMlx4x8>;
  if (f == splash::WeightFormat::kMlx8x8) return x8_tile<MicroMlx8x8>;
  if (f == splash::WeightFormat::kQ4_Kx8) return x8_tile<MicroQ4_Kx8>;
  if (f == splash::WeightFormat::kQ5_Kx8) return x8_tile<MicroQ5_Kx8>;
  if (f == splash::WeightFormat::kQ6_Kx8) return x8_tile<MicroQ6_Kx8>;
  return nullptr;
}
