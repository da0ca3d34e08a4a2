#include "eval/perplexity_stats.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace splash::eval {

RowSoftmax row_softmax(std::span<const float> logits) {
  SPLASH_CHECK(!logits.empty());
  RowSoftmax r;
  r.max_logit = logits[0];
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > r.max_logit) {
      r.max_logit = logits[i];
      r.argmax = static_cast<int32_t>(i);
    }
  double sum = 0;
  for (float l : logits) sum += std::exp(l - r.max_logit);
  r.log_sum = std::log(sum);
  return r;
}

double token_nll(std::span<const float> logits, int32_t target) {
  SPLASH_CHECK(target >= 0 && static_cast<size_t>(target) < logits.size());
  return -row_softmax(logits).log_prob(logits[static_cast<size_t>(target)]);
}

double PerplexityAccumulator::mean_nll() const { return count_ > 0 ? sum_ / static_cast<double>(count_) : 0.0; }

double PerplexityAccumulator::ppl() const { return std::exp(mean_nll()); }

double PerplexityAccumulator::ppl_uncertainty() const {
  if (count_ < 2) return 0.0;
  const double n = static_cast<double>(count_);
  const double mean = sum_ / n;
  const double var = sum2_ / n - mean * mean;
  if (!(var > 0)) return 0.0;
  return std::sqrt(var / (n - 1)) * ppl();
}

QuantizedHeader quantize_log_probs(std::span<const float> logits, std::span<uint16_t> codes) {
  SPLASH_CHECK(!logits.empty() && codes.size() == logits.size());
  float max_logit = logits[0], min_logit = logits[0];
  for (float l : logits) {
    max_logit = std::max(max_logit, l);
    min_logit = std::min(min_logit, l);
  }
  // Entries more than 16 below the top (p < 1.1e-7 of the top token's) share the bottom code.
  min_logit = std::max(min_logit, max_logit - 16.0f);
  double sum = 0;
  for (float l : logits) sum += std::exp(l - max_logit);
  const float log_sum = static_cast<float>(std::log(sum));
  QuantizedHeader h;
  h.min_log_prob = min_logit - max_logit - log_sum;
  h.scale = (max_logit - min_logit) / 65535.0f;
  if (h.scale == 0) {
    std::fill(codes.begin(), codes.end(), uint16_t{0});
    return h;
  }
  const float inv = 1.0f / h.scale;
  for (size_t i = 0; i < logits.size(); ++i)
    codes[i] = logits[i] > min_logit ? static_cast<uint16_t>(std::lrintf(inv * (logits[i] - min_logit))) : 0;
  return h;
}

TokenComparison compare_token(std::span<const float> logits, const QuantizedLogProbs& base, int32_t target) {
  SPLASH_CHECK(logits.size() == base.codes.size());
  SPLASH_CHECK(target >= 0 && static_cast<size_t>(target) < logits.size());
  const RowSoftmax q = row_softmax(logits);
  TokenComparison t;
  t.nll = -q.log_prob(logits[static_cast<size_t>(target)]);
  t.nll_base = -static_cast<double>(base.log_prob(target));
  double kld = 0;
  int32_t top_base = 0;
  float top_base_lp = base.log_prob(0);
  for (size_t i = 0; i < logits.size(); ++i) {
    const float lp_base = base.log_prob(static_cast<int32_t>(i));
    if (lp_base > top_base_lp) {
      top_base_lp = lp_base;
      top_base = static_cast<int32_t>(i);
    }
    if (lp_base > -16.0f) kld += std::exp(static_cast<double>(lp_base)) * (lp_base - q.log_prob(logits[i]));
  }
  t.kld = kld;
  t.same_top = q.argmax == top_base;
  t.p_diff = std::exp(-t.nll) - std::exp(-t.nll_base);
  return t;
}

