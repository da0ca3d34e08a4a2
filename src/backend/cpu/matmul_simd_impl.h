// Internal to backend/cpu: the 256-bit matmul kernels, written once and compiled twice, by
// matmul_avx2.cpp (AVX2: maddubs + madd) and by matmul_avx512.cpp (AVX-512 VL + VNNI: vpdpbusd on
// 256-bit vectors). Include it only inside an anonymous namespace: the two copies are built with
// different instruction sets and must never be merged by the linker.
//
// Every quantized format is read as 32-value blocks: codes q (u8 or s8, one ymm), a scale per int32
// lane of the dot product (lanes 0-3 cover values 0-15, lanes 4-7 values 16-31, so Q6_K's two
// 16-value scales fit), and an offset term multiplied by d * sum(x codes) of the activation block.
//
// Requires before inclusion: <immintrin.h>, matmul_kernels.h and SPLASH_SIMD_VNNI (0/1). It calls no
// inline function of a shared header (core/half.h etc.): the linker could pick this file's
// ISA-flagged copy of such a function for the baseline code as well.

// --- integer dot products of one 32-value block: 8 int32 lanes ------------------------------------

inline __m256i dot_u8s8(__m256i q, __m256i x) {
#if SPLASH_SIMD_VNNI
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, x);
#else
  // u8 codes here are < 64, so the int16 pair sums of maddubs cannot saturate.
  return _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), _mm256_set1_epi16(1));
#endif
}

inline __m256i dot_s8s8(__m256i q, __m256i x) {
  // Move q's sign onto x so the unsigned-by-signed instruction applies: |q| * (x * sign(q)).
  const __m256i aq = _mm256_sign_epi8(q, q);
  const __m256i sx = _mm256_sign_epi8(x, q);
  return dot_u8s8(aq, sx);
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i unpack_nibbles(const uint8_t* p) {  // 16 bytes -> 32 codes: low nibbles, then high
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i m = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}

inline float fp16(const uint8_t* p) {  // F16C: one instruction instead of the portable bit twiddling
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// Software prefetch distance along a weight row (bytes).
constexpr int64_t kPrefetchBytes = 1024;

// Block scale times activation scale, as a vector: a per-block float folds into one scalar multiply,
// a per-lane vector (Q6_K) needs the vector multiply.
inline __m256 scale_times(float s, float xd) { return _mm256_set1_ps(s * xd); }
inline __m256 scale_times(__m256 s, float xd) { return _mm256_mul_ps(s, _mm256_set1_ps(xd)); }

// --- block decoders: call f(b, q, scale, offset) for every 32-value block b of a row; scale is a
// float or, for per-16 scales, a __m256 of per-lane scales ------------------------------------------

struct DecQ8_0 {
  static constexpr bool kSigned = true;
  template <class F>
  static void run(const splash::PackedWeights&, const uint8_t* row, int64_t nb, F&& f) {
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* p = row + b * 34;
      _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes), _MM_HINT_T0);
      f(b, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2)), fp16(p), 0.0f);
    }
  }
};

struct DecQ4_0 {
  static constexpr bool kSigned = false;
  template <class F>
  static void run(const splash::PackedWeights&, const uint8_t* row, int64_t nb, F&& f) {
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* p = row + b * 18;
      // A few cache lines ahead of the hardware prefetcher: keeps more loads in flight per thread.
      _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes), _MM_HINT_T0);
      const float d = fp16(p);
      f(b, unpack_nibbles(p + 2), d, -8.0f * d);
    }
  }
};

template <bool kFiveBit>
struct DecQ45_K {
  static constexpr bool kSigned = false;
  template <class F>
  static void run(const splash::PackedWeights&, const uint8_t* row, int64_t nb, F&& f) {
    constexpr int64_t kBytes = kFiveBit ? 176 : 144;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t sb = 0; sb < nb / 8; ++sb) {
      const uint8_t* p = row + sb * kBytes;
      for (int64_t off = 0; off < kBytes; off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes + off), _MM_HINT_T0);
      const float d = fp16(p), dmin = fp16(p + 2);
      const uint8_t* qs = p + (kFiveBit ? 48 : 16);
      __m256i qh = _mm256_setzero_si256();
      if (kFiveBit) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16));
      for (int j = 0; j < 8; j += 2) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 16 * j));
        __m256i lo = _mm256_and_si256(v, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        if (kFiveBit) {
          const __m256i b0 = _mm256_set1_epi8(static_cast<char>(1 << j));
          const __m256i b1 = _mm256_set1_epi8(static_cast<char>(2 << j));
          const __m256i sixteen = _mm256_set1_epi8(16);
          lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b0), b0), sixteen));
          hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1), sixteen));
        }
        int sc, m;
        splash::cpu::k_scale_min(p + 4, j, sc, m);
        f(sb * 8 + j, lo, d * static_cast<float>(sc), -dmin * static_cast<float>(m));
        splash::cpu::k_scale_min(p + 4, j + 1, sc, m);
        f(sb * 8 + j + 1, hi, d * static_cast<float>(sc), -dmin * static_cast<float>(m));
      }
    }
  }
};

