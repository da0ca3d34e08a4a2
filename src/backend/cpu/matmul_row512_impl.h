// Internal to backend/cpu: block sums in 512-bit registers for one-row decode of the Q4_0, Q8_0,
// MLX 4/8-bit and Q4_K / Q5_K / Q6_K x8 layouts (WideSums, a policy of their micro-kernels in
// matmul_gemm_impl.h), included only by matmul_avx512.cpp, after matmul_gemm_impl.h and before
// matmul_gemm512_impl.h (x16_tile takes them for one activation row and one stream per task),
// inside its anonymous namespace.
//
// The 256-bit decode kernel spends a broadcast of 4 activation bytes and a vpdpbusd on every 32-byte
// step of a group's block. Here one zmm holds two consecutive steps of the same group (64 contiguous
// bytes: the group stays one sequential stream, unlike the x16 pairs of two groups), and one vpermd
// per zmm puts the two steps' activation dwords in its halves: per Q4_0 block 2 loads, 4 masks, 4
// vpermd and 4 vpdpbusd instead of 4 loads, 8 masks, 8 broadcasts and 8 vpdpbusd. The halves fold
// in int32 and the micro-kernels' float steps stay as they are; integer sums are exact in any order,
// so the results are bit-identical to the 256-bit kernel's and to the batched (M > 1) kernels' rows,
// which speculative verification relies on (Matmul tests check them bit for bit).

// Lanes 0-7 dword i of a block's 32 activation bytes, lanes 8-15 dword j.
inline __m512i dword_pair_index(int i, int j) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(i)), _mm256_set1_epi32(j), 1);
}

// The 8 rows' int32 sums: the two halves of s16 (one per step of each pair) added.
inline __m256i fold_halves(__m512i s16) {
  return _mm256_add_epi32(_mm512_castsi512_si256(s16), _mm512_extracti64x4_epi64(s16, 1));
}

// 64 bytes at p as two 32-byte loads (load_pair): one 64-byte load at the blocks' offsets (16 bytes
// into a 144- or 272-byte block) splits across cache lines on most steps, and on a Zen 5 host read
// the 151,936 x 1024 output matrix from DRAM 10-25% slower than the 256-bit kernel; as two halves
// it reads as fast or faster (bench_matmul gemv/<type>/output, docs/PERFORMANCE.md).
inline __m512i load512(const uint8_t* p) { return load_pair(p, p + 32); }

// A block's 8 row sums of 4-bit codes (the 4 code steps at c, Q4_0x8 / MLX 4-bit x8) against its
// 32 activation bytes `x` (low half of a zmm), without any offset: those of nibble_block_sums<1>.
inline __m256i nibble_sums512(const uint8_t* c, __m512i x) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  // Step s's low nibbles are values 4s..4s+3 of the block (dword s), its high nibbles 16 + 4s.. (dword 4 + s).
  const __m512i v01 = load512(c), v23 = load512(c + 64);
  // The high nibbles masked in place are 16 x their value: summed apart, shifted once (exact).
  __m512i lo = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(v01, m4),
                                   _mm512_permutexvar_epi32(dword_pair_index(0, 1), x));
  __m512i hi = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_andnot_si512(m4, v01),
                                   _mm512_permutexvar_epi32(dword_pair_index(4, 5), x));
  lo = _mm512_dpbusd_epi32(lo, _mm512_and_si512(v23, m4), _mm512_permutexvar_epi32(dword_pair_index(2, 3), x));
  hi = _mm512_dpbusd_epi32(hi, _mm512_andnot_si512(m4, v23), _mm512_permutexvar_epi32(dword_pair_index(6, 7), x));
  return fold_halves(_mm512_add_epi32(lo, _mm512_srai_epi32(hi, 4)));
}

// The same for 8-bit codes (the 8 steps at c, Q8_0x8 / MLX 8-bit x8) as unsigned w + 128 against the
// signed activations, without the - 128 sum(x): those of signed_code_sums<1> less its start.
inline __m256i signed_sums512(const uint8_t* c, __m512i x) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  // Two chains of two steps each, so one block's sums do not wait on four vpdpbusd in a row.
  __m512i s0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_xor_si512(load512(c), flip),
                                   _mm512_permutexvar_epi32(dword_pair_index(0, 1), x));
  __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_xor_si512(load512(c + 64), flip),
                                   _mm512_permutexvar_epi32(dword_pair_index(2, 3), x));
  s0 = _mm512_dpbusd_epi32(s0, _mm512_xor_si512(load512(c + 128), flip), _mm512_permutexvar_epi32(dword_pair_index(4, 5), x));
  s1 = _mm512_dpbusd_epi32(s1, _mm512_xor_si512(load512(c + 192), flip), _mm512_permutexvar_epi32(dword_pair_index(6, 7), x));
  return fold_halves(_mm512_add_epi32(s0, s1));
}

