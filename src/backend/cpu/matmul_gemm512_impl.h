// Internal to backend/cpu: 512-bit versions of the x8 micro-kernels (matmul_gemm_impl.h) for
// AVX-512 VNNI, included only by matmul_avx512.cpp, after matmul_gemm_impl.h and matmul_pair512_impl.h, inside its
// anonymous namespace.
//
// The layout stays the x8 one (matmul_repack.h). A call takes two neighbouring groups at once
// (16 weight rows): per block and step, the lower half of a zmm register is group g's 32-byte step
// and the upper half group g + 1's, so one broadcast of 4 activation bytes meets the same values of
// 16 rows and one vpdpbusd does the work of two 256-bit ones. The scales of both groups become one
// vector of 16 floats, and the result is 16 consecutive floats of the output row.

// Fewer activation rows than this per tile take the 256-bit kernel (see x16_tile).
constexpr int64_t kX16MinActRows = 8;

// acc + the dot products of the unsigned bytes q with the 4 activation bytes at x, broadcast to all
// 16 lanes: vpdpbusd with an embedded broadcast ({1to16}), which GCC 12 does not form from
// _mm512_set1_epi32 (see dpbusd_x4 in matmul_gemm_impl.h). In one binary with and without it, the
// prefill tiles (64 activation rows) ran 1-4% faster for Q4_0, Q8_0, Q4_K and the same for Q6_K.
inline __m512i dpbusd_bcast512(__m512i acc, __m512i q, const int8_t* x) {
  asm("vpdpbusd %[x]%{1to16%}, %[q], %[acc]"
      : [acc] "+v"(acc)
      : [q] "v"(q), [x] "m"(*reinterpret_cast<const int32_t*>(x)));
  return acc;
}

// Signed bytes w as unsigned w + 128 (flipping the top bit), so vpdpbusd takes 8-bit codes as its
// unsigned operand and the signed activations as the other: one instruction per step and activation
// row instead of the sign trick's three (|w|, the activations' signs moved, the product).
inline __m512i flip_sign(__m512i v) { return _mm512_xor_si512(v, _mm512_set1_epi8(static_cast<char>(0x80))); }

// Q4_0x8, groups g (at p0) and g + 1 (at p1) x M activation rows. vpdpbusd sums in int32, so a block
// needs no widening; Q4_0's -8 folds in as 8 x sum(x) per block, as in the 256-bit kernel.
template <int M>
void q4_0x16_micro(const uint8_t* p0, const uint8_t* p1, int64_t nb, const splash::cpu::QuantizedActs& qx,
                   int64_t i0, __m512* out) {
  const int8_t* xq[M];
  const float* xd[M];
  const int32_t* xs[M];
  __m512 acc[M];
  for (int m = 0; m < M; ++m) {
    xq[m] = qx.q_row(i0 + m);
    xd[m] = qx.d_row(i0 + m);
    xs[m] = qx.qsum_row(i0 + m);
    acc[m] = _mm512_setzero_ps();
  }
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* a0 = p0 + b * splash::cpu::kQ4_0x8BlockBytes;
    const uint8_t* a1 = p1 + b * splash::cpu::kQ4_0x8BlockBytes;
    _mm_prefetch(reinterpret_cast<const char*>(a0 + kX8PrefetchBytes), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(a0 + kX8PrefetchBytes + 64), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(a1 + kX8PrefetchBytes), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(a1 + kX8PrefetchBytes + 64), _MM_HINT_T0);
    __m512i isum[M];
    for (int m = 0; m < M; ++m) isum[m] = _mm512_setzero_si512();
    for (int s = 0; s < 4; ++s) {
      const __m512i v = load_pair(a0 + 16 + 32 * s, a1 + 16 + 32 * s);
      const __m512i lo = _mm512_and_si512(v, m4);
      const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
      for (int m = 0; m < M; ++m) {
        isum[m] = dpbusd_bcast512(isum[m], lo, xq[m] + b * 32 + 4 * s);
        isum[m] = dpbusd_bcast512(isum[m], hi, xq[m] + b * 32 + 16 + 4 * s);
      }
    }
    const __m512 d = scales_pair(a0, a1);
    for (int m = 0; m < M; ++m) {
      const __m512i i32 = _mm512_sub_epi32(isum[m], _mm512_set1_epi32(8 * xs[m][b]));
      acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i32), _mm512_mul_ps(d, _mm512_set1_ps(xd[m][b])), acc[m]);
    }
  }
  for (int m = 0; m < M; ++m) out[m] = acc[m];
}

