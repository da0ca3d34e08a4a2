// AVX-512 (VL + VNNI) matmul kernels: the 256-bit kernels of matmul_simd_impl.h with vpdpbusd in
// place of maddubs + madd, and 512-bit ones for the x8 layouts (matmul_gemm512_impl.h).
// Only called when best_isa_level() is kAvx512.
#include <immintrin.h>

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics initialise undefined vectors with themselves (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

#include "backend/cpu/matmul_kernels.h"
#include "backend/cpu/matmul_repack.h"

#define SPLASH_SIMD_VNNI 1

namespace splash::cpu {

namespace {
#include "backend/cpu/matmul_simd_impl.h"
#include "backend/cpu/matmul_gemm_impl.h"
#include "backend/cpu/matmul_pair512_impl.h"
#include "backend/cpu/matmul_row512_impl.h"
#include "backend/cpu/matmul_gemm512_impl.h"
#include "backend/cpu/matmul_float512_impl.h"
}  // namespace

TileKernel avx512_x8_kernel(WeightFormat f) {
  if (f == WeightFormat::kF16x16) return f16x16_tile<false>;
  if (f == WeightFormat::kBF16x16) return f16x16_tile<true>;
  if (TileKernel k = x16_kernel(f)) return k;
  return x8_kernel(f);  // layouts without a 512-bit pair kernel (Q4_Kx8, Q6_Kx8)
}

TileKernel avx512_kernel(WeightFormat f) {
  // Float formats gain nothing from VNNI; the AVX2 versions serve them.
  if (f == WeightFormat::kF32 || f == WeightFormat::kF16 || f == WeightFormat::kBF16) return nullptr;
  return simd_kernel(f);
}

}  // namespace splash::cpu
