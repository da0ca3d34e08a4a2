#include "backend/cpu/rope.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <numbers>

namespace splash {

// chunk i covers positions [pos_begin + i * kChunkPositions, ...): kChunkPositions cos rows then as
// many sin rows. `ready` publishes a filled chunk (release on fill, acquire on read).
struct RopeTable::Chunks {
  std::unique_ptr<std::atomic<float*>[]> ready;
  std::vector<std::unique_ptr<float[]>> owned;  // under mu
  std::mutex mu;
  std::atomic<int64_t> bytes{0};
};

RopeTable::RopeTable() = default;
RopeTable::~RopeTable() = default;
RopeTable::RopeTable(RopeTable&&) noexcept = default;
RopeTable& RopeTable::operator=(RopeTable&&) noexcept = default;

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
  const int64_t n_chunks = (n_pos + kChunkPositions - 1) / kChunkPositions;
  t.chunks_ = std::make_unique<Chunks>();
  t.chunks_->ready = std::make_unique<std::atomic<float*>[]>(static_cast<size_t>(n_chunks));
  for (int64_t i = 0; i < n_chunks; ++i) t.chunks_->ready[static_cast<size_t>(i)].store(nullptr);
  t.chunks_->owned.resize(static_cast<size_t>(n_chunks));
  return t;
}

const float* RopeTable::chunk(int64_t pos) const {
  SPLASH_CHECK_MSG(pos >= pos_begin_ && pos < pos_end_, str_cat("rope position ", pos, " outside table [",
                                                                 pos_begin_, ", ", pos_end_, ")"));
  const int64_t ci = (pos - pos_begin_) / kChunkPositions;
  std::atomic<float*>& slot = chunks_->ready[static_cast<size_t>(ci)];
  if (const float* c = slot.load(std::memory_order_acquire)) return c;
  std::lock_guard<std::mutex> lock(chunks_->mu);
  if (const float* c = slot.load(std::memory_order_relaxed)) return c;
  const int half = n_rot_ / 2;
  const size_t floats = static_cast<size_t>(2 * kChunkPositions * half);
  auto mem = std::make_unique<float[]>(floats);
  float* cos = mem.get();
  float* sin = cos + kChunkPositions * half;
  const int64_t first = pos_begin_ + ci * kChunkPositions;
  const int64_t n = std::min(kChunkPositions, pos_end_ - first);
  for (int64_t k = 0; k < n; ++k) {
    const double p = static_cast<double>(first + k);
    for (int i = 0; i < half; ++i) {
      const double a = p * inv_freq_[static_cast<size_t>(i)];
      cos[k * half + i] = static_cast<float>(std::cos(a));
      sin[k * half + i] = static_cast<float>(std::sin(a));
    }
  }
  chunks_->owned[static_cast<size_t>(ci)] = std::move(mem);
  chunks_->bytes.fetch_add(static_cast<int64_t>(floats * sizeof(float)), std::memory_order_relaxed);
  slot.store(cos, std::memory_order_release);
  return cos;
}

const float* RopeTable::cos_row(int64_t pos) const {
  return chunk(pos) + (pos - pos_begin_) % kChunkPositions * (n_rot_ / 2);
}

const float* RopeTable::sin_row(int64_t pos) const {
  return chunk(pos) + (kChunkPositions + (pos - pos_begin_) % kChunkPositions) * (n_rot_ / 2);
}

int64_t RopeTable::resident_bytes() const {
  return chunks_ ? chunks_->bytes.load(std::memory_order_relaxed) : 0;
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
