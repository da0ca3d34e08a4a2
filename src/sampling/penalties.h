// PenaltyHistory: the token history one sequence's penalties need, kept incrementally so applying
// them costs O(distinct tokens in the window), not O(context), per sampled token.
//
//   repetition_penalty (llama.cpp / HF): over the distinct tokens among the last penalty_last_n
//     tokens of prompt + output (-1 = all of them, 0 = none): logit > 0 ? logit / r : logit * r.
//   presence / frequency (OpenAI): over the tokens generated so far (accept(), not
//     accept_prompt()), no window: logit -= presence * (c > 0) + frequency * c.
// For one token the repetition penalty comes first, then the subtraction (llama.cpp's order).
// History ids outside [0, n_vocab) of the row being penalized are ignored (a model whose row is
// narrower than the tokenizer's vocabulary); they never index the row.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>

#include "sampling/sampling_params.h"

namespace splash {

class PenaltyHistory {
 public:
  explicit PenaltyHistory(const SamplingParams& params);

  // Prompt tokens: they count for the repetition penalty only.
  void accept_prompt(std::span<const int32_t> tokens);
  // A generated token: counts for all three penalties.
  void accept(int32_t token);
  void clear();

  // True when some penalty is on; apply() is then a no-op otherwise.
  bool active() const { return active_; }
  // Penalizes `logits` [n_vocab] in place.
  void apply(std::span<float> logits) const;

  // Number of times `token` was generated (the c of the OpenAI formula).
  int32_t generated_count(int32_t token) const;
  // Number of times `token` occurs in the repetition window (kept only while the repetition
  // penalty is on, so 0 otherwise).
  int32_t window_count(int32_t token) const;

 private:
  void push_window(int32_t token);

  float repetition_penalty_;
  int32_t last_n_;  // -1 = unbounded
  float presence_;
  float frequency_;
  bool active_;
  std::deque<int32_t> window_;                         // [<= last_n] oldest first
  std::unordered_map<int32_t, int32_t> window_counts_;  // token -> occurrences in window_
  std::unordered_map<int32_t, int32_t> generated_counts_;
};

}  // namespace splash