// The same for Q5_Kx8 codes (the 4 nibble steps at c, the fifth bits at c + 128): those of
// five_bit_block_sums<1>. Step s takes bit s of the fifth-bit bytes to bit 4 of its low nibbles
// (a left shift by 4 - s) and bit 4 + s to bit 4 of its high ones (a right shift by s); each half
// of a zmm shifts for its own step.
inline __m256i five_bit_sums512(const uint8_t* c, __m512i x) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), b4 = _mm512_set1_epi8(0x10);
  const __m512i top =
      _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 128)));
  __m512i sum = _mm512_setzero_si512();
  for (int h = 0; h < 2; ++h) {
    const __m512i v = load512(c + 64 * h);
    const __m512i left = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(4 - 2 * h)),
                                            _mm256_set1_epi16(static_cast<int16_t>(3 - 2 * h)), 1);
    const __m512i right = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(2 * h)),
                                             _mm256_set1_epi16(static_cast<int16_t>(2 * h + 1)), 1);
    const __m512i lo = _mm512_or_si512(_mm512_and_si512(v, m4), _mm512_and_si512(_mm512_sllv_epi16(top, left), b4));
    const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4),
                                       _mm512_and_si512(_mm512_srlv_epi16(top, right), b4));
    sum = _mm512_dpbusd_epi32(sum, lo, _mm512_permutexvar_epi32(dword_pair_index(2 * h, 2 * h + 1), x));
    sum = _mm512_dpbusd_epi32(sum, hi, _mm512_permutexvar_epi32(dword_pair_index(4 + 2 * h, 5 + 2 * h), x));
  }
  return fold_halves(sum);
}

// The same for Q6_Kx8 codes (the 4 low-nibble steps at c, the 2 steps of top bits at c + 128): sa
// and sb of six_bit_block_sums<1>. Steps 2h and 2h + 1 share top-bit step h, which each half of a
// zmm shifts its own way.
inline void six_bit_sums512(const uint8_t* c, __m512i x, __m256i* sa, __m256i* sb) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  // Low half (step 2h): the top bits stay in bits 4-7 of a byte; high half (2h + 1): bits 0-3 go up.
  const __m512i up = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
  __m512i a = _mm512_setzero_si512(), bb = _mm512_setzero_si512();
  for (int h = 0; h < 2; ++h) {
    const __m512i v = load512(c + 64 * h);
    const __m512i tl = _mm512_sllv_epi16(
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 128 + 32 * h))), up);
    // Bits 4-5 of (tl >> 2) are those of top >> 2 (low half) and top << 2 (high half): the 16-bit
    // shifts differ only in bits 14-15, which the mask drops.
    const __m512i lo = _mm512_or_si512(_mm512_and_si512(v, m4), _mm512_and_si512(tl, m30));
    const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4),
                                       _mm512_and_si512(_mm512_srli_epi16(tl, 2), m30));
    a = _mm512_dpbusd_epi32(a, lo, _mm512_permutexvar_epi32(dword_pair_index(2 * h, 2 * h + 1), x));
    bb = _mm512_dpbusd_epi32(bb, hi, _mm512_permutexvar_epi32(dword_pair_index(4 + 2 * h, 5 + 2 * h), x));
  }
  *sa = fold_halves(a);
  *sb = fold_halves(bb);
}

// Activation block b of a row (32 bytes) in the low half of a zmm.
inline __m512i acts512(const int8_t* xq, int64_t b) {
  return _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + b * 32)));
}

// The block sums policy (NarrowSums, matmul_gemm_impl.h) of the Q4_0, Q8_0 and MLX x8 kernels for
// one activation row: the functions above; more rows keep the 256-bit ones.
struct WideSums {
  template <int M>
  static void nibble(const uint8_t* c, const int8_t* const* xq, int64_t b, const __m256i* init, __m256i* out) {
    if constexpr (M == 1) out[0] = _mm256_add_epi32(init[0], nibble_sums512(c, acts512(xq[0], b)));
    else NarrowSums::nibble<M>(c, xq, b, init, out);
  }
  template <int M>
  static void signed_codes(const uint8_t* c, const int8_t* const* xq, int64_t b, const int32_t* const* xs,
                           __m256i* out) {
    if constexpr (M == 1) out[0] = _mm256_add_epi32(signed_sums512(c, acts512(xq[0], b)), _mm256_set1_epi32(-128 * xs[0][b]));
    else NarrowSums::signed_codes<M>(c, xq, b, xs, out);
  }
  template <int M>
  static void five_bit(const uint8_t* c, const int8_t* const* xq, int64_t b, __m256i* out) {
    if constexpr (M == 1) out[0] = five_bit_sums512(c, acts512(xq[0], b));
    else NarrowSums::five_bit<M>(c, xq, b, out);
  }
  template <int M>
  static void six_bit(const uint8_t* c, const int8_t* const* xq, int64_t b, __m256i* sa, __m256i* sb) {
    if constexpr (M == 1) six_bit_sums512(c, acts512(xq[0], b), sa, sb);
    else NarrowSums::six_bit<M>(c, xq, b, sa, sb);
  }
};
