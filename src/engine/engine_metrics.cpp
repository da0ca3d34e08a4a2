#include "engine/engine_metrics.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace splash {

double percentile(std::span<double> values, double q) {
  if (values.empty()) return 0;
  q = std::clamp(q, 0.0, 100.0);
  const double rank = q / 100.0 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(lo), values.end());
  const double v_lo = values[lo];
  if (hi == lo) return v_lo;
  // After nth_element everything past lo is >= v_lo, so the next rank is the minimum of that part.
  const double v_hi = *std::min_element(values.begin() + static_cast<std::ptrdiff_t>(hi), values.end());
  return v_lo + (v_hi - v_lo) * (rank - static_cast<double>(lo));
}

LatencyWindow::LatencyWindow(size_t capacity) : ring_(capacity) { SPLASH_CHECK(capacity > 0); }

void LatencyWindow::add(double ms) {
  ring_[next_] = ms;
  next_ = (next_ + 1) % ring_.size();
  filled_ = std::min(filled_ + 1, ring_.size());
  ++total_;
}

LatencySummary LatencyWindow::summary() const {
  LatencySummary s;
  s.samples = static_cast<int64_t>(filled_);
  if (filled_ == 0) return s;
  std::vector<double> v(ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(filled_));
  s.p50 = percentile(v, 50);
  s.p95 = percentile(v, 95);
  return s;
}

}  // namespace splash
