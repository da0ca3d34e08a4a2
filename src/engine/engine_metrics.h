// Latency statistics for the engine's /status metrics: a bounded window of the most recent samples
// (TTFT, inter-token latency) and its percentiles.
//
// Not thread-safe: the engine guards its windows with its status mutex.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace splash {

struct LatencySummary {
  double p50 = 0, p95 = 0;  // ms; 0 when there are no samples
  int64_t samples = 0;      // samples the percentiles were taken over (at most the window size)
};

// Percentile q in [0, 100] of `values` with linear interpolation between the two nearest ranks
// (numpy's default "linear" method): rank = q / 100 * (n - 1). 0 for an empty input. The span is
// reordered (partial sort).
double percentile(std::span<double> values, double q);

// The last `capacity` samples, oldest overwritten first.
class LatencyWindow {
 public:
  explicit LatencyWindow(size_t capacity = 1024);

  void add(double ms);
  size_t size() const { return filled_; }
  size_t capacity() const { return ring_.size(); }
  int64_t total_added() const { return total_; }
  LatencySummary summary() const;  // p50, p95 over the window

 private:
  std::vector<double> ring_;  // [capacity]
  size_t next_ = 0;           // slot the next sample goes to
  size_t filled_ = 0;
  int64_t total_ = 0;
};

}  // namespace splash