// Q8_0x8, two groups x M activation rows. AVX-512 has no vpsignb: |w| is vpabsb (-128 read as u8
// 128) and x takes w's sign through a masked negation (mask = w's sign bits), so |w| x (x sign(w))
// = w x exactly, as in the 256-bit kernel.
template <int M>
void q8_0x16_micro(const uint8_t* p0, const uint8_t* p1, int64_t nb, const splash::cpu::QuantizedActs& qx,
                   int64_t i0, __m512* out) {
  const int8_t* xq[M];
  const float* xd[M];
  const int32_t* xs[M];
  __m512 acc[M];
  for (int m = 0; m < M; ++m) {
    xq[m] = qx.q_row(i0 + m);
    xd[m] = qx.d_row(i0 + m);
    xs[m] = qx.qsum_row(i0 + m);
    acc[m] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* a0 = p0 + b * splash::cpu::kQ8_0x8BlockBytes;
    const uint8_t* a1 = p1 + b * splash::cpu::kQ8_0x8BlockBytes;
    for (int64_t off = 0; off < splash::cpu::kQ8_0x8BlockBytes; off += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(a0 + kX8PrefetchBytes + off), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(a1 + kX8PrefetchBytes + off), _MM_HINT_T0);
    }
    // (w + 128) x - 128 sum(x): the codes as unsigned bytes (flip_sign) meet the signed activations
    // directly, and the offset folds into the integer sum exactly, as Q4_0's -8.
    __m512i isum[M];
    for (int m = 0; m < M; ++m) isum[m] = _mm512_set1_epi32(-128 * xs[m][b]);
    for (int s = 0; s < 8; ++s) {
      const __m512i u = flip_sign(load_pair(a0 + 16 + 32 * s, a1 + 16 + 32 * s));
      for (int m = 0; m < M; ++m) isum[m] = dpbusd_bcast512(isum[m], u, xq[m] + b * 32 + 4 * s);
    }
    const __m512 d = scales_pair(a0, a1);
    for (int m = 0; m < M; ++m)
      acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[m]), _mm512_mul_ps(d, _mm512_set1_ps(xd[m][b])), acc[m]);
  }
  for (int m = 0; m < M; ++m) out[m] = acc[m];
}


