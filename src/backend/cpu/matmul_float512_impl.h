// Internal to backend/cpu: the AVX-512 kernel of the 16-row float layouts (kF16x16, kBF16x16;
// matmul_repack.h), included only by matmul_avx512.cpp inside its anonymous namespace, after
// matmul_gemm512_impl.h.
//
// Per column, one 32-byte load converts to a zmm of the 16 rows' weights (vcvtph2ps, or a shift for
// bf16: exact either way) and meets each activation row's value there in one FMA with a broadcast
// operand, so a weight is loaded once per tile of up to 8 activation rows and nothing is reduced
// across lanes: the 16 lanes are the 16 output rows. f32 activations and f32 sums, as the row
// kernels; only the order of the additions differs.

template <bool kBf16>
inline __m512 load_f16x16(const uint8_t* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if constexpr (kBf16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  return _mm512_cvtph_ps(h);
}

// Rows of S groups (`gp[k]`) x activation rows [i0, i0 + M); out[k * M + m]. Decode (M = 1) keeps
// four accumulators per group over consecutive columns so the FMAs do not wait on each other, and
// may walk two groups at once (S = 2: two streams, PackedWeights::decode_streams).
template <bool kBf16, int M, int S>
void f16x16_micro(const uint8_t* const* gp, int64_t cols, const float* x, int64_t i0, __m512* out, int64_t pf) {
  constexpr int kAcc = M == 1 ? 4 : 1;
  __m512 acc[S][M][kAcc];
  for (int k = 0; k < S; ++k)
    for (int m = 0; m < M; ++m)
      for (int j = 0; j < kAcc; ++j) acc[k][m][j] = _mm512_setzero_ps();
  const float* xr[M];
  for (int m = 0; m < M; ++m) xr[m] = x + (i0 + m) * cols;
  int64_t c = 0;
  for (; c + 4 <= cols; c += 4) {
    for (int k = 0; k < S; ++k) {
      const uint8_t* p = gp[k] + c * 32;
      // Decode (M = 1) prefetches as the matrix says (PackedWeights::stream_prefetch_bytes: none on a
      // Zen 4 host, where one thread's F16 / BF16 decode ran 24-25 -> 30-31 GB/s without); tiles of
      // several rows (prefill) measured the same either way (within noise) and keep theirs.
      if constexpr (M > 1) {
        _mm_prefetch(reinterpret_cast<const char*>(p + kX8PrefetchBytes), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(p + kX8PrefetchBytes + 64), _MM_HINT_T0);
      } else if (pf) {
        prefetch_l1(p + pf, 128);
      }
      for (int j = 0; j < 4; ++j) {
        const __m512 w = load_f16x16<kBf16>(p + 32 * j);
        for (int m = 0; m < M; ++m) {
          __m512& a = acc[k][m][j % kAcc];
          a = _mm512_fmadd_ps(w, _mm512_set1_ps(xr[m][c + j]), a);
        }
      }
    }
  }
  for (; c < cols; ++c) {
    for (int k = 0; k < S; ++k) {
      const __m512 w = load_f16x16<kBf16>(gp[k] + c * 32);
      for (int m = 0; m < M; ++m) acc[k][m][0] = _mm512_fmadd_ps(w, _mm512_set1_ps(xr[m][c]), acc[k][m][0]);
    }
  }
  for (int k = 0; k < S; ++k)
    for (int m = 0; m < M; ++m) {
      __m512 t = acc[k][m][0];
      for (int j = 1; j < kAcc; ++j) t = _mm512_add_ps(t, acc[k][m][j]);
      out[k * M + m] = t;
    }
}

// y rows of the S groups at rows row0[k] (cut to the matrix's real rows) x activation rows from i.
template <bool kBf16, int M, int S>
void f16x16_step(const splash::PackedWeights& w, const uint8_t* const* gp, const int64_t* row0,
                 const splash::cpu::KernelArgs& a, int64_t i) {
  __m512 v[S * M];
  f16x16_micro<kBf16, M, S>(gp, w.cols(), a.x, i, v, a.prefetch);
  for (int k = 0; k < S; ++k) {
    const int64_t valid = std::min<int64_t>(16, w.rows() - row0[k]);
    const __mmask16 keep = static_cast<__mmask16>((1u << valid) - 1u);
    for (int m = 0; m < M; ++m) _mm512_mask_storeu_ps(a.y + (i + m) * w.rows() + row0[k], keep, v[k * M + m]);
  }
}

// Rows [r0, r1) (r0 a multiple of 16) x activation rows [i0, i1), 8 activation rows per pass over a
// group (8 accumulators; the group's columns stream from L1 / L2 once per pass).
template <bool kBf16>
void f16x16_tile(const splash::cpu::KernelArgs& a) {
  const splash::PackedWeights& w = *a.w;
  if (a.i1 - a.i0 == 1 && a.streams == 2) {  // decode: two streams (walk_streams)
    walk_streams<2>(w, a.r0, a.r1, [&](auto count, const uint8_t* const* gp, const int64_t* row0) {
      f16x16_step<kBf16, 1, decltype(count)::value>(w, gp, row0, a, a.i0);
    });
    return;
  }
  for (int64_t g = a.r0 / 16; g * 16 < a.r1; ++g) {
    const uint8_t* gp[1] = {w.data() + g * w.group_bytes()};
    const int64_t row0[1] = {g * 16};
    int64_t i = a.i0;
    for (; i + 8 <= a.i1; i += 8) f16x16_step<kBf16, 8, 1>(w, gp, row0, a, i);
    switch (a.i1 - i) {
      case 7: f16x16_step<kBf16, 7, 1>(w, gp, row0, a, i); break;
      case 6: f16x16_step<kBf16, 6, 1>(w, gp, row0, a, i); break;
      case 5: f16x16_step<kBf16, 5, 1>(w, gp, row0, a, i); break;
      case 4: f16x16_step<kBf16, 4, 1>(w, gp, row0, a, i); break;
      case 3: f16x16_step<kBf16, 3, 1>(w, gp, row0, a, i); break;
      case 2: f16x16_step<kBf16, 2, 1>(w, gp, row0, a, i); break;
      case 1: f16x16_step<kBf16, 1, 1>(w, gp, row0, a, i); break;
      default: break;
    }
  }
}