struct DecQ6_K {
  static constexpr bool kSigned = true;
  template <class F>
  static void run(const splash::PackedWeights&, const uint8_t* row, int64_t nb, F&& f) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i m3 = _mm256_set1_epi8(0x03);
    const __m256i off = _mm256_set1_epi8(32);
    for (int64_t sb = 0; sb < nb / 8; ++sb) {
      const uint8_t* p = row + sb * 210;
      for (int64_t off = 0; off < 210; off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes + off), _MM_HINT_T0);
      const float d = fp16(p + 208);
      const auto* scales = reinterpret_cast<const int8_t*>(p + 192);
      for (int half = 0; half < 2; ++half) {
        const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * half));
        const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * half + 32));
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 128 + 32 * half));
        const __m256i low[4] = {_mm256_and_si256(l0, m4), _mm256_and_si256(l1, m4),
                                _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4)};
        const int8_t* sc = scales + 8 * half;
        for (int t = 0; t < 4; ++t) {
          // srli_epi16 then a byte mask keeps bits 2t..2t+1 of every byte of qh.
          const __m256i h = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * t), m3);
          const __m256i q = _mm256_sub_epi8(_mm256_or_si256(low[t], _mm256_slli_epi16(h, 4)), off);
          const __m256 ls = _mm256_setr_m128(_mm_set1_ps(d * sc[2 * t]), _mm_set1_ps(d * sc[2 * t + 1]));
          f(sb * 8 + half * 4 + t, q, ls, 0.0f);
        }
      }
    }
  }
};

template <bool kEight>
struct DecMlx {
  static constexpr bool kSigned = kEight;
  template <class F>
  static void run(const splash::PackedWeights& w, const uint8_t* row, int64_t nb, F&& f) {
    const int subs = w.group_size() / 32;
    const int64_t groups = nb / subs;
    for (int64_t g = 0; g < groups; ++g) {
      const uint8_t* p = row + g * w.group_bytes();
      for (int64_t off = 0; off < w.group_bytes(); off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(p + kPrefetchBytes + off), _MM_HINT_T0);
      float scale, bias;
      std::memcpy(&scale, p, 4);
      std::memcpy(&bias, p + 4, 4);
      for (int k = 0; k < subs; ++k) {
        const __m256i q = kEight ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8 + 32 * k))
                                 : unpack_nibbles(p + 8 + 16 * k);
        f(g * subs + k, q, scale, bias);
      }
    }
  }
};

// --- quantized tile: one weight row against M activation rows ---------------------------------------

template <class Dec, int M>
void quant_row(const splash::PackedWeights& w, const splash::cpu::QuantizedActs& qx, int64_t r, int64_t i0,
               float* y) {
  const int64_t nb = qx.blocks();
  const int8_t* xq[M];
  const float* xd[M];
  const float* xs[M];
  for (int m = 0; m < M; ++m) {
    xq[m] = qx.q_row(i0 + m);
    xd[m] = qx.d_row(i0 + m);
    xs[m] = qx.dsum_row(i0 + m);
  }
  // Two accumulator sets, swapped after every block, so consecutive FMAs do not wait on each other.
  __m256 acc[M], acc2[M];
  float off[M];
  for (int m = 0; m < M; ++m) {
    acc[m] = _mm256_setzero_ps();
    acc2[m] = _mm256_setzero_ps();
    off[m] = 0.0f;
  }
  Dec::run(w, w.row(r), nb, [&](int64_t b, __m256i q, auto ls, float bias) {
    for (int m = 0; m < M; ++m) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq[m] + b * 32));
      const __m256i p = Dec::kSigned ? dot_s8s8(q, xv) : dot_u8s8(q, xv);
      acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), scale_times(ls, xd[m][b]), acc[m]);
      off[m] += bias * xs[m][b];
      std::swap(acc[m], acc2[m]);
    }
  });
  for (int m = 0; m < M; ++m) y[(i0 + m) * w.rows() + r] = hsum(_mm256_add_ps(acc[m], acc2[m])) + off[m];
}

