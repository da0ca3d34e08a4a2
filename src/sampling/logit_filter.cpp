#include "sampling/logit_filter.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace splash {
namespace {

// Histogram over [max - kHistogramRange, max]; everything lower lands in bucket 0. 2048 buckets of
// 1/32 logit each separate the head of a real LLM distribution finely, so the pool stays small.
constexpr int kHistogramBuckets = 2048;
constexpr float kHistogramRange = 64.0f;

struct RowScan {
  float max = -std::numeric_limits<float>::infinity();
  int32_t argmax = -1;    // lowest id among the maxima
  size_t n_finite = 0;    // logits that are not -inf
};

Result<RowScan> scan_row(std::span<const float> logits) {
  if (logits.empty()) return make_error("sampling: the logits row is empty");
  RowScan s;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float l = logits[i];
    if (std::isnan(l)) return make_error("sampling: logit of token ", i, " is NaN");
    if (l == std::numeric_limits<float>::infinity()) {
      return make_error("sampling: logit of token ", i, " is +inf");
    }
    if (l == -std::numeric_limits<float>::infinity()) continue;
    ++s.n_finite;
    if (l > s.max) {  // strict: the first (lowest) id of a tie keeps the argmax
      s.max = l;
      s.argmax = static_cast<int32_t>(i);
    }
  }
  if (s.n_finite == 0) {
    return make_error("sampling: every logit of the ", logits.size(),
                      "-token row is -inf; no token can be sampled");
  }
  return s;
}

// Monotone (non-decreasing) in l, so {i : bucket(l_i) >= b} is always a prefix of the descending
// order, ties included. The same expression is used to build the histogram and to collect the pool.
struct Bucketer {
  float lo;
  float scale;
  int bucket(float l) const {
    const float x = (l - lo) * scale;
    if (!(x > 0.0f)) return 0;
    if (x >= static_cast<float>(kHistogramBuckets - 1)) return kHistogramBuckets - 1;
    return static_cast<int>(x);
  }
};

// exp(l - max) at temperature 1, the weight top_p works on. Float exp (as every weight here), summed
// in double; the histogram pass and the exact pass must use this same function.
double unit_weight(float l, float max) { return static_cast<double>(std::exp(l - max)); }

bool by_logit_desc(const FilterScratch::Candidate& a, const FilterScratch::Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Survivors -> probabilities at the given temperature, ascending id order.
void finish(std::span<const FilterScratch::Candidate> kept, float max, float temperature,
            std::vector<TokenProb>& out) {
  out.resize(kept.size());
  double total = 0.0;
  for (size_t i = 0; i < kept.size(); ++i) {
    const float w = std::exp((kept[i].logit - max) / temperature);
    out[i] = TokenProb{kept[i].id, w};
    total += w;
  }
  // total >= 1: the max logit survives every filter and has weight exp(0) = 1.
  const double inv = 1.0 / total;
  for (auto& tp : out) tp.p = static_cast<float>(tp.p * inv);
  std::sort(out.begin(), out.end(), [](const TokenProb& a, const TokenProb& b) { return a.id < b.id; });
}

}  // namespace

