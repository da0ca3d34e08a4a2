#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace splash {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float clean(float x) { return std::isnan(x) ? kNegInf : x; }

// a ranks before b: larger logit, then lower id.
bool ranks_before(float la, int32_t a, float lb, int32_t b) { return la > lb || (la == lb && a < b); }

}  // namespace

TokenLogprob token_logprob(std::span<const float> logits, int32_t chosen, int top_n) {
  const size_t n = logits.size();
  SPLASH_CHECK(chosen >= 0 && static_cast<size_t>(chosen) < n);
  SPLASH_CHECK(top_n >= 0 && top_n <= kMaxTopLogprobs);
  float max = kNegInf;
  for (float x : logits) max = std::max(max, clean(x));
  // log Z = max + log(sum exp(x - max)); a row of only -inf has no mass at all.
  double log_z = std::numeric_limits<double>::infinity();
  if (max != kNegInf) {
    double sum = 0;
    for (float x : logits) {
      const float c = clean(x);
      if (c != kNegInf) sum += std::exp(static_cast<double>(c) - max);
    }
    log_z = static_cast<double>(max) + std::log(sum);
  }
  auto logprob_of = [&](float x) -> float {
    const float c = clean(x);
    if (c == kNegInf || max == kNegInf) return kNegInf;
    return static_cast<float>(static_cast<double>(c) - log_z);
  };

  TokenLogprob out;
  out.id = chosen;
  out.logprob = logprob_of(logits[static_cast<size_t>(chosen)]);
  if (top_n == 0) return out;
  // Insertion into a short sorted list: top_n <= 20, so a scan beats sorting the vocabulary.
  const size_t k = std::min(static_cast<size_t>(top_n), n);
  std::vector<std::pair<float, int32_t>> best;  // (logit, id), best first
  best.reserve(k + 1);
  for (size_t i = 0; i < n; ++i) {
    const float x = clean(logits[i]);
    const int32_t id = static_cast<int32_t>(i);
    if (best.size() == k && !ranks_before(x, id, best.back().first, best.back().second)) continue;
    auto at = std::find_if(best.begin(), best.end(), [&](const auto& e) { return ranks_before(x, id, e.first, e.second); });
    best.insert(at, {x, id});
    if (best.size() > k) best.pop_back();
  }
  out.top.reserve(best.size());
  for (const auto& [x, id] : best) out.top.push_back({id, logprob_of(x)});
  return out;
}

}  // namespace splash
