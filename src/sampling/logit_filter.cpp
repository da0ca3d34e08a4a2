// No a * b + c fusion in the inlined exp_nonpositive: same bits with and without FMA hardware.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "sampling/logit_filter.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "sampling/fast_exp.h"
#include "sampling/row_kernels.h"

namespace splash {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kPosInf = std::numeric_limits<float>::infinity();
// Histogram for top_p's cut: only the one bucket holding the cut is sorted.
constexpr int kBuckets = 1024;

using Candidate = FilterScratch::Candidate;
typedef float v4f __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));

struct RowScan {
  float max = kNegInf;
  size_t n_finite = 0;  // logits that are not -inf
};

Result<RowScan> scan_row(std::span<const float> logits) {
  const size_t n = logits.size();
  if (n == 0) return make_error("sampling: the logits row is empty");
  const RowStats st = row_stats(logits);
  if (st.bad) {
    for (size_t k = 0; k < n; ++k) {
      if (std::isnan(logits[k])) return make_error("sampling: logit of token ", k, " is NaN");
      if (logits[k] == kPosInf) return make_error("sampling: logit of token ", k, " is +inf");
    }
  }
  if (st.n_finite == 0) {
    return make_error("sampling: every logit of the ", n, "-token row is -inf; no token can be sampled");
  }
  RowScan s;
  s.n_finite = st.n_finite;
  s.max = st.max;
  return s;
}

// weights[i] = exp((logits[i] - max) / temperature) for the whole row; returns their sum.
double fill_weights(std::span<const float> logits, float max, float temperature, std::vector<float>& weights) {
  weights.resize(logits.size());
  return row_exp_weights(logits, max, temperature, weights.data());
}

bool by_logit_desc(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// pool = {(l, i) : l >= lo} in id order. Branch-free inside a block (write always, advance on a
// hit): a third of a row can pass, and a mispredicted branch per token costs more than the pass.
// Blocks of 8 with no hit (the common case for a tight bound) are skipped with one vector test.
void collect_at_least(std::span<const float> logits, float lo, std::vector<Candidate>& pool) {
  const size_t n = logits.size();
  pool.resize(n);
  size_t k = 0;
  size_t i = 0;
  const v4f t = {lo, lo, lo, lo};
  for (; i + 8 <= n; i += 8) {
    v4f a, b;
    std::memcpy(&a, logits.data() + i, sizeof(a));
    std::memcpy(&b, logits.data() + i + 4, sizeof(b));
    const v4i hit = (a >= t) | (b >= t);
    if ((hit[0] | hit[1] | hit[2] | hit[3]) == 0) continue;
    for (size_t j = i; j < i + 8; ++j) {
      pool[k] = Candidate{logits[j], static_cast<int32_t>(j)};
      k += logits[j] >= lo;
    }
  }
  for (; i < n; ++i) {
    pool[k] = Candidate{logits[i], static_cast<int32_t>(i)};
    k += logits[i] >= lo;
  }
  pool.resize(k);
}

// The k best (logit desc, id asc) of the row, unordered. Streams once, buffering every logit above
// the k-th best seen so far; the buffer is cut back to k when it fills. A later logit equal to that
// threshold has a higher id than every tied buffered one, so it can never enter: `>` is exact.
void stream_top_k(std::span<const float> logits, size_t k, std::vector<Candidate>& pool) {
  const size_t cap = std::max(2 * k, k + 1024);
  pool.clear();
  pool.reserve(cap);
  float threshold = kNegInf;
  auto consider = [&](size_t i) {
    const float l = logits[i];
    if (!(l > threshold)) return;
    pool.push_back({l, static_cast<int32_t>(i)});
    if (pool.size() == cap) {
      std::nth_element(pool.begin(), pool.begin() + (k - 1), pool.end(), by_logit_desc);
      pool.resize(k);
      threshold = pool[k - 1].logit;
    }
  };
  // Once the threshold has risen, almost every block of 8 is below it: test the block at once.
  const size_t n = logits.size();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    v4f a, b;
    std::memcpy(&a, logits.data() + i, sizeof(a));
    std::memcpy(&b, logits.data() + i + 4, sizeof(b));
    const v4f t = {threshold, threshold, threshold, threshold};
    const v4i hit = (a > t) | (b > t);
    if ((hit[0] | hit[1] | hit[2] | hit[3]) == 0) continue;
    for (size_t j = i; j < i + 8; ++j) consider(j);
  }
  for (; i < n; ++i) consider(i);
  if (pool.size() > k) {
    std::nth_element(pool.begin(), pool.begin() + (k - 1), pool.end(), by_logit_desc);
    pool.resize(k);
  }
}

