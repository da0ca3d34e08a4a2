#include "sampling/penalties.h"

namespace splash {

PenaltyHistory::PenaltyHistory(const SamplingParams& params)
    : repetition_penalty_(params.repetition_penalty),
      last_n_(params.penalty_last_n),
      presence_(params.presence_penalty),
      frequency_(params.frequency_penalty),
      active_((params.repetition_penalty != 1.0f && params.penalty_last_n != 0) ||
              params.presence_penalty != 0.0f || params.frequency_penalty != 0.0f) {}

void PenaltyHistory::push_window(int32_t token) {
  // The window is only needed by the repetition penalty; without it, keeping it would cost memory
  // proportional to the context for nothing.
  if (last_n_ == 0 || repetition_penalty_ == 1.0f) return;
  window_.push_back(token);
  ++window_counts_[token];
  if (last_n_ > 0 && window_.size() > static_cast<size_t>(last_n_)) {
    const int32_t old = window_.front();
    window_.pop_front();
    auto it = window_counts_.find(old);
    if (--it->second == 0) window_counts_.erase(it);
  }
}

void PenaltyHistory::accept_prompt(std::span<const int32_t> tokens) {
  for (int32_t t : tokens) push_window(t);
}

void PenaltyHistory::accept(int32_t token) {
  push_window(token);
  if (presence_ != 0.0f || frequency_ != 0.0f) ++generated_counts_[token];
}

void PenaltyHistory::clear() {
  window_.clear();
  window_counts_.clear();
  generated_counts_.clear();
}

int32_t PenaltyHistory::generated_count(int32_t token) const {
  auto it = generated_counts_.find(token);
  return it == generated_counts_.end() ? 0 : it->second;
}

int32_t PenaltyHistory::window_count(int32_t token) const {
  auto it = window_counts_.find(token);
  return it == window_counts_.end() ? 0 : it->second;
}

void PenaltyHistory::apply(std::span<float> logits) const {
  if (!active_) return;
  const auto in_row = [&](int32_t t) { return t >= 0 && static_cast<size_t>(t) < logits.size(); };
  // Each distinct token is touched at most once per loop, so the maps' iteration order cannot change
  // the result; every multiply/divide happens before any subtraction, as in llama.cpp.
  for (const auto& [token, count] : window_counts_) {
    (void)count;
    if (!in_row(token)) continue;
    float& l = logits[token];
    l = l > 0.0f ? l / repetition_penalty_ : l * repetition_penalty_;
  }
  for (const auto& [token, count] : generated_counts_) {
    if (!in_row(token)) continue;
    logits[token] -= presence_ + frequency_ * static_cast<float>(count);
  }
}

}  // namespace splash
