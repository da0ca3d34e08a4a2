// Helpers shared by the sampling tests: a plain reference of the documented filter chain (full sort,
// no histogram, no pool) and deterministic logits rows.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "sampling/fast_exp.h"
#include "sampling/sampling_params.h"

namespace splash::testing {

struct RefProb {
  int32_t id;
  double p;
};

// The chain exactly as logit_filter.h states it, written the slow obvious way. -inf logits are
// dropped first. Cut weights use exp_nonpositive, the documented weight function (tested against
// std::exp on its own), so cut decisions agree to the bit; sums and probabilities are in double.
inline std::vector<RefProb> reference_filter(const std::vector<float>& logits, const SamplingParams& p) {
  std::vector<int32_t> order;
  for (int32_t i = 0; i < static_cast<int32_t>(logits.size()); ++i) {
    if (logits[i] != -INFINITY) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  const float mx = logits[order[0]];
  if (p.temperature == 0.0f) return {{order[0], 1.0}};
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < order.size()) order.resize(p.top_k);
  auto w1 = [&](int32_t i) { return static_cast<double>(exp_nonpositive(logits[i] - mx)); };
  if (p.top_p < 1.0f) {
    double z = 0.0;
    for (int32_t i : order) z += w1(i);
    double cum = 0.0;
    for (size_t j = 0; j < order.size(); ++j) {
      cum += w1(order[j]);
      if (cum >= static_cast<double>(p.top_p) * z) {
        order.resize(j + 1);
        break;
      }
    }
  }
  if (p.min_p > 0.0f) {
    const double thr = std::log(static_cast<double>(p.min_p));
    std::erase_if(order, [&](int32_t i) { return static_cast<double>(logits[i]) - mx < thr; });
  }
  std::sort(order.begin(), order.end());
  std::vector<RefProb> out;
  double total = 0.0;
  for (int32_t i : order) {
    const double w = std::exp(static_cast<double>(logits[i] - mx) / p.temperature);
    out.push_back({i, w});
    total += w;
  }
  for (auto& r : out) r.p /= total;
  return out;
}

// Normal(0, sigma) logits from a fixed mt19937 stream (Box-Muller done here, since
// std::normal_distribution differs between standard libraries).
inline std::vector<float> normal_logits(size_t n, uint32_t seed, double sigma) {
  std::mt19937 gen(seed);
  auto u01 = [&] { return (static_cast<double>(gen()) + 0.5) / 4294967296.0; };
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    const double r = std::sqrt(-2.0 * std::log(u01()));
    out[i] = static_cast<float>(sigma * r * std::cos(6.283185307179586 * u01()));
  }
  return out;
}

}  // namespace splash::testing
