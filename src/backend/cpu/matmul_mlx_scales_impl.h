// Internal to backend/cpu: the scales and biases of the MLX x8 layouts (kMlx4x8, kMlx8x8; matmul_repack.h)
// as floats, shared by the x8 kernels (matmul_gemm_impl.h includes it) and the AMX ones
// (matmul_amx.cpp). Include it inside an anonymous namespace of a file built with AVX2 or more.

// 8 scales (or biases) of a kMlx4x8 / kMlx8x8 group as floats. ST: 0 f32, 1 f16, 2 bf16 (the file's type).
template <int ST>
inline __m256 mlx_scales8(const uint8_t* p) {
  if constexpr (ST == 0) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if constexpr (ST == 1) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}
constexpr int mlx_scale_bytes(int st) { return st == 0 ? 4 : 2; }
inline int mlx_scale_kind(splash::DType t) { return t == splash::DType::kF16 ? 1 : t == splash::DType::kBF16 ? 2 : 0; }