// top_p over the whole row (top_k off). `weights` holds exp(l - max), `z` their sum. Leaves in `pool`
// the shortest prefix of the descending order whose weight reaches top_p * z, intersected with
// {l >= floor_logit} (min_p's bound; min_p itself is applied exactly afterwards).
void top_p_cut(std::span<const float> logits, const RowScan& s, float top_p, double z, float floor_logit,
               FilterScratch& scratch) {
  auto& pool = scratch.pool;
  const std::vector<float>& w = scratch.weights;
  const double target = static_cast<double>(top_p) * z;
  // Every token below t together weighs at most n * exp(t - max); choosing that equal to
  // (1 - top_p) * z (less a margin for rounding) means the cut can never fall below t.
  float lo = static_cast<float>(s.max + std::log((1.0 - top_p) * z / static_cast<double>(s.n_finite))) - 0.01f;
  lo = std::max(lo, floor_logit);
  collect_at_least(logits, lo, pool);
  lo = std::max(lo, s.max - 64.0f);  // the histogram range; lower entries share bucket 0
  const float scale = s.max > lo ? static_cast<float>(kBuckets) / (s.max - lo) : 0.0f;
  auto& bucket = scratch.bucket;
  auto& mass = scratch.mass;
  bucket.resize(pool.size());
  mass.assign(kBuckets, 0.0);
  for (size_t i = 0; i < pool.size(); ++i) {
    const float x = (pool[i].logit - lo) * scale;  // monotone in the logit: ties share a bucket
    const int b = !(x > 0.0f) ? 0 : (x >= kBuckets - 1 ? kBuckets - 1 : static_cast<int>(x));
    bucket[i] = static_cast<uint16_t>(b);
    mass[b] += w[pool[i].id];
  }
  double cum = 0.0;
  int cut = kBuckets - 1;
  for (; cut >= 0; --cut) {
    if (cum + mass[cut] >= target) break;
    cum += mass[cut];
  }
  if (cut < 0) return;  // the whole pool (only when min_p's bound ends it before top_p's cut)
  auto& boundary = scratch.boundary;
  boundary.clear();
  for (size_t i = 0; i < pool.size(); ++i) {
    if (bucket[i] == cut) boundary.push_back(pool[i]);
  }
  std::sort(boundary.begin(), boundary.end(), by_logit_desc);
  Candidate edge = boundary.back();  // the last token kept: the one whose weight crosses the target
  for (const auto& c : boundary) {
    cum += w[c.id];
    if (cum >= target) {
      edge = c;
      break;
    }
  }
  // Keep everything above the cut bucket and, inside it, what ranks at or above the edge; filtering
  // in place keeps the pool in id order.
  size_t kept = 0;
  for (size_t i = 0; i < pool.size(); ++i) {
    if (bucket[i] > cut || (bucket[i] == cut && !by_logit_desc(edge, pool[i]))) pool[kept++] = pool[i];
  }
  pool.resize(kept);
}

// Survivors -> probabilities at the given temperature, ascending id order.
void finish(std::span<const Candidate> kept, float max, float temperature, std::vector<TokenProb>& out) {
  out.resize(kept.size());
  double total = 0.0;
  for (size_t i = 0; i < kept.size(); ++i) {
    const float w = exp_nonpositive((kept[i].logit - max) / temperature);
    out[i] = TokenProb{kept[i].id, w};
    total += w;
  }
  // total >= 1: the max logit survives every filter and has weight exp(0) = 1.
  const double inv = 1.0 / total;
  for (auto& tp : out) tp.p = static_cast<float>(tp.p * inv);
  auto by_id = [](const TokenProb& a, const TokenProb& b) { return a.id < b.id; };
  if (!std::is_sorted(out.begin(), out.end(), by_id)) std::sort(out.begin(), out.end(), by_id);
}

}  // namespace

