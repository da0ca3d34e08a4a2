// The KV row codec, the scalar attention kernels and the naive reference attention.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/attention_kernels.h"
#include "backend/cpu/cpu_features.h"
#include "core/half.h"

namespace splash {

const char* kv_format_name(KvFormat f) {
  switch (f) {
    case KvFormat::kInt8: return "int8";
    case KvFormat::kBF16: return "bf16";
    case KvFormat::kF32: return "f32";
  }
  return "?";
}

namespace cpu {
float kv_quantize_int8_scalar(const float* x, int hd, int8_t* q) {
  float amax = 0.0f;
  for (int d = 0; d < hd; ++d) amax = std::max(amax, std::fabs(x[d]));
  const float scale = amax / 127.0f;
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  for (int d = 0; d < hd; ++d) q[d] = static_cast<int8_t>(std::lrintf(x[d] * inv));
  return scale;
}
}  // namespace cpu

void kv_store_row(const KvPageGeometry& geo, uint8_t* block, int slot, const float* x) {
  SPLASH_CHECK(slot >= 0 && slot < kKvPageTokens);
  const int hd = geo.head_dim;
  // Prefill stores every K and V row of every layer through here (8% of a 512-token prefill with
  // the scalar loop): the AVX2 codec writes the same bytes.
  static const bool simd_cpu = best_isa_level() >= IsaLevel::kAvx2;
  const bool simd = simd_cpu && hd % 8 == 0;
  for (int h = 0; h < geo.n_kv_head; ++h) {
    const float* xh = x + static_cast<int64_t>(h) * hd;
    uint8_t* dst = block + h * geo.head_bytes() + static_cast<int64_t>(slot) * hd * geo.elem_bytes();
    switch (geo.format) {
      case KvFormat::kF32:
        std::memcpy(dst, xh, static_cast<size_t>(hd) * 4);
        break;
      case KvFormat::kBF16:
        for (int d = 0; d < hd; ++d) {
          const uint16_t b = f32_to_bf16(xh[d]);
          std::memcpy(dst + 2 * d, &b, 2);
        }
        break;
      case KvFormat::kInt8: {
        auto* q = reinterpret_cast<int8_t*>(dst);
        const float scale = simd ? cpu::kv_quantize_int8_avx2(xh, hd, q) : cpu::kv_quantize_int8_scalar(xh, hd, q);
        std::memcpy(block + geo.scales_offset(h) + 4 * slot, &scale, 4);
        break;
      }
    }
  }
}

void kv_load_row(const KvPageGeometry& geo, const uint8_t* block, int h, int slot, float* out) {
  const int hd = geo.head_dim;
  const uint8_t* src = block + h * geo.head_bytes() + static_cast<int64_t>(slot) * hd * geo.elem_bytes();
  switch (geo.format) {
    case KvFormat::kF32:
      std::memcpy(out, src, static_cast<size_t>(hd) * 4);
      break;
    case KvFormat::kBF16:
      for (int d = 0; d < hd; ++d) {
        uint16_t b;
        std::memcpy(&b, src + 2 * d, 2);
        out[d] = bf16_to_f32(b);
      }
      break;
    case KvFormat::kInt8: {
      float scale;
      std::memcpy(&scale, block + geo.scales_offset(h) + 4 * slot, 4);
      const auto* q = reinterpret_cast<const int8_t*>(src);
      for (int d = 0; d < hd; ++d) out[d] = static_cast<float>(q[d]) * scale;
      break;
    }
  }
}

// --- scalar kernels

namespace cpu {
namespace {

void load_tile_scalar(const KvPageGeometry& geo, const uint8_t* block, int h, int n, float* dst, float* scale) {
  const int hd = geo.head_dim;
  const uint8_t* src = block + h * geo.head_bytes();
  for (int j = 0; j < n; ++j) {
    float* o = dst + static_cast<int64_t>(j) * hd;
    switch (geo.format) {
      case KvFormat::kF32:
        std::memcpy(o, src + static_cast<int64_t>(j) * hd * 4, static_cast<size_t>(hd) * 4);
        scale[j] = 1.0f;
        break;
      case KvFormat::kBF16:
        for (int d = 0; d < hd; ++d) {
          uint16_t b;
          std::memcpy(&b, src + (static_cast<int64_t>(j) * hd + d) * 2, 2);
          o[d] = bf16_to_f32(b);
        }
        scale[j] = 1.0f;
        break;
      case KvFormat::kInt8: {
        const auto* q = reinterpret_cast<const int8_t*>(src) + static_cast<int64_t>(j) * hd;
        for (int d = 0; d < hd; ++d) o[d] = static_cast<float>(q[d]);
        std::memcpy(scale + j, block + geo.scales_offset(h) + 4 * j, 4);
        break;
      }
    }
  }
  for (int j = n; j < kKvPageTokens; ++j) scale[j] = 1.0f;
  const int n4 = (n + 3) & ~3;
  if (n4 > n) std::memset(dst + static_cast<int64_t>(n) * hd, 0, static_cast<size_t>(n4 - n) * hd * 4);
}

void scores_scalar(const float* q, int n_rows, const float* k, int n_keys, int hd, float* s) {
  const int n4 = (n_keys + 3) & ~3;
  for (int r = 0; r < n_rows; ++r) {
    for (int j = 0; j < n4; ++j) {
      float acc = 0.0f;
      for (int d = 0; d < hd; ++d) acc += q[r * hd + d] * k[j * hd + d];
      s[r * kKvPageTokens + j] = acc;
    }
  }
}

void softmax_tile_scalar(float* s, int n_rows, const int32_t* valid, const float* kscale, const float* vscale,
                         float* m, float* l, float* alpha) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int r = 0; r < n_rows; ++r) {
    float* sr = s + r * kKvPageTokens;
    const int nv = std::clamp(valid[r], 0, kKvPageTokens);
    float m_new = m[r];
    for (int j = 0; j < nv; ++j) m_new = std::max(m_new, sr[j] * kscale[j]);
    const float a = m_new == neg_inf ? 1.0f : std::exp(m[r] - m_new);  // exp(-inf) = 0 on the first keys
    double sum = 0.0;
    for (int j = 0; j < kKvPageTokens; ++j) {
      const float e = j < nv ? std::exp(sr[j] * kscale[j] - m_new) : 0.0f;
      sum += e;
      sr[j] = e * vscale[j];
    }
    l[r] = l[r] * a + static_cast<float>(sum);
    m[r] = m_new;
    alpha[r] = a;
  }
}

void accumulate_scalar(float* acc, int n_rows, const float* p, const float* alpha, const float* v, int n_keys, int hd) {
  for (int r = 0; r < n_rows; ++r) {
    float* ar = acc + static_cast<int64_t>(r) * hd;
    for (int d = 0; d < hd; ++d) ar[d] *= alpha[r];
    for (int j = 0; j < n_keys; ++j) {
      const float w = p[r * kKvPageTokens + j];
      for (int d = 0; d < hd; ++d) ar[d] += w * v[static_cast<int64_t>(j) * hd + d];
    }
  }
}

}  // namespace

