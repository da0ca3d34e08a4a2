// Internal to backend/cpu: the attention inner loops, written once over a vector type and compiled
// by attention_avx2.cpp (8 floats) and attention_avx512.cpp (16 floats). Include it only inside an
// anonymous namespace: the two copies are built with different instruction sets and must never be
// merged by the linker.
//
// Requires before inclusion: <immintrin.h>, <cstring>, attention_kernels.h and a struct `Simd` with
//   V, kW (floats per vector), kScoreRows, kAccRows, kAccVecs (register-block sizes),
//   zero(), set1(f), load(p), store(p, v), add, mul, max, fmadd(a, b, c), exp(v),
//   load_i8(p) / load_bf16(p) (kW codes -> f32), hsum(v), hmax(v),
//   reduce4(a, b, c, d) (__m128 of the four horizontal sums), iota() (lanes 0, 1, ...),
//   keep_lt(x, idx, lim, fill) (x where idx < lim, else fill).

constexpr int kTile = kKvPageTokens;
constexpr int kTileVecs = kTile / Simd::kW;
using V = typename Simd::V;

// --- tile load ---------------------------------------------------------------------------------

void load_tile(const KvPageGeometry& geo, const uint8_t* block, int h, int n, float* dst, float* scale) {
  const int hd = geo.head_dim;
  const int64_t len = int64_t{n} * hd;  // a multiple of kW: attention.cpp picks this tier only then
  const uint8_t* src = block + h * geo.head_bytes();
  switch (geo.format) {
    case KvFormat::kF32:
      std::memcpy(dst, src, static_cast<size_t>(len) * 4);
      for (int j = 0; j < kTile; ++j) scale[j] = 1.0f;
      break;
    case KvFormat::kBF16: {
      const auto* b = reinterpret_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < len; i += Simd::kW) Simd::store(dst + i, Simd::load_bf16(b + i));
      for (int j = 0; j < kTile; ++j) scale[j] = 1.0f;
      break;
    }
    case KvFormat::kInt8: {
      const auto* q = reinterpret_cast<const int8_t*>(src);
      for (int64_t i = 0; i < len; i += Simd::kW) Simd::store(dst + i, Simd::load_i8(q + i));
      std::memcpy(scale, block + geo.scales_offset(h), static_cast<size_t>(n) * 4);
      for (int j = n; j < kTile; ++j) scale[j] = 1.0f;
      break;
    }
  }
  const int n4 = (n + 3) & ~3;
  if (n4 > n) std::memset(dst + len, 0, static_cast<size_t>(n4 - n) * hd * 4);
}

// --- scores: R query rows x 4 keys per pass, all in registers; one 4-way reduction per pass
// instead of a horizontal sum per (row, key) ------------------------------------------------------

inline V load_elems(const float* p) { return Simd::load(p); }
inline V load_elems(const int8_t* p) { return Simd::load_i8(p); }
inline V load_elems(const uint16_t* p) { return Simd::load_bf16(p); }

// Prefetches the lines of pf (a 64-byte aligned run; nullptr: nothing) that start in elements
// [at, at + n): passes that cover a run in pieces request each line once.
template <class T>
inline void prefetch_run(const T* pf, int64_t at, int n) {
  if (pf == nullptr) return;
  const char* base = reinterpret_cast<const char*>(pf);
  const int64_t end = (at + n) * static_cast<int64_t>(sizeof(T));
  for (int64_t o = (at * static_cast<int64_t>(sizeof(T)) + 63) & ~int64_t{63}; o < end; o += 64)
    _mm_prefetch(base + o, _MM_HINT_T0);
}