// MLX 4-bit / 8-bit x8, two groups x M activation rows: the 256-bit mlx_x8_micro on 16 rows at a
// time (8-bit: q8_0x16_micro's signed-code loop). kSubs: as mlx_x8_micro's (groups of 64 unrolled).
template <int ST, bool kEight, int M, int kSubs = 0>
void mlx_x16_micro(const uint8_t* p0, const uint8_t* p1, int64_t nb, int run_subs,
                   const splash::cpu::QuantizedActs& qx, int64_t i0, __m512* out) {
  const int subs = kSubs > 0 ? kSubs : run_subs;
  constexpr int kSb = mlx_scale_bytes(ST);
  constexpr int64_t kCodes = kEight ? 256 : 128;
  const int8_t* xq[M];
  const float* xd[M];
  const float* xs[M];
  const int32_t* xi[M];
  __m512 acc[M];
  for (int m = 0; m < M; ++m) {
    xq[m] = qx.q_row(i0 + m);
    xd[m] = qx.d_row(i0 + m);
    xs[m] = qx.dsum_row(i0 + m);
    xi[m] = qx.qsum_row(i0 + m);
    acc[m] = _mm512_setzero_ps();
  }
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const int64_t gb = kEight ? splash::cpu::mlx8x8_group_bytes(32 * subs, kSb)
                           : splash::cpu::mlx4x8_group_bytes(32 * subs, kSb);
  const uint8_t* a0 = p0;  // group b0 / subs of both row groups
  const uint8_t* a1 = p1;
  for (int64_t b0 = 0; b0 < nb; b0 += subs, a0 += gb, a1 += gb) {
    for (int64_t off = 0; off < gb; off += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(a0 + kX8PrefetchBytes + off), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(a1 + kX8PrefetchBytes + off), _MM_HINT_T0);
    }
    __m512 gsum[M];
    float dsum[M];
    for (int m = 0; m < M; ++m) {
      gsum[m] = _mm512_setzero_ps();
      dsum[m] = 0.0f;
    }
    for (int k = 0; k < subs; ++k) {
      const int64_t b = b0 + k;
      __m512i isum[M];
      for (int m = 0; m < M; ++m) isum[m] = _mm512_setzero_si512();
      if constexpr (kEight) {
        // The stored code - 128 flipped back to the code, - 128 sum(x) in int32 (as q8_0x16_micro).
        for (int m = 0; m < M; ++m) isum[m] = _mm512_set1_epi32(-128 * xi[m][b]);
        for (int s = 0; s < 8; ++s) {
          const __m512i u =
              flip_sign(load_pair(a0 + 16 * kSb + kCodes * k + 32 * s, a1 + 16 * kSb + kCodes * k + 32 * s));
          for (int m = 0; m < M; ++m) isum[m] = dpbusd_bcast512(isum[m], u, xq[m] + b * 32 + 4 * s);
        }
      } else {
        for (int s = 0; s < 4; ++s) {
          const __m512i v = load_pair(a0 + 16 * kSb + kCodes * k + 32 * s, a1 + 16 * kSb + kCodes * k + 32 * s);
          const __m512i lo = _mm512_and_si512(v, m4);
          const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
          for (int m = 0; m < M; ++m) {
            isum[m] = dpbusd_bcast512(isum[m], lo, xq[m] + b * 32 + 4 * s);
            isum[m] = dpbusd_bcast512(isum[m], hi, xq[m] + b * 32 + 16 + 4 * s);
          }
        }
      }
      for (int m = 0; m < M; ++m) {
        gsum[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[m]), _mm512_set1_ps(xd[m][b]), gsum[m]);
        dsum[m] += xs[m][b];
      }
    }
    const __m512 scale = mlx_scales_pair<ST>(a0, a1);
    __m512 bias = mlx_scales_pair<ST>(a0 + 8 * kSb, a1 + 8 * kSb);
    if constexpr (kEight) bias = _mm512_fmadd_ps(scale, _mm512_set1_ps(128.0f), bias);
    for (int m = 0; m < M; ++m)
      acc[m] = _mm512_fmadd_ps(bias, _mm512_set1_ps(dsum[m]), _mm512_fmadd_ps(gsum[m], scale, acc[m]));
  }
  for (int m = 0; m < M; ++m) out[m] = acc[m];
}

// Q4_Kx8 / Q5_Kx8, two groups x M activation rows: q45_kx8_micro on 16 rows (the 8-byte scale and min rows of
// both groups widen to 16 floats).
inline __m512 bytes_pair_u8(const uint8_t* p0, const uint8_t* p1) {
  const __m128i v = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p0)),
                                       _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p1)));
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v));
}