Status filter_logits(std::span<const float> logits, const SamplingParams& params,
                     FilterScratch& scratch, std::vector<TokenProb>& out) {
  SPLASH_TRY(const RowScan s, scan_row(logits));
  out.clear();
  if (params.is_greedy()) {
    out.push_back(TokenProb{s.argmax, 1.0f});
    return {};
  }

  const bool use_top_k = params.top_k > 0 && static_cast<size_t>(params.top_k) < s.n_finite;
  const bool use_top_p = params.top_p < 1.0f;
  const bool use_min_p = params.min_p > 0.0f;
  const size_t n = logits.size();
  auto& pool = scratch.pool;
  pool.clear();

  if (!use_top_k && !use_top_p && !use_min_p) {
    // Plain softmax over every finite logit, already in id order.
    out.reserve(s.n_finite);
    double total = 0.0;
    for (size_t i = 0; i < n; ++i) {
      if (logits[i] == -std::numeric_limits<float>::infinity()) continue;
      const float w = std::exp((logits[i] - s.max) / params.temperature);
      out.push_back(TokenProb{static_cast<int32_t>(i), w});
      total += w;
    }
    const double inv = 1.0 / total;
    for (auto& tp : out) tp.p = static_cast<float>(tp.p * inv);
    return {};
  }

  // min_p's rule, in one place: logit - max >= ln(min_p), evaluated in double.
  const double min_p_log = use_min_p ? std::log(static_cast<double>(params.min_p)) : 0.0;
  auto passes_min_p = [&](float l) { return static_cast<double>(l) - s.max >= min_p_log; };

  // --- pool: a prefix of the descending order that contains every survivor
  double z_all = 0.0;  // sum of exp(l - max) over all finite logits, for top_p without top_k
  if (use_top_k || use_top_p) {
    const Bucketer bk{s.max - kHistogramRange, kHistogramBuckets / kHistogramRange};
    scratch.counts.assign(kHistogramBuckets, 0);
    const bool need_mass = use_top_p && !use_top_k;
    if (need_mass) scratch.mass.assign(kHistogramBuckets, 0.0);
    for (size_t i = 0; i < n; ++i) {
      const float l = logits[i];
      if (l == -std::numeric_limits<float>::infinity()) continue;
      const int b = bk.bucket(l);
      ++scratch.counts[b];
      if (need_mass) {
        const double w = unit_weight(l, s.max);
        scratch.mass[b] += w;
        z_all += w;
      }
    }
    int cut = 0;  // lowest bucket of the pool
    if (use_top_k) {
      size_t cum = 0;
      for (cut = kHistogramBuckets - 1; cut > 0; --cut) {
        cum += scratch.counts[cut];
        if (cum >= static_cast<size_t>(params.top_k)) break;
      }
    } else {
      const double target = static_cast<double>(params.top_p) * z_all;
      double cum = 0.0;
      for (cut = kHistogramBuckets - 1; cut > 0; --cut) {
        cum += scratch.mass[cut];
        if (cum >= target) break;
      }
      // One more non-empty bucket, so summation-order rounding in the exact pass below can never
      // need a token outside the pool.
      if (cut > 0) {
        --cut;
        while (cut > 0 && scratch.counts[cut] == 0) --cut;
      }
    }
    for (size_t i = 0; i < n; ++i) {
      const float l = logits[i];
      if (l == -std::numeric_limits<float>::infinity() || bk.bucket(l) < cut) continue;
      pool.push_back({l, static_cast<int32_t>(i)});
    }
  } else {
    // min_p alone: its threshold is exact, collect survivors directly.
    for (size_t i = 0; i < n; ++i) {
      const float l = logits[i];
      if (l != -std::numeric_limits<float>::infinity() && passes_min_p(l)) {
        pool.push_back({l, static_cast<int32_t>(i)});
      }
    }
  }
  // min_p alone needs no order: every pool member survives.
  if (use_top_k || use_top_p) std::sort(pool.begin(), pool.end(), by_logit_desc);

  // --- exact filters on the sorted pool, each keeping a prefix
  size_t m = pool.size();
  if (use_top_k) m = std::min(m, static_cast<size_t>(params.top_k));
  if (use_top_p) {
    double z = z_all;
    if (use_top_k) {
      z = 0.0;
      for (size_t i = 0; i < m; ++i) z += unit_weight(pool[i].logit, s.max);
    }
    const double target = static_cast<double>(params.top_p) * z;
    double cum = 0.0;
    for (size_t i = 0; i < m; ++i) {
      cum += unit_weight(pool[i].logit, s.max);
      if (cum >= target) {
        m = i + 1;
        break;
      }
    }
  }
  if (use_min_p) {
    size_t keep = 0;
    while (keep < m && passes_min_p(pool[keep].logit)) ++keep;
    m = keep;
  }
  SPLASH_CHECK(m >= 1);  // the maximum passes every rule
  finish(std::span(pool).first(m), s.max, params.temperature, out);
  return {};
}

int32_t draw_token(std::span<const TokenProb> dist, Rng& rng) {
  SPLASH_CHECK(!dist.empty());
  double total = 0.0;
  for (const auto& tp : dist) total += tp.p;
  const double u = rng.uniform() * total;
  double cum = 0.0;
  int32_t last_positive = dist.front().id;
  for (const auto& tp : dist) {
    if (tp.p <= 0.0f) continue;
    cum += tp.p;
    last_positive = tp.id;
    if (u < cum) return tp.id;
  }
  // Only when rounding puts u at the very top of the range.
  return last_positive;
}

}  // namespace splash