Status filter_logits(std::span<const float> logits, const SamplingParams& params, FilterScratch& scratch,
                     std::vector<TokenProb>& out) {
  SPLASH_TRY(const RowScan s, scan_row(logits));
  out.clear();
  if (params.is_greedy()) {
    // The first occurrence of the max: the lowest id wins a tie.
    const auto argmax = std::find(logits.begin(), logits.end(), s.max) - logits.begin();
    out.push_back(TokenProb{static_cast<int32_t>(argmax), 1.0f});
    return {};
  }

  const bool use_top_k = params.top_k > 0 && static_cast<size_t>(params.top_k) < s.n_finite;
  const bool use_top_p = params.top_p < 1.0f;
  const bool use_min_p = params.min_p > 0.0f;
  const size_t n = logits.size();
  auto& pool = scratch.pool;

  if (!use_top_k && !use_top_p && !use_min_p) {
    // Plain softmax over every finite logit, already in id order.
    const double inv = 1.0 / fill_weights(logits, s.max, params.temperature, scratch.weights);
    out.resize(n);
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) {  // branch-free skip of -inf
      out[k] = TokenProb{static_cast<int32_t>(i), static_cast<float>(scratch.weights[i] * inv)};
      k += logits[i] != kNegInf;
    }
    out.resize(k);
    return {};
  }

  // min_p's rule, in one place: logit - max >= ln(min_p), evaluated in double. Its float bound,
  // loosened slightly, prunes the candidate pools; the exact rule runs last.
  const double min_p_log = use_min_p ? std::log(static_cast<double>(params.min_p)) : 0.0;
  auto passes_min_p = [&](float l) { return static_cast<double>(l) - s.max >= min_p_log; };
  const float floor_logit = use_min_p ? static_cast<float>(s.max + min_p_log) - 0.01f : kNegInf;

  if (use_top_k) {
    stream_top_k(logits, static_cast<size_t>(params.top_k), pool);
    std::sort(pool.begin(), pool.end(), by_logit_desc);
    if (use_top_p) {
      double z = 0.0;
      for (const auto& c : pool) z += exp_nonpositive(c.logit - s.max);
      const double target = static_cast<double>(params.top_p) * z;
      double cum = 0.0;
      for (size_t i = 0; i < pool.size(); ++i) {
        cum += exp_nonpositive(pool[i].logit - s.max);
        if (cum >= target) {
          pool.resize(i + 1);
          break;
        }
      }
    }
  } else if (use_top_p) {
    const double z = fill_weights(logits, s.max, 1.0f, scratch.weights);
    top_p_cut(logits, s, params.top_p, z, floor_logit, scratch);
  } else {
    collect_at_least(logits, floor_logit, pool);
  }
  // Every rule keeps an upper set of the logits, so min_p can filter the (unordered) survivors.
  if (use_min_p) std::erase_if(pool, [&](const Candidate& c) { return !passes_min_p(c.logit); });
  SPLASH_CHECK(!pool.empty());  // the maximum passes every rule
  finish(pool, s.max, params.temperature, out);
  return {};
}

int32_t draw_token(std::span<const TokenProb> dist, Rng& rng) {
  SPLASH_CHECK(!dist.empty());
  // Cumulative sums in blocks: total = sum of block sums (each over 4 fixed lanes), the draw first
  // finds the block, then walks inside it. Same arithmetic for every caller and machine; a serial
  // double sum over 150K entries would cost more than the whole filter chain.
  constexpr size_t kBlock = 256;
  const size_t n = dist.size();
  const size_t n_blocks = (n + kBlock - 1) / kBlock;
  auto block_sum = [&](size_t b) {
    double acc[4] = {0.0, 0.0, 0.0, 0.0};
    const size_t end = std::min(n, (b + 1) * kBlock);
    size_t i = b * kBlock;
    for (; i + 4 <= end; i += 4) {
      for (size_t j = 0; j < 4; ++j) acc[j] += dist[i + j].p;
    }
    for (; i < end; ++i) acc[0] += dist[i].p;
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
  };
  double total = 0.0;
  for (size_t b = 0; b < n_blocks; ++b) total += block_sum(b);
  const double u = rng.uniform() * total;
  double cum = 0.0;
  size_t b = 0;
  for (; b + 1 < n_blocks; ++b) {
    const double s = block_sum(b);
    if (u < cum + s) break;
    cum += s;
  }
  // Inside the block. A token with p == 0 is never returned; if rounding carries u past the block's
  // last token, the last positive one is taken.
  int32_t last_positive = -1;
  for (size_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) {
    if (dist[i].p <= 0.0f) continue;
    cum += dist[i].p;
    last_positive = dist[i].id;
    if (u < cum) return dist[i].id;
  }
  if (last_positive >= 0) return last_positive;
  for (size_t i = n; i-- > 0;) {
    if (dist[i].p > 0.0f) return dist[i].id;
  }
  return dist.back().id;  // all zero: impossible for filter_logits output (the max has p > 0)
}

}  // namespace splash