const AttentionKernels& attention_kernels_scalar() {
  static const AttentionKernels k{load_tile_scalar, scores_scalar, softmax_tile_scalar, accumulate_scalar,
                                     nullptr,          nullptr,       nullptr,
                                     nullptr,          nullptr,
                                     nullptr,          nullptr,       nullptr,
                                     nullptr,          nullptr,
                                     nullptr,          nullptr};
  return k;
}

}  // namespace cpu

// --- reference

void attention_reference(const float* q, int64_t n_q, int64_t q_pos0, const float* k, const float* v, int64_t n_kv,
                         const AttentionParams& p, float* out) {
  const int hd = p.head_dim;
  const int g = p.n_head / p.n_kv_head;
  const double scale = p.scale > 0.0f ? p.scale : 1.0 / std::sqrt(static_cast<double>(hd));
  std::vector<double> w;
  for (int64_t t = 0; t < n_q; ++t) {
    const int64_t n_vis = std::min(n_kv, q_pos0 + t + 1);
    for (int h = 0; h < p.n_head; ++h) {
      const int kvh = h / g;
      const float* qr = q + (t * p.n_head + h) * hd;
      w.assign(static_cast<size_t>(n_vis), 0.0);
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < n_vis; ++j) {
        const float* kr = k + (j * p.n_kv_head + kvh) * hd;
        double s = 0.0;
        for (int d = 0; d < hd; ++d) s += static_cast<double>(qr[d]) * kr[d];
        w[static_cast<size_t>(j)] = s * scale;
        m = std::max(m, s * scale);
      }
      double sum = 0.0;
      for (double& x : w) {
        x = std::exp(x - m);
        sum += x;
      }
      float* o = out + (t * p.n_head + h) * hd;
      for (int d = 0; d < hd; ++d) {
        double acc = 0.0;
        for (int64_t j = 0; j < n_vis; ++j) acc += w[static_cast<size_t>(j)] * v[(j * p.n_kv_head + kvh) * hd + d];
        o[d] = n_vis > 0 ? static_cast<float>(acc / sum) : 0.0f;
      }
    }
  }
}

}  // namespace splash