template <int R, class T>
void scores_rows(const float* q, const T* k, int n4, int hd, float* s, const T* pf) {
  for (int j = 0; j < n4; j += 4) {
    const T* k0 = k + int64_t{j} * hd;
    prefetch_run(pf, int64_t{j} * hd, 4 * hd);
    V acc[R][4];
    for (int r = 0; r < R; ++r)
      for (int i = 0; i < 4; ++i) acc[r][i] = Simd::zero();
    for (int d = 0; d < hd; d += Simd::kW) {
      V kv[4];
      for (int i = 0; i < 4; ++i) kv[i] = load_elems(k0 + i * hd + d);
      for (int r = 0; r < R; ++r) {
        const V qv = Simd::load(q + r * hd + d);
        for (int i = 0; i < 4; ++i) acc[r][i] = Simd::fmadd(qv, kv[i], acc[r][i]);
      }
    }
    for (int r = 0; r < R; ++r)
      _mm_storeu_ps(s + r * kTile + j, Simd::reduce4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]));
  }
}

// Keys as f32 (a loaded tile) or as the page's int8 / bf16 codes read in place (decode: one
// conversion in registers instead of a 16 KB f32 tile written and read back per head and page).
// pf: see AttentionKernels::scores_i8 (the first pass over the keys prefetches it).
template <class T>
void scores(const float* q, int n_rows, const T* k, int n_keys, int hd, float* s, const T* pf) {
  const int n4 = (n_keys + 3) & ~3;
  int r = 0;
  for (; r + Simd::kScoreRows <= n_rows; r += Simd::kScoreRows, pf = nullptr)
    scores_rows<Simd::kScoreRows>(q + int64_t{r} * hd, k, n4, hd, s + r * kTile, pf);
  // The rest in one pass (GQA groups of 2 or 3 rows: decode converts each int8 key once, not per row).
  switch (n_rows - r) {
    case 3: scores_rows<3>(q + int64_t{r} * hd, k, n4, hd, s + r * kTile, pf); break;
    case 2: scores_rows<2>(q + int64_t{r} * hd, k, n4, hd, s + r * kTile, pf); break;
    case 1: scores_rows<1>(q + int64_t{r} * hd, k, n4, hd, s + r * kTile, pf); break;
    default: break;
  }
}

void scores_f32(const float* q, int n_rows, const float* k, int n_keys, int hd, float* s) {
  scores<float>(q, n_rows, k, n_keys, hd, s, nullptr);
}

// --- online softmax step, a row of 32 scores at a time in kTileVecs vectors ------------------------

void softmax_tile(float* s, int n_rows, const int32_t* valid, const float* kscale, const float* vscale, float* m,
                  float* l, float* alpha) {
  const float neg_inf = -__builtin_inff();
  V idx[kTileVecs], ks[kTileVecs], vs[kTileVecs];
  for (int i = 0; i < kTileVecs; ++i) {
    idx[i] = Simd::add(Simd::iota(), Simd::set1(static_cast<float>(i * Simd::kW)));
    ks[i] = Simd::load(kscale + i * Simd::kW);
    vs[i] = Simd::load(vscale + i * Simd::kW);
  }
  const V vinf = Simd::set1(neg_inf), vzero = Simd::zero();
  for (int r = 0; r < n_rows; ++r) {
    float* sr = s + r * kTile;
    const V lim = Simd::set1(static_cast<float>(valid[r]));
    V x[kTileVecs];
    V mx = vinf;
    for (int i = 0; i < kTileVecs; ++i) {
      x[i] = Simd::keep_lt(Simd::mul(Simd::load(sr + i * Simd::kW), ks[i]), idx[i], lim, vinf);
      mx = Simd::max(mx, x[i]);
    }
    const float m_new = std::max(m[r], Simd::hmax(mx));
    float a = 1.0f;
    if (m_new != neg_inf) {
      // exp(m - m') as one vector lane: exact 1 when the max did not move, 0 on the row's first keys.
      a = m[r] == neg_inf ? 0.0f : _mm_cvtss_f32(Simd::low4(Simd::exp(Simd::set1(m[r] - m_new))));
    }
    const V vm = Simd::set1(m_new);
    V sum = vzero;
    for (int i = 0; i < kTileVecs; ++i) {
      // Masked lanes (including every lane while m' is -inf) become exact zeros.
      const V e = Simd::keep_lt(Simd::exp(Simd::sub(x[i], vm)), idx[i], lim, vzero);
      sum = Simd::add(sum, e);
      Simd::store(sr + i * Simd::kW, Simd::mul(e, vs[i]));
    }
    l[r] = l[r] * a + Simd::hsum(sum);
    m[r] = m_new;
    alpha[r] = a;
  }
}