template <int M, bool kFive>
void q45_kx16_micro(const uint8_t* p0, const uint8_t* p1, int64_t nb, const splash::cpu::QuantizedActs& qx,
                    int64_t i0, __m512* out) {
  constexpr int64_t kSuper = kFive ? splash::cpu::kQ5_Kx8SuperBytes : splash::cpu::kQ4_Kx8SuperBytes;
  constexpr int64_t kCodes = kFive ? splash::cpu::kQ5_Kx8CodeBytes : splash::cpu::kQ4_Kx8CodeBytes;
  const int8_t* xq[M];
  const float* xd[M];
  const float* xs[M];
  __m512 acc[M];
  for (int m = 0; m < M; ++m) {
    xq[m] = qx.q_row(i0 + m);
    xd[m] = qx.d_row(i0 + m);
    xs[m] = qx.dsum_row(i0 + m);
    acc[m] = _mm512_setzero_ps();
  }
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  for (int64_t b0 = 0; b0 < nb; b0 += 8) {
    const uint8_t* a0 = p0 + b0 / 8 * kSuper;
    const uint8_t* a1 = p1 + b0 / 8 * kSuper;
    __m512 ssum[M], msum[M];
    for (int m = 0; m < M; ++m) ssum[m] = msum[m] = _mm512_setzero_ps();
    for (int j = 0; j < 8; ++j) {
      const int64_t b = b0 + j;
      const uint8_t* c0 = a0 + splash::cpu::kQ4_Kx8CodeOffset + kCodes * j;
      const uint8_t* c1 = a1 + splash::cpu::kQ4_Kx8CodeOffset + kCodes * j;
      for (int64_t off = 0; off < kCodes; off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(c0 + kX8PrefetchBytes + off), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(c1 + kX8PrefetchBytes + off), _MM_HINT_T0);
      }
      __m512i top = _mm512_setzero_si512();
      if constexpr (kFive) top = load_pair(c0 + 128, c1 + 128);
      __m512i isum[M];
      for (int m = 0; m < M; ++m) isum[m] = _mm512_setzero_si512();
      for (int s = 0; s < 4; ++s) {
        const __m512i v = load_pair(c0 + 32 * s, c1 + 32 * s);
        __m512i lo = _mm512_and_si512(v, m4);
        __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        if constexpr (kFive) {
          const __m512i b4 = _mm512_set1_epi8(0x10);
          lo = _mm512_or_si512(lo, _mm512_and_si512(_mm512_slli_epi16(top, 4 - s), b4));
          hi = _mm512_or_si512(hi, _mm512_and_si512(_mm512_srli_epi16(top, s), b4));
        }
        for (int m = 0; m < M; ++m) {
          isum[m] = dpbusd_bcast512(isum[m], lo, xq[m] + b * 32 + 4 * s);
          isum[m] = dpbusd_bcast512(isum[m], hi, xq[m] + b * 32 + 16 + 4 * s);
        }
      }
      const __m512 sc = bytes_pair_u8(a0 + splash::cpu::kQ4_Kx8ScOffset + 8 * j, a1 + splash::cpu::kQ4_Kx8ScOffset + 8 * j);
      const __m512 mn = bytes_pair_u8(a0 + splash::cpu::kQ4_Kx8MinOffset + 8 * j, a1 + splash::cpu::kQ4_Kx8MinOffset + 8 * j);
      for (int m = 0; m < M; ++m) {
        ssum[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[m]), _mm512_mul_ps(sc, _mm512_set1_ps(xd[m][b])), ssum[m]);
        msum[m] = _mm512_fmadd_ps(mn, _mm512_set1_ps(xs[m][b]), msum[m]);
      }
    }
    const __m512 d = scales_pair(a0, a1);
    const __m512 dmin = scales_pair(a0 + 16, a1 + 16);
    for (int m = 0; m < M; ++m) acc[m] = _mm512_fnmadd_ps(msum[m], dmin, _mm512_fmadd_ps(ssum[m], d, acc[m]));
  }
  for (int m = 0; m < M; ++m) out[m] = acc[m];
}

