#include "backend/cpu/rope.h"

#include <cmath>
#include <numbers>

namespace splash {

Result<RopeTable> RopeTable::create(const RopeParams& p, int64_t pos_begin, int64_t pos_end) {
  const int n_rot = p.n_rot == 0 ? p.head_dim : p.n_rot;
  if (p.head_dim <= 0) return make_error("rope: head_dim must be positive (got ", p.head_dim, ")");
  if (n_rot <= 0 || n_rot % 2 != 0 || n_rot > p.head_dim) {
    return make_error("rope: n_rot must be even and in (0, head_dim = ", p.head_dim, "] (got ", n_rot, ")");
  }
  if (!(p.theta > 0.0) || !std::isfinite(p.theta)) return make_error("rope: theta must be > 0 (got ", p.theta, ")");
  if (pos_begin < 0 || pos_end <= pos_begin) {
    return make_error("rope: position range [", pos_begin, ", ", pos_end, ") is empty or negative");
  }
  if (p.scaling != RopeScaling::kNone && !(p.factor > 0.0)) {
    return make_error("rope: scaling factor must be > 0 (got ", p.factor, ")");
  }
  if (p.scaling == RopeScaling::kLlama3 &&
      (!(p.high_freq_factor > p.low_freq_factor) || !(p.low_freq_factor > 0.0) || p.original_context <= 0)) {
    return make_error("rope: llama3 scaling needs high_freq_factor > low_freq_factor > 0 and original_context > 0");
  }
  const int64_t n_pos = pos_end - pos_begin;
  const int half = n_rot / 2;
  if (n_pos > (int64_t{1} << 31) / half) return make_error("rope: table for ", n_pos, " positions is too large");

  RopeTable t;
  t.params_ = p;
  t.n_rot_ = n_rot;
  t.pos_begin_ = pos_begin;
  t.pos_end_ = pos_end;
  t.inv_freq_.resize(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) {
    double f = std::pow(p.theta, -2.0 * i / n_rot);
    if (p.scaling == RopeScaling::kLlama3) {
      // Long wavelengths (low frequencies) are stretched by `factor`, short ones kept, and the band
      // in between interpolated, as in Llama 3.1's reference code.
      const double wavelen = 2.0 * std::numbers::pi / f;
      const double orig = static_cast<double>(p.original_context);
      const double low_wavelen = orig / p.low_freq_factor;
      const double high_wavelen = orig / p.high_freq_factor;
      if (wavelen > low_wavelen) {
        f /= p.factor;
      } else if (wavelen >= high_wavelen) {
        const double smooth = (orig / wavelen - p.low_freq_factor) / (p.high_freq_factor - p.low_freq_factor);
        f = (1.0 - smooth) * f / p.factor + smooth * f;
      }
    } else if (p.scaling == RopeScaling::kLinear) {
      f /= p.factor;
    }
    t.inv_freq_[static_cast<size_t>(i)] = f;
  }
  t.cos_.resize(static_cast<size_t>(n_pos * half));
  t.sin_.resize(t.cos_.size());
  for (int64_t k = 0; k < n_pos; ++k) {
    const double pos = static_cast<double>(pos_begin + k);
    for (int i = 0; i < half; ++i) {
      const double a = pos * t.inv_freq_[static_cast<size_t>(i)];
      t.cos_[static_cast<size_t>(k * half + i)] = static_cast<float>(std::cos(a));
      t.sin_[static_cast<size_t>(k * half + i)] = static_cast<float>(std::sin(a));
    }
  }
  return t;
}

const float* RopeTable::cos_row(int64_t pos) const {
  SPLASH_CHECK_MSG(pos >= pos_begin_ && pos < pos_end_, str_cat("rope position ", pos, " outside table [",
                                                                 pos_begin_, ", ", pos_end_, ")"));
  return cos_.data() + (pos - pos_begin_) * (n_rot_ / 2);
}

const float* RopeTable::sin_row(int64_t pos) const {
  SPLASH_CHECK_MSG(pos >= pos_begin_ && pos < pos_end_, str_cat("rope position ", pos, " outside table [",
                                                                 pos_begin_, ", ", pos_end_, ")"));
  return sin_.data() + (pos - pos_begin_) * (n_rot_ / 2);
}

void rope_apply(float* x, int64_t n_tokens, int64_t n_head, const int32_t* positions, const RopeTable& table) {
  const int64_t hd = table.params().head_dim;
  const int half = table.n_rot() / 2;
  const bool neox = table.params().style == RopeStyle::kNeox;
  // Memory-bound and tiny next to the projections: plain loops the compiler vectorizes (the NEOX
  // halves are contiguous; interleaved pairs get shuffles).
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* c = table.cos_row(positions[t]);
    const float* s = table.sin_row(positions[t]);
    for (int64_t h = 0; h < n_head; ++h) {
      float* v = x + (t * n_head + h) * hd;
      if (neox) {
        float* a = v;
        float* b = v + half;
        for (int i = 0; i < half; ++i) {
          const float x0 = a[i], x1 = b[i];
          a[i] = x0 * c[i] - x1 * s[i];
          b[i] = x0 * s[i] + x1 * c[i];
        }
      } else {
        for (int i = 0; i < half; ++i) {
          const float x0 = v[2 * i], x1 = v[2 * i + 1];
          v[2 * i] = x0 * c[i] - x1 * s[i];
          v[2 * i + 1] = x0 * s[i] + x1 * c[i];
        }
      }
    }
  }
}

}  // namespace splash
