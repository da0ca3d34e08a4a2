#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "sampling/row_kernels.h"

namespace splash {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float clean(float x) { return std::isnan(x) ? kNegInf : x; }

// a ranks before b: larger logit, then lower id.
bool ranks_before(float la, int32_t a, float lb, int32_t b) { return la > lb || (la == lb && a < b); }

}  // namespace

TokenLogprob token_logprob(std::span<const float> logits, int32_t chosen, int top_n, std::vector<float>& scratch) {
  const size_t n = logits.size();
  SPLASH_CHECK(chosen >= 0 && static_cast<size_t>(chosen) < n);
  SPLASH_CHECK(top_n >= 0 && top_n <= kMaxTopLogprobs);
  const RowStats stats = row_stats(logits);
  float max = stats.max;
  // log Z = max + log(sum exp(x - max)); a row of only -inf has no mass at all.
  double log_z = std::numeric_limits<double>::infinity();
  if (stats.bad) {
    // NaN or +inf somewhere: the scalar path, NaN read as -inf; +inf leaves no finite distribution.
    max = kNegInf;
    for (float x : logits) max = std::max(max, clean(x));
    if (std::isfinite(max)) {
      double sum = 0;
      for (float x : logits)
        if (clean(x) != kNegInf) sum += std::exp(static_cast<double>(clean(x)) - max);
      log_z = static_cast<double>(max) + std::log(sum);
    }
  } else if (max != kNegInf) {
    scratch.resize(n);
    log_z = static_cast<double>(max) + std::log(row_exp_weights(logits, max, 1.0f, scratch.data()));
  }
  auto logprob_of = [&](float x) -> float {
    const float c = clean(x);
    if (c == kNegInf || max == kNegInf || !std::isfinite(log_z)) return kNegInf;
    return static_cast<float>(static_cast<double>(c) - log_z);
  };

  TokenLogprob out;
  out.id = chosen;
  out.logprob = logprob_of(logits[static_cast<size_t>(chosen)]);
  if (top_n == 0) return out;
  // Insertion into a short sorted list: top_n <= 20, so a scan beats sorting the vocabulary. Once
  // the list is full, a block whose max is below its last entry is skipped whole (most of a row).
  const size_t k = std::min(static_cast<size_t>(top_n), n);
  std::vector<std::pair<float, int32_t>> best;  // (logit, id), best first
  best.reserve(k + 1);
  constexpr size_t kBlock = 64;
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t e = std::min(n, b + kBlock);
    if (best.size() == k) {
      float m[4] = {kNegInf, kNegInf, kNegInf, kNegInf};  // NaN never wins a comparison: ignored
      size_t i = b;
      for (; i + 4 <= e; i += 4)
        for (size_t j = 0; j < 4; ++j) m[j] = logits[i + j] > m[j] ? logits[i + j] : m[j];
      for (; i < e; ++i) m[0] = logits[i] > m[0] ? logits[i] : m[0];
      if (std::max(std::max(m[0], m[1]), std::max(m[2], m[3])) < best.back().first) continue;
    }
    for (size_t i = b; i < e; ++i) {
      const float x = clean(logits[i]);
      const int32_t id = static_cast<int32_t>(i);
      if (best.size() == k && !ranks_before(x, id, best.back().first, best.back().second)) continue;
      auto at =
          std::find_if(best.begin(), best.end(), [&](const auto& p) { return ranks_before(x, id, p.first, p.second); });
      best.insert(at, {x, id});
      if (best.size() > k) best.pop_back();
    }
  }
  out.top.reserve(best.size());
  for (const auto& [x, id] : best) out.top.push_back({id, logprob_of(x)});
  return out;
}

}  // namespace splash