// Q6_Kx8, two groups x M activation rows: q6_kx8_micro on 16 rows.
template <int M>
void q6_kx16_micro(const uint8_t* p0, const uint8_t* p1, int64_t nb, const splash::cpu::QuantizedActs& qx,
                   int64_t i0, __m512* out) {
  using splash::cpu::kQ6_Kx8BlockBytes;
  using splash::cpu::kQ6_Kx8SuperBytes;
  const int8_t* xq[M];
  const float* xd[M];
  const int32_t* xs[M];
  const int32_t* xs16[M];
  __m512 acc[M];
  for (int m = 0; m < M; ++m) {
    xq[m] = qx.q_row(i0 + m);
    xd[m] = qx.d_row(i0 + m);
    xs[m] = qx.qsum_row(i0 + m);
    xs16[m] = qx.qsum16_row(i0 + m);
    acc[m] = _mm512_setzero_ps();
  }
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i m30 = _mm512_set1_epi8(0x30);
  for (int64_t b0 = 0; b0 < nb; b0 += 8) {
    const uint8_t* a0 = p0 + b0 / 8 * kQ6_Kx8SuperBytes;
    const uint8_t* a1 = p1 + b0 / 8 * kQ6_Kx8SuperBytes;
    __m512 ssum[M];
    for (int m = 0; m < M; ++m) ssum[m] = _mm512_setzero_ps();
    for (int j = 0; j < 8; ++j) {
      const int64_t b = b0 + j;
      const uint8_t* c0 = a0 + splash::cpu::kQ6_Kx8BlockOffset + kQ6_Kx8BlockBytes * j;
      const uint8_t* c1 = a1 + splash::cpu::kQ6_Kx8BlockOffset + kQ6_Kx8BlockBytes * j;
      for (int64_t off = 0; off < kQ6_Kx8BlockBytes; off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(c0 + kX8PrefetchBytes + off), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(c1 + kX8PrefetchBytes + off), _MM_HINT_T0);
      }
      __m512i sa[M], sb[M];
      for (int m = 0; m < M; ++m) sa[m] = sb[m] = _mm512_setzero_si512();
      for (int h = 0; h < 2; ++h) {
        const __m512i top = load_pair(c0 + 128 + 32 * h, c1 + 128 + 32 * h);
        for (int e = 0; e < 2; ++e) {
          const int s = 2 * h + e;
          const __m512i v = load_pair(c0 + 32 * s, c1 + 32 * s);
          const __m512i tl = e == 0 ? top : _mm512_slli_epi16(top, 4);
          const __m512i th = e == 0 ? _mm512_srli_epi16(top, 2) : _mm512_slli_epi16(top, 2);
          const __m512i lo = _mm512_or_si512(_mm512_and_si512(v, m4), _mm512_and_si512(tl, m30));
          const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), _mm512_and_si512(th, m30));
          for (int m = 0; m < M; ++m) {
            sa[m] = dpbusd_bcast512(sa[m], lo, xq[m] + b * 32 + 4 * s);
            sb[m] = dpbusd_bcast512(sb[m], hi, xq[m] + b * 32 + 16 + 4 * s);
          }
        }
      }
      const __m128i s0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a0 + splash::cpu::kQ6_Kx8ScOffset + 16 * j));
      const __m128i s1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a1 + splash::cpu::kQ6_Kx8ScOffset + 16 * j));
      const __m512i sc_a = _mm512_cvtepi8_epi32(_mm_unpacklo_epi64(s0, s1));
      const __m512i sc_b = _mm512_cvtepi8_epi32(_mm_unpackhi_epi64(s0, s1));
      for (int m = 0; m < M; ++m) {
        const int32_t x16 = xs16[m][b];
        const __m512i a = _mm512_sub_epi32(sa[m], _mm512_set1_epi32(32 * x16));
        const __m512i bb = _mm512_sub_epi32(sb[m], _mm512_set1_epi32(32 * (xs[m][b] - x16)));
        const __m512i t = _mm512_add_epi32(_mm512_mullo_epi32(a, sc_a), _mm512_mullo_epi32(bb, sc_b));
        ssum[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_set1_ps(xd[m][b]), ssum[m]);
      }
    }
    const __m512 d = scales_pair(a0, a1);
    for (int m = 0; m < M; ++m) acc[m] = _mm512_fmadd_ps(ssum[m], d, acc[m]);
  }
  for (int m = 0; m < M; ++m) out[m] = acc[m];
}