// --- weighted sum of values: R rows x C vectors of the output in registers while the keys stream
// past; each value vector load serves R rows --------------------------------------------------------

template <int R, int C, class T>
void accumulate_block(float* acc, const float* p, const float* alpha, const T* v, int n_keys, int hd, int d,
                      const T* pf) {
  V a[R][C];
  for (int r = 0; r < R; ++r) {
    const V va = Simd::set1(alpha[r]);
    for (int c = 0; c < C; ++c) a[r][c] = Simd::mul(Simd::load(acc + r * hd + d + c * Simd::kW), va);
  }
  for (int j = 0; j < n_keys; ++j) {
    prefetch_run(pf, int64_t{j} * hd + d, C * Simd::kW);
    V vv[C];
    for (int c = 0; c < C; ++c) vv[c] = load_elems(v + int64_t{j} * hd + d + c * Simd::kW);
    for (int r = 0; r < R; ++r) {
      const V pb = Simd::set1(p[r * kTile + j]);
      for (int c = 0; c < C; ++c) a[r][c] = Simd::fmadd(pb, vv[c], a[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) Simd::store(acc + r * hd + d + c * Simd::kW, a[r][c]);
}

template <int R, class T>
void accumulate_rows(float* acc, const float* p, const float* alpha, const T* v, int n_keys, int hd,
                     const T* pf) {
  int d = 0;
  for (; d + Simd::kAccVecs * Simd::kW <= hd; d += Simd::kAccVecs * Simd::kW)
    accumulate_block<R, Simd::kAccVecs>(acc, p, alpha, v, n_keys, hd, d, pf);
  for (; d < hd; d += Simd::kW) accumulate_block<R, 1>(acc, p, alpha, v, n_keys, hd, d, pf);
}

// Values as f32 or in place as int8 / bf16 codes, as scores.
template <class T>
void accumulate(float* acc, int n_rows, const float* p, const float* alpha, const T* v, int n_keys, int hd,
                const T* pf) {
  constexpr int R = Simd::kAccRows;
  int r = 0;
  for (; r + R <= n_rows; r += R, pf = nullptr)
    accumulate_rows<R>(acc + int64_t{r} * hd, p + r * kTile, alpha + r, v, n_keys, hd, pf);
  switch (n_rows - r) {
    case 3: accumulate_rows<3>(acc + int64_t{r} * hd, p + r * kTile, alpha + r, v, n_keys, hd, pf); break;
    case 2: accumulate_rows<2>(acc + int64_t{r} * hd, p + r * kTile, alpha + r, v, n_keys, hd, pf); break;
    case 1: accumulate_rows<1>(acc + int64_t{r} * hd, p + r * kTile, alpha + r, v, n_keys, hd, pf); break;
    default: break;
  }
}

void accumulate_f32(float* acc, int n_rows, const float* p, const float* alpha, const float* v, int n_keys, int hd) {
  accumulate<float>(acc, n_rows, p, alpha, v, n_keys, hd, nullptr);
}

constexpr AttentionKernels kSimdKernels{load_tile, scores_f32, softmax_tile, accumulate_f32, nullptr,
                                        nullptr,   nullptr,       nullptr,      nullptr,           nullptr,
                                        nullptr,   nullptr,       scores<int8_t>, accumulate<int8_t>,
                                        scores<uint16_t>, accumulate<uint16_t>};
