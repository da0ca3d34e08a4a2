// The statistics of `splash perplexity`, as llama.cpp's llama-perplexity computes them: the negative
// log-likelihood of a token under one row of logits, the running perplexity and its uncertainty, and
// the KL-divergence figures of a model against a base model's saved log-probabilities. Pure math on
// spans, no model and no I/O, so each formula is unit-tested alone.
//
// Method (llama-perplexity, tools/perplexity): the text is cut into windows of n_ctx tokens; in each
// window only the second half is scored (the logits at positions [n_ctx/2, n_ctx - 1) predict the
// tokens after them), so every scored token has at least n_ctx/2 tokens of context.
//   PPL = exp(mean NLL), uncertainty = PPL * sqrt((mean(NLL^2) - mean(NLL)^2) / (count - 1)).
// Thread-safety: plain values; no shared state.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace splash::eval {

// log-sum-exp of a logits row, as llama.cpp forms it: max in f32, exp of (logit - max) in f32, summed
// in f64. nll = max + log(sum) - logit[target].
struct RowSoftmax {
  float max_logit = 0;
  int32_t argmax = 0;  // the first index holding max_logit
  double log_sum = 0;  // log(sum exp(logit - max_logit))
  double log_prob(float logit) const { return static_cast<double>(logit) - max_logit - log_sum; }
};
RowSoftmax row_softmax(std::span<const float> logits);

// -log p(target) under `logits`.
double token_nll(std::span<const float> logits, int32_t target);

// Sum and sum of squares of NLLs: the running perplexity after each chunk and the final estimate.
class PerplexityAccumulator {
 public:
  void add(double nll) {
    sum_ += nll;
    sum2_ += nll * nll;
    ++count_;
  }
  int64_t count() const { return count_; }
  double mean_nll() const;
  double ppl() const;  // exp(mean NLL); 1 when nothing was added
  // llama.cpp's "+/-": PPL times the standard error of the mean NLL; 0 with fewer than two tokens or
  // a non-positive variance estimate.
  double ppl_uncertainty() const;

 private:
  double sum_ = 0, sum2_ = 0;
  int64_t count_ = 0;
};

// A saved base row: the log-probabilities of the whole vocabulary quantized to 16 bits over
// [min_log_prob, min_log_prob + 65535 * scale], where min_log_prob is at most 16 below the row's
// largest log-probability (llama.cpp's --kl-divergence-base encoding). Values at the bottom code
// (log-prob <= min_log_prob) are treated as "below the floor" and skipped by the KL sum.
struct QuantizedLogProbs {
  float scale = 0;
  float min_log_prob = 0;
  std::span<const uint16_t> codes;  // [n_vocab]
  float log_prob(int32_t i) const { return scale * codes[static_cast<size_t>(i)] + min_log_prob; }
};

// Encodes the log-softmax of `logits` into `codes` ([n_vocab]); returns {scale, min_log_prob}.
struct QuantizedHeader {
  float scale = 0;
  float min_log_prob = 0;
};
QuantizedHeader quantize_log_probs(std::span<const float> logits, std::span<uint16_t> codes);

// One scored token of the KL-divergence mode.
struct TokenComparison {
  double nll = 0;         // -log q(target), the model being tested
  double nll_base = 0;    // -log p(target), the base
  double kld = 0;         // KL(p || q) = sum_i p_i (log p_i - log q_i), over the base's entries above -16
  bool same_top = false;  // argmax q == argmax p
  double p_diff = 0;      // q(target) - p(target)
};
TokenComparison compare_token(std::span<const float> logits, const QuantizedLogProbs& base, int32_t target);

// Value and standard error of a mean from sum and sum of squares (llama.cpp: 0 error for count <= 10).
struct MeanError {
  double value = 0;
  double error = 0;
};
MeanError mean_and_error(double sum, double sum2, int64_t count);

// The linear-interpolated percentile llama.cpp prints (fraction in [0, 1]) of sorted values.
double percentile_sorted(std::span<const double> sorted, double fraction);

struct KlSummary {
  int64_t count = 0;
  MeanError ppl, ppl_base;  // exp(mean NLL) and PPL * error of the mean NLL
  MeanError log_ppl_ratio;  // mean ln(PPL / PPL_base), error with the covariance of the two NLLs
  MeanError kld;            // mean KLD
  double kld_max = 0, kld_p999 = 0, kld_p99 = 0, kld_median = 0, kld_min = 0;
  MeanError same_top;     // fraction of tokens whose top-1 agrees, binomial error
  double p_diff_rms = 0;  // root mean square of q(target) - p(target)
};

// Accumulates TokenComparisons (in scoring order) and summarizes them.
class KlAccumulator {
 public:
  void add(const TokenComparison& t);
  int64_t count() const { return static_cast<int64_t>(klds_.size()); }
  KlSummary summary() const;
  double running_ppl() const;
  double running_mean_kld() const;
  double running_same_top() const;

 private:
  double sum_nll_ = 0, sum_nll2_ = 0, sum_nll_base_ = 0, sum_nll_base2_ = 0, sum_nll_nll_base_ = 0;
  double sum_kld_ = 0, sum_kld2_ = 0, sum_p_diff2_ = 0;
  int64_t n_same_top_ = 0;
  std::vector<double> klds_;
};

}  // namespace splash::eval