template <class Dec>
void quant_tile(const splash::cpu::KernelArgs& a) {
  const splash::PackedWeights& w = *a.w;
  for (int64_t r = a.r0; r < a.r1; ++r) {
    int64_t i = a.i0;
    for (; i + 4 <= a.i1; i += 4) quant_row<Dec, 4>(w, *a.qx, r, i, a.y);
    switch (a.i1 - i) {
      case 3: quant_row<Dec, 3>(w, *a.qx, r, i, a.y); break;
      case 2: quant_row<Dec, 2>(w, *a.qx, r, i, a.y); break;
      case 1: quant_row<Dec, 1>(w, *a.qx, r, i, a.y); break;
      default: break;
    }
  }
}

// --- float tile ------------------------------------------------------------------------------------

struct LoadF32 {
  static __m256 load8(const uint8_t* row, int64_t c) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c);
  }
  static float load1(const uint8_t* row, int64_t c) {
    float v;
    std::memcpy(&v, row + 4 * c, 4);
    return v;
  }
};
struct LoadF16 {
  static __m256 load8(const uint8_t* row, int64_t c) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
  }
  static float load1(const uint8_t* row, int64_t c) { return fp16(row + 2 * c); }
};
struct LoadBF16 {
  static __m256 load8(const uint8_t* row, int64_t c) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
  static float load1(const uint8_t* row, int64_t c) {
    uint16_t h;
    std::memcpy(&h, row + 2 * c, 2);
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
};

template <class L, int M>
void float_row(const splash::PackedWeights& w, const float* x, int64_t r, int64_t i0, float* y) {
  const int64_t cols = w.cols();
  const uint8_t* row = w.row(r);
  __m256 acc[M], acc2[M];
  for (int m = 0; m < M; ++m) acc[m] = acc2[m] = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 16 <= cols; c += 16) {
    const __m256 w0 = L::load8(row, c), w1 = L::load8(row, c + 8);
    for (int m = 0; m < M; ++m) {
      const float* xr = x + (i0 + m) * cols + c;
      acc[m] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xr), acc[m]);
      acc2[m] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xr + 8), acc2[m]);
    }
  }
  for (; c + 8 <= cols; c += 8) {
    const __m256 w0 = L::load8(row, c);
    for (int m = 0; m < M; ++m) acc[m] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + (i0 + m) * cols + c), acc[m]);
  }
  for (int m = 0; m < M; ++m) {
    float s = hsum(_mm256_add_ps(acc[m], acc2[m]));
    for (int64_t k = c; k < cols; ++k) s += L::load1(row, k) * x[(i0 + m) * cols + k];
    y[(i0 + m) * w.rows() + r] = s;
  }
}

template <class L>
void float_tile(const splash::cpu::KernelArgs& a) {
  const splash::PackedWeights& w = *a.w;
  for (int64_t r = a.r0; r < a.r1; ++r) {
    int64_t i = a.i0;
    for (; i + 4 <= a.i1; i += 4) float_row<L, 4>(w, a.x, r, i, a.y);
    switch (a.i1 - i) {
      case 3: float_row<L, 3>(w, a.x, r, i, a.y); break;
      case 2: float_row<L, 2>(w, a.x, r, i, a.y); break;
      case 1: float_row<L, 1>(w, a.x, r, i, a.y); break;
      default: break;
    }
  }
}

splash::cpu::TileKernel simd_kernel(splash::WeightFormat f) {
  using splash::WeightFormat;
  switch (f) {
    case WeightFormat::kF32: return float_tile<LoadF32>;
    case WeightFormat::kF16: return float_tile<LoadF16>;
    case WeightFormat::kBF16: return float_tile<LoadBF16>;
    case WeightFormat::kQ8_0: return quant_tile<DecQ8_0>;
    case WeightFormat::kQ4_0: return quant_tile<DecQ4_0>;
    case WeightFormat::kQ4_K: return quant_tile<DecQ45_K<false>>;
    case WeightFormat::kQ5_K: return quant_tile<DecQ45_K<true>>;
    case WeightFormat::kQ6_K: return quant_tile<DecQ6_K>;
    case WeightFormat::kMlx4: return quant_tile<DecMlx<false>>;
    case WeightFormat::kMlx8: return quant_tile<DecMlx<true>>;
    case WeightFormat::kQ4_0x8:
    case WeightFormat::kQ8_0x8:
    case WeightFormat::kMlx4x8:
    case WeightFormat::kMlx8x8:
    case WeightFormat::kF16x16:
    case WeightFormat::kBF16x16:
    case WeightFormat::kQ4_Kx8:
    case WeightFormat::kQ5_Kx8:
    case WeightFormat::kQ6_Kx8: return nullptr;  // matmul_gemm_impl.h
  }
  return nullptr;
}
