// Internal to backend/cpu: loads of two neighbouring x8 groups into one 512-bit register, shared by
// the 512-bit VNNI kernels (matmul_gemm512_impl.h) and the AMX ones (matmul_amx.cpp). Include it
// inside an anonymous namespace of a file built with the AVX-512 flags, before those kernels and
// after matmul_mlx_scales_impl.h.

// Group g's 32 bytes at p0 in the lower half, group g + 1's at p1 in the upper half.
inline __m512i load_pair(const uint8_t* p0, const uint8_t* p1) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p0))),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p1)), 1);
}

// The 8 fp16 scales at p0 and the 8 at p1 as 16 floats.
inline __m512 scales_pair(const uint8_t* p0, const uint8_t* p1) {
  const __m256i h = _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p0))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p1)), 1);
  return _mm512_cvtph_ps(h);
}

// The 8 MLX scales (or biases) at p0 and the 8 at p1 as 16 floats (mlx_scales8).
template <int ST>
inline __m512 mlx_scales_pair(const uint8_t* p0, const uint8_t* p1) {
  return _mm512_insertf32x8(_mm512_castps256_ps512(mlx_scales8<ST>(p0)), mlx_scales8<ST>(p1), 1);
}