MeanError mean_and_error(double sum, double sum2, int64_t count) {
  if (count < 1) return {};
  const double n = static_cast<double>(count);
  MeanError m;
  m.value = sum / n;
  const double var = sum2 / n - m.value * m.value;
  m.error = var > 0 && count > 10 ? std::sqrt(var / (n - 1)) : 0.0;
  return m;
}

double percentile_sorted(std::span<const double> sorted, double fraction) {
  SPLASH_CHECK(!sorted.empty());
  if (fraction <= 0) return sorted.front();
  if (fraction >= 1) return sorted.back();
  const double p = fraction * static_cast<double>(sorted.size() - 1);
  const size_t ip = static_cast<size_t>(p);
  const double frac = p - static_cast<double>(ip);
  return (1 - frac) * sorted[ip] + frac * sorted[std::min(ip + 1, sorted.size() - 1)];
}

void KlAccumulator::add(const TokenComparison& t) {
  sum_nll_ += t.nll;
  sum_nll2_ += t.nll * t.nll;
  sum_nll_base_ += t.nll_base;
  sum_nll_base2_ += t.nll_base * t.nll_base;
  sum_nll_nll_base_ += t.nll * t.nll_base;
  sum_kld_ += t.kld;
  sum_kld2_ += t.kld * t.kld;
  sum_p_diff2_ += t.p_diff * t.p_diff;
  n_same_top_ += t.same_top ? 1 : 0;
  klds_.push_back(t.kld);
}

double KlAccumulator::running_ppl() const {
  return klds_.empty() ? 1.0 : std::exp(sum_nll_ / static_cast<double>(klds_.size()));
}

double KlAccumulator::running_mean_kld() const {
  return klds_.empty() ? 0.0 : sum_kld_ / static_cast<double>(klds_.size());
}

double KlAccumulator::running_same_top() const {
  return klds_.empty() ? 0.0 : static_cast<double>(n_same_top_) / static_cast<double>(klds_.size());
}

KlSummary KlAccumulator::summary() const {
  KlSummary s;
  s.count = count();
  if (s.count == 0) return s;
  const double n = static_cast<double>(s.count);
  const MeanError log_ppl = mean_and_error(sum_nll_, sum_nll2_, s.count);
  const MeanError log_ppl_base = mean_and_error(sum_nll_base_, sum_nll_base2_, s.count);
  s.ppl = {std::exp(log_ppl.value), std::exp(log_ppl.value) * log_ppl.error};
  s.ppl_base = {std::exp(log_ppl_base.value), std::exp(log_ppl_base.value) * log_ppl_base.error};
  // Covariance of the two mean NLLs: the ratio's error is smaller than either PPL's, since both
  // models find the same tokens hard.
  const double cov = s.count < 10 ? 0.0 : (sum_nll_nll_base_ / n - (sum_nll_ / n) * (sum_nll_base_ / n)) / (n - 1);
  const double ratio_var = log_ppl.error * log_ppl.error + log_ppl_base.error * log_ppl_base.error - 2 * cov;
  s.log_ppl_ratio = {log_ppl.value - log_ppl_base.value, ratio_var > 0 ? std::sqrt(ratio_var) : 0.0};
  s.kld = mean_and_error(sum_kld_, sum_kld2_, s.count);
  std::vector<double> sorted = klds_;
  std::sort(sorted.begin(), sorted.end());
  s.kld_max = sorted.back();
  s.kld_min = sorted.front();
  s.kld_p999 = percentile_sorted(sorted, 0.999);
  s.kld_p99 = percentile_sorted(sorted, 0.99);
  s.kld_median = sorted.size() % 2 == 0 ? 0.5 * (sorted[sorted.size() / 2] + sorted[sorted.size() / 2 - 1])
                                        : sorted[sorted.size() / 2];
  const double top = static_cast<double>(n_same_top_) / n;
  s.same_top = {top, s.count > 1 ? std::sqrt(top * (1 - top) / (n - 1)) : 0.0};
  s.p_diff_rms = std::sqrt(sum_p_diff2_ / n);
  return s;
}

}  // namespace splash::eval