struct MicroQ4_0x16 {
  using Single = MicroQ4_0x8;
  using Row = MicroQ4_0x8With<WideSums>;  // one-row decode (matmul_row512_impl.h)
  template <int M>
  static void run(const splash::PackedWeights&, const uint8_t* p0, const uint8_t* p1, int64_t nb,
                  const splash::cpu::QuantizedActs& qx, int64_t i0, __m512* out) {
    q4_0x16_micro<M>(p0, p1, nb, qx, i0, out);
  }
};
struct MicroQ8_0x16 {
  using Single = MicroQ8_0x8;
  using Row = MicroQ8_0x8With<WideSums>;
  template <int M>
  static void run(const splash::PackedWeights&, const uint8_t* p0, const uint8_t* p1, int64_t nb,
                  const splash::cpu::QuantizedActs& qx, int64_t i0, __m512* out) {
    q8_0x16_micro<M>(p0, p1, nb, qx, i0, out);
  }
};
struct MicroQ4_Kx16 {
  using Single = MicroQ4_Kx8;
  using Row = MicroQ4_Kx8With<WideSums>;  // one-row decode: the Q4_0 block sums (matmul_row512_impl.h)
  template <int M>
  static void run(const splash::PackedWeights&, const uint8_t* p0, const uint8_t* p1, int64_t nb,
                  const splash::cpu::QuantizedActs& qx, int64_t i0, __m512* out) {
    q45_kx16_micro<M, false>(p0, p1, nb, qx, i0, out);
  }
};
struct MicroQ5_Kx16 {
  using Single = MicroQ5_Kx8;
  using Row = MicroQ5_Kx8With<WideSums>;
  template <int M>
  static void run(const splash::PackedWeights&, const uint8_t* p0, const uint8_t* p1, int64_t nb,
                  const splash::cpu::QuantizedActs& qx, int64_t i0, __m512* out) {
    q45_kx16_micro<M, true>(p0, p1, nb, qx, i0, out);
  }
};
struct MicroQ6_Kx16 {
  // 8 activation rows per call: gemm512/Q6_K +10-25% (Q4_0 / Q8_0 within noise, MLX 4-bit -15-20%).
  static constexpr bool kEightRows = true;
  using Single = MicroQ6_Kx8;
  using Row = MicroQ6_Kx8With<WideSums>;
  template <int M>
  static void run(const splash::PackedWeights&, const uint8_t* p0, const uint8_t* p1, int64_t nb,
                  const splash::cpu::QuantizedActs& qx, int64_t i0, __m512* out) {
    q6_kx16_micro<M>(p0, p1, nb, qx, i0, out);
  }
};
template <bool kEight>
struct MicroMlxX16 {
  using Single = MicroMlxX8<kEight>;
  using Row = MicroMlxX8<kEight, WideSums>;  // one-row decode (matmul_row512_impl.h)
  template <int M>
  static void run(const splash::PackedWeights& w, const uint8_t* p0, const uint8_t* p1, int64_t nb,
                  const splash::cpu::QuantizedActs& qx, int64_t i0, __m512* out) {
    const int subs = w.group_size() / 32;
    auto go = [&]<int kSubs>() {
      switch (mlx_scale_kind(w.scale_dtype())) {
        case 1: mlx_x16_micro<1, kEight, M, kSubs>(p0, p1, nb, subs, qx, i0, out); break;
        case 2: mlx_x16_micro<2, kEight, M, kSubs>(p0, p1, nb, subs, qx, i0, out); break;
        default: mlx_x16_micro<0, kEight, M, kSubs>(p0, p1, nb, subs, qx, i0, out); break;
      }
    };
    if (subs == 2) go.template operator()<2>();  // groups of 64, MLX's default: unrolled
    else go.template operator()<0>();
  }
};

// y[i0 + m, row0 .. row0 + 16) = v[m], cut to the matrix's real rows (the pair may end in padding).
template <class Micro, int M>
void x16_step(const splash::PackedWeights& w, const uint8_t* p0, int64_t nb, const splash::cpu::KernelArgs& a,
              int64_t i, int64_t row0) {
  __m512 v[M];
  Micro::template run<M>(w, p0, p0 + w.group_bytes(), nb, *a.qx, i, v);
  const int64_t valid = std::min<int64_t>(16, w.rows() - row0);
  const __mmask16 keep = static_cast<__mmask16>((1u << valid) - 1u);
  for (int m = 0; m < M; ++m) _mm512_mask_storeu_ps(a.y + (i + m) * w.rows() + row0, keep, v[m]);
}

