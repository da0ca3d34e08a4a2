// DraftBudget: how many proposals a lane asks for next, from how the last ones fared. Each rejected
// proposal costs a verify row (measured on stories15M Q8_0: ~0.4 of a one-token step per row, most
// of it the row's LM-head product), so a drafter that keeps missing (a random drafter, prompt lookup
// on text that does not repeat) is asked for fewer, down to none for a growing number of steps with a
// single-token probe in between; one that hits gets the whole block again within a few steps.
//
// The schedule, with max = block - 1 proposals:
//   - the first step asks for half the block (rounded up); every fully accepted step doubles the cap
//     up to max, so a good drafter reaches the whole block on its second or third step;
//   - a partly accepted step keeps the cap (at least accepted + 1);
//   - a step with nothing accepted cuts the cap to a quarter (at least 1);
//   - a miss at one proposal pauses drafting for 2, then 8, then 32 steps (and 32 from then on)
//     before the next single-token probe; any accepted proposal ends the pauses.
// Worst case (a drafter that never hits): after ~10 rows at the start, one probe row per 33 tokens.
//
// Acceptance is not enough: a drafter can be right often and still cost more per step than it saves
// (the DFlash drafter of a 15M model runs the target's LM head, 60% of the target's weights, on its
// block). So the caller also reports each step's wall time (observe_step): the budget keeps moving
// averages of tokens per second with and without proposals (one plain step in every 32 keeps the
// plain figure fresh) and, once both are known, a drafter slower than plain decoding is paused with the same backoff as a
// miss, then probed again.
//
// Exactness does not depend on it: any proposal count chosen from the past keeps verification
// exact (spec/verify.h). One per lane; not thread-safe.
#pragma once

#include <algorithm>

namespace splash {

class DraftBudget {
 public:
  static constexpr int kMaxPause = 32;  // steps without drafting between probes, at most

  // Proposals to ask for now, at most `max` (block - 1); 0 = decode plainly this step.
  int next(int max) {
    if (max <= 0) return 0;
    if (pause_ > 0) {
      --pause_;
      return 0;
    }
    if (wants_plain_sample()) return 0;
    if (cap_ < 0) cap_ = (max + 1) / 2;
    return std::min(max, std::max(cap_, 1));
  }
  // After a verify step that proposed `proposed` (> 0) tokens and accepted `accepted` of them.
  void update(int proposed, int accepted, int max) {
    if (proposed <= 0 || max <= 0) return;
    if (cap_ < 0) cap_ = (max + 1) / 2;
    if (accepted >= proposed) {
      cap_ = std::min(max, std::max(cap_, proposed) * 2);
      backoff_ = 0;
    } else if (accepted > 0) {
      cap_ = std::min(max, std::max(accepted + 1, cap_));
      backoff_ = 0;
    } else if (proposed > 1) {
      cap_ = std::max(1, std::min(cap_, proposed) / 4);
    } else {
      cap_ = 1;
      backoff_ = std::min(kMaxPause, backoff_ == 0 ? 2 : backoff_ * 4);
      pause_ = backoff_;
    }
  }
  bool paused() const { return pause_ > 0; }

  // The step just run: whether it carried proposals, the tokens it committed and its wall time.
  void observe_step(bool drafted, int committed, double seconds) {
    if (committed <= 0 || seconds <= 0) return;
    const double rate = committed / seconds;
    auto mix = [&](double& avg, int& n) {
      avg = n == 0 ? rate : avg + kRateWeight * (rate - avg);
      ++n;
    };
    if (drafted) {
      mix(draft_rate_, n_draft_);
      ++since_plain_;
    } else {
      mix(plain_rate_, n_plain_);
      since_plain_ = 0;
    }
    if (!drafted || n_plain_ < 2 || n_draft_ < kMinDraftSamples) return;
    if (draft_rate_ < plain_rate_ * kSlowerThan) {
      // Drafting loses time: pause for 2, 8, 32 steps (acceptance does not end this backoff; only a
      // drafted rate at or above plain's does). The probe after the pause measures again.
      time_backoff_ = std::min(kMaxPause, time_backoff_ == 0 ? 2 : time_backoff_ * 4);
      pause_ = std::max(pause_, time_backoff_);
    } else {
      time_backoff_ = 0;
    }
  }
  // Whether the next step should be plain to measure plain decoding (drafting is on and no fresh
  // plain figure exists). Callers ask next() as usual; this is folded into it.
  // Even a drafter whose steps commit many tokens is measured: on a small fast target (stories15M
  // Q8_0) a DFlash step committing 4.5 tokens still ran at 0.75x plain.
  bool wants_plain_sample() const {
    return n_draft_ >= kMinDraftSamples && (n_plain_ < 2 || since_plain_ >= kPlainEvery);
  }

 private:
  static constexpr double kRateWeight = 0.25;  // moving averages' weight of the newest step
  static constexpr double kSlowerThan = 0.97;  // drafting pauses below this share of plain's rate
  static constexpr int kMinDraftSamples = 4;
  static constexpr int kPlainEvery = 32;
  int cap_ = -1;  // current proposal cap; -1 = not started
  int backoff_ = 0;
  int pause_ = 0;
  double plain_rate_ = 0, draft_rate_ = 0;  // tokens per second, moving averages
  int n_plain_ = 0, n_draft_ = 0, since_plain_ = 0;
  int time_backoff_ = 0;
};

}  // namespace splash
