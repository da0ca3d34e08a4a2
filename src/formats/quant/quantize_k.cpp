// K-quant encoders. Each 256-element super-block is split into sub-blocks; each sub-block gets the
// scale (and for Q4_K/Q5_K an offset) that minimises a weighted squared error over a small set of
// candidate scales, refined by least squares. The sub-block scales are then themselves quantized
// (6 bits for Q4_K/Q5_K, int8 for Q6_K) against one fp16 super-block scale, and the quants are
// recomputed with the scales as they will be decoded, so rounding of the scales is not compounded.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/half.h"
#include "core/ggml_blocks.h"
#include "formats/quant/quantize_k.h"

namespace splash::quant {

namespace {

// Round to nearest (ties to even) after clamping, so out-of-range or infinite inputs cannot reach an
// undefined float->int conversion.
int nearest_clamped(float v, int lo, int hi) {
  if (!(v > static_cast<float>(lo))) return lo;  // also catches NaN
  if (v > static_cast<float>(hi)) return hi;
  return static_cast<int>(std::nearbyint(v));
}

// Asymmetric fit: L in [0, nmax], x ~ a * L - m with a >= 0, m >= 0. Returns a, sets *m.
// Candidate inverse scales spread around nmax / (max - min); for each, L is rounded and (a, m) solved
// by weighted least squares; the pair with the smallest weighted error wins.
float fit_asymmetric(const float* x, const float* w, int n, int nmax, uint8_t* L, float* m, float rmin,
                     float rdelta, int nstep) {
  float mn = x[0], mx = x[0];
  for (int i = 1; i < n; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
  }
  if (mn > 0) mn = 0;  // the offset only ever shifts down: m = -min >= 0
  if (mx <= mn) {
    std::fill(L, L + n, uint8_t{0});
    *m = -mn;
    return 0.0f;
  }
  float best_err = INFINITY, best_a = 0, best_b = mn;
  uint8_t cand[kQK_K];
  for (int is = -1; is <= nstep; ++is) {
    // is == -1: the plain min-max scale; others: perturbed ones.
    const float iscale = is < 0 ? nmax / (mx - mn) : (rmin + rdelta * is + nmax) / (mx - mn);
    double sw = 0, sl = 0, sl2 = 0, sx = 0, sxl = 0;
    for (int i = 0; i < n; ++i) {
      cand[i] = static_cast<uint8_t>(nearest_clamped(iscale * (x[i] - mn), 0, nmax));
      const double l = cand[i];
      sw += w[i];
      sl += w[i] * l;
      sl2 += w[i] * l * l;
      sx += w[i] * x[i];
      sxl += w[i] * x[i] * l;
    }
    const double det = sw * sl2 - sl * sl;
    if (det <= 0) continue;
    double a = (sw * sxl - sx * sl) / det;
    double b = (sl2 * sx - sl * sxl) / det;
    if (b > 0) {  // the offset may not be positive: refit with b = 0
      b = 0;
      a = sl2 > 0 ? sxl / sl2 : 0;
    }
    if (a < 0) continue;
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const double diff = a * cand[i] + b - x[i];
      err += w[i] * diff * diff;
    }
    if (err < best_err) {
      best_err = static_cast<float>(err);
      best_a = static_cast<float>(a);
      best_b = static_cast<float>(b);
      std::memcpy(L, cand, static_cast<size_t>(n));
    }
  }
  if (best_err == INFINITY) {  // every candidate degenerate (e.g. all values equal): plain min-max
    const float iscale = nmax / (mx - mn);
    for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(nearest_clamped(iscale * (x[i] - mn), 0, nmax));
    best_a = 1.0f / iscale;
    best_b = mn;
  }
  *m = -best_b;
  return best_a;
}

// Symmetric fit: L in [-nmax, nmax - 1], x ~ s * L. Returns s (its sign follows the convention that
// the extreme value maps to -nmax, which uses the asymmetric range fully).
float fit_symmetric(const float* x, const float* w, int n, int nmax) {
  float amax = 0, max = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  if (amax < 1e-30f) return 0.0f;
  float best = 0, best_scale = 0;
  // The plain scale (is = 0) is tried first and only a strictly better candidate replaces it: on a
  // tie (a constant sub-block fits every candidate exactly) the full-range L = -nmax is kept, whose
  // scale survives the super-block requantization exactly (ggml does the same).
  for (int k = 0; k <= 18; ++k) {
    const int is = k == 0 ? 0 : (k <= 9 ? -k : k - 9);
    const float iscale = -(nmax + 0.1f * is) / max;
    double slx = 0, sl2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = nearest_clamped(iscale * x[i], -nmax, nmax - 1);
      slx += w[i] * x[i] * l;
      sl2 += w[i] * l * l;
    }
    if (sl2 > 0 && slx * slx > best * sl2) {  // maximising slx^2 / sl2 minimises the weighted error
      best = static_cast<float>(slx * slx / sl2);
      best_scale = static_cast<float>(slx / sl2);
    }
  }
  return best_scale;
}

