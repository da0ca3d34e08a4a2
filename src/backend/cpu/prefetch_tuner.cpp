#include "backend/cpu/prefetch_tuner.h"

#include <algorithm>
#include <cstdlib>

namespace splash::cpu {

PrefetchTuner::PrefetchTuner(int64_t start_bytes) {
  for (int i = 1; i < kSteps; ++i)
    if (std::llabs(kLadder[i] - start_bytes) < std::llabs(kLadder[current_] - start_bytes)) current_ = i;
}

PrefetchTuner::Ticket PrefetchTuner::begin(int64_t product_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  Ticket t;
  t.bytes = kLadder[current_];
  if (product_bytes < kMinTimedBytes || product_bytes > kMaxTimedBytes) return t;
  if (!trying_) {
    if (hold_ > 0) {
      --hold_;
      return t;
    }
    start_round();
  }
  t.slot = next_;
  t.bytes = kLadder[steps_[next_]];
  t.round = round_;
  next_ = (next_ + 1) % n_steps_;
  return t;
}

void PrefetchTuner::end(const Ticket& ticket, int64_t product_bytes, int64_t ns) {
  if (ticket.slot < 0 || ns <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!trying_ || ticket.round != round_ || ticket.slot >= n_steps_) return;
  int& n = samples_[ticket.slot];
  if (n >= kSamplesPerStep) return;  // this step has its samples; the others are still coming
  rates_[ticket.slot][n++] = static_cast<double>(product_bytes) / static_cast<double>(ns);
  for (int k = 0; k < n_steps_; ++k)
    if (samples_[k] < kSamplesPerStep) return;
  finish_round();
}

int64_t PrefetchTuner::current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kLadder[current_];
}

int64_t PrefetchTuner::rounds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rounds_done_;
}

int64_t PrefetchTuner::moves() const {
  std::lock_guard<std::mutex> lock(mu_);
  return moves_;
}

void PrefetchTuner::start_round() {
  n_steps_ = 0;
  for (int i = current_ - 1; i <= current_ + 1; ++i) {
    if (i < 0 || i >= kSteps) continue;
    steps_[n_steps_] = i;
    samples_[n_steps_] = 0;
    ++n_steps_;
  }
  next_ = 0;
  ++round_;
  trying_ = true;
}

void PrefetchTuner::finish_round() {
  int here = 0, best = 0;
  double rate[3];
  for (int k = 0; k < n_steps_; ++k) {
    double* r = rates_[k];
    std::sort(r, r + kSamplesPerStep);
    double sum = 0;
    for (int i = kTrim; i < kSamplesPerStep - kTrim; ++i) sum += r[i];
    rate[k] = sum / (kSamplesPerStep - 2 * kTrim);
    if (steps_[k] == current_) here = k;
    if (rate[k] > rate[best]) best = k;
  }
  if (best != here && rate[best] > rate[here] * (1.0 + kMoveMargin)) {
    current_ = steps_[best];
    ++moves_;
    hold_ = kHoldAfterMove;
    next_stay_hold_ = kHoldAfterStay;
  } else {
    hold_ = next_stay_hold_;
    next_stay_hold_ = std::min(2 * next_stay_hold_, kMaxHold);
  }
  trying_ = false;
  ++rounds_done_;
}

}  // namespace splash::cpu