// Micro-kernels that declare `static constexpr bool kEightRows = true` also take 8 activation rows
// per call in prefill: the two groups' codes (Q6_K: 6-bit codes put together from two arrays) are
// unpacked once for twice the rows.
template <class Micro>
constexpr bool kTileRows8 = requires { requires Micro::kEightRows; };

// As x8_tile, two groups per micro-kernel call; an odd last group goes through the 256-bit kernel.
// Decode tiles (a few activation rows: the weights stream from memory) stay on the 256-bit kernel:
// its one sequential stream per task pulled ~45% more bandwidth than two interleaved ones on the
// 151,936 x 1024 output matrix (bench_matmul gemv/Q4_0/output 48 vs 34 GB/s, Q8_0 55 vs 36), while
// the pairs win 1.7x where the weights are reused across many activation rows (prefill). (On Intel
// the 256-bit kernel reads two streams per task all the same, but far apart: walk_streams.) One-row
// decode with one stream per task (AMD) of Q4_0, Q8_0, MLX 4/8-bit and the K-quants takes the block
// sums of matmul_row512_impl.h: two steps of one group per zmm, still one stream.
template <class Micro>
void x16_tile(const splash::cpu::KernelArgs& a) {
  if constexpr (requires { typename Micro::Row; }) {
    if (a.i1 - a.i0 == 1 && a.streams == 1) {  // one-row decode, one stream per task
      x8_tile<typename Micro::Row>(a);
      return;
    }
  }
  if (a.i1 - a.i0 <= kX16MinActRows) {
    x8_tile<typename Micro::Single>(a);
    return;
  }
  const splash::PackedWeights& w = *a.w;
  const int64_t nb = w.cols() / 32;
  int64_t g = a.r0 / 8;
  const int64_t g_end = (a.r1 + 7) / 8;
  for (; g + 2 <= g_end; g += 2) {
    const uint8_t* gp = w.data() + g * w.group_bytes();
    int64_t i = a.i0;
    if constexpr (kTileRows8<Micro>)
      for (; i + 8 <= a.i1; i += 8) x16_step<Micro, 8>(w, gp, nb, a, i, g * 8);
    for (; i + 4 <= a.i1; i += 4) x16_step<Micro, 4>(w, gp, nb, a, i, g * 8);
    switch (a.i1 - i) {
      case 3: x16_step<Micro, 3>(w, gp, nb, a, i, g * 8); break;
      case 2: x16_step<Micro, 2>(w, gp, nb, a, i, g * 8); break;
      case 1: x16_step<Micro, 1>(w, gp, nb, a, i, g * 8); break;
      default: break;
    }
  }
  if (g < g_end) {
    splash::cpu::KernelArgs rest = a;
    rest.r0 = g * 8;
    x8_tile<typename Micro::Single>(rest);
  }
}

splash::cpu::TileKernel x16_kernel(splash::WeightFormat f) {
  if (f == splash::WeightFormat::kQ4_0x8) return x16_tile<MicroQ4_0x16>;
  if (f == splash::WeightFormat::kQ8_0x8) return x16_tile<MicroQ8_0x16>;
  if (f == splash::WeightFormat::kMlx4x8) return x16_tile<MicroMlxX16<false>>;
  if (f == splash::WeightFormat::kMlx8x8) return x16_tile<MicroMlxX16<true>>;
  if (f == splash::WeightFormat::kQ4_Kx8) return x16_tile<MicroQ4_Kx16>;
  if (f == splash::WeightFormat::kQ5_Kx8) return x16_tile<MicroQ5_Kx16>;
  if (f == splash::WeightFormat::kQ6_Kx8) return x16_tile<MicroQ6_Kx16>;
  return nullptr;
}