// Shared by Q4_K and Q5_K: 8 sub-blocks of 32, 6-bit scales and mins; writes d, dmin, scales, L.
void k_asymmetric(const float* x, int nmax, float rmin, float rdelta, int nstep, uint16_t* d_out,
                  uint16_t* dmin_out, uint8_t* scales_out, uint8_t* L) {
  float scales[8], mins[8], w[32];
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int i = 0; i < 32; ++i) sum_x2 += xs[i] * xs[i];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int i = 0; i < 32; ++i) w[i] = av_x + std::fabs(xs[i]);  // favour large values, never ignore small ones
    scales[j] = fit_asymmetric(xs, w, 32, nmax, L + 32 * j, &mins[j], rmin, rdelta, nstep);
  }
  const float max_scale = *std::max_element(scales, scales + 8);
  const float max_min = *std::max_element(mins, mins + 8);
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = static_cast<uint8_t>(nearest_clamped(inv_scale * scales[j], 0, 63));
    lm[j] = static_cast<uint8_t>(nearest_clamped(inv_min * mins[j], 0, 63));
  }
  std::memset(scales_out, 0, kKScaleBytes);
  for (int j = 0; j < 8; ++j) {  // inverse of k_scale_min
    if (j < 4) {
      scales_out[j] = ls[j];
      scales_out[j + 4] = lm[j];
    } else {
      scales_out[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      scales_out[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      scales_out[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
  *d_out = f32_to_f16(max_scale / 63.0f);
  *dmin_out = f32_to_f16(max_min / 63.0f);
  const float d = f16_to_f32(*d_out), dmin = f16_to_f32(*dmin_out);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    k_scale_min(scales_out, j, sc, m);
    const float dd = d * sc, dm = dmin * m;
    for (int i = 0; i < 32; ++i)
      L[32 * j + i] = dd == 0.0f ? 0 : static_cast<uint8_t>(nearest_clamped((x[32 * j + i] + dm) / dd, 0, nmax));
  }
}

void q4_k(const float* x, uint8_t* dst) {
  BlockQ4_K b;
  uint8_t L[kQK_K];
  k_asymmetric(x, 15, -1.0f, 0.1f, 20, &b.d, &b.dmin, b.scales, L);
  for (int i = 0; i < 4; ++i)
    for (int l = 0; l < 32; ++l) b.qs[32 * i + l] = static_cast<uint8_t>(L[64 * i + l] | (L[64 * i + 32 + l] << 4));
  std::memcpy(dst, &b, sizeof(b));
}

void q5_k(const float* x, uint8_t* dst) {
  BlockQ5_K b;
  uint8_t L[kQK_K];
  k_asymmetric(x, 31, -0.5f, 0.1f, 15, &b.d, &b.dmin, b.scales, L);
  std::memset(b.qh, 0, sizeof(b.qh));
  for (int i = 0; i < 4; ++i) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t lo = L[64 * i + l], hi = L[64 * i + 32 + l];
      b.qs[32 * i + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
      b.qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * i)) | ((hi >> 4) << (2 * i + 1)));
    }
  }
  std::memcpy(dst, &b, sizeof(b));
}

void q6_k(const float* x, uint8_t* dst) {
  BlockQ6_K b;
  float scales[16], w[16];
  float max_scale = 0, max_abs_scale = 0;
  for (int j = 0; j < 16; ++j) {
    for (int i = 0; i < 16; ++i) w[i] = x[16 * j + i] * x[16 * j + i];
    scales[j] = fit_symmetric(x + 16 * j, w, 16, 32);
    if (std::fabs(scales[j]) > max_abs_scale) {
      max_abs_scale = std::fabs(scales[j]);
      max_scale = scales[j];
    }
  }
  uint8_t L[kQK_K];
  if (max_abs_scale == 0.0f) {
    std::memset(&b, 0, sizeof(b));
    std::fill(L, L + kQK_K, uint8_t{32});
  } else {
    const float iscale = -128.0f / max_scale;  // the largest sub-block scale becomes -128
    b.d = f32_to_f16(1.0f / iscale);
    for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(nearest_clamped(iscale * scales[j], -128, 127));
    const float d = f16_to_f32(b.d);
    for (int j = 0; j < 16; ++j) {
      const float dd = d * b.scales[j];
      for (int i = 0; i < 16; ++i)
        L[16 * j + i] = static_cast<uint8_t>(dd == 0.0f ? 32 : nearest_clamped(x[16 * j + i] / dd, -32, 31) + 32);
    }
  }
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t a = L[128 * h + l], bb = L[128 * h + 32 + l], c = L[128 * h + 64 + l], e = L[128 * h + 96 + l];
      b.ql[64 * h + l] = static_cast<uint8_t>((a & 0xF) | ((c & 0xF) << 4));
      b.ql[64 * h + 32 + l] = static_cast<uint8_t>((bb & 0xF) | ((e & 0xF) << 4));
      b.qh[32 * h + l] = static_cast<uint8_t>((a >> 4) | ((bb >> 4) << 2) | ((c >> 4) << 4) | ((e >> 4) << 6));
    }
  }
  std::memcpy(dst, &b, sizeof(b));
}

void q8_k(const float* x, uint8_t* dst) {
  BlockQ8_K b;
  float amax = 0, max = 0;
  for (int i = 0; i < kQK_K; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  if (amax == 0.0f) {
    std::memset(&b, 0, sizeof(b));
  } else {
    const float iscale = -127.0f / max;
    b.d = 1.0f / iscale;
    for (int i = 0; i < kQK_K; ++i) b.qs[i] = static_cast<int8_t>(nearest_clamped(iscale * x[i], -127, 127));
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += b.qs[16 * g + i];
      b.bsums[g] = static_cast<int16_t>(sum);
    }
  }
  std::memcpy(dst, &b, sizeof(b));
}

}  // namespace

void quantize_k_block(DType type, const float* x, uint8_t* dst) {
  switch (type) {
    case DType::kQ4_K: return q4_k(x, dst);
    case DType::kQ5_K: return q5_k(x, dst);
    case DType::kQ6_K: return q6_k(x, dst);
    case DType::kQ8_K: return q8_k(x, dst);
    default: break;
  }
  SPLASH_CHECK_MSG(false, "quantize_k_block: not a K-quant type this encoder handles");
}

}  // namespace splash::quant
