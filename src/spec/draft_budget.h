// DraftBudget: how many proposals a lane asks for next, from how the last ones fared. Each rejected
// proposal costs a verify row (for a small model mostly an LM-head row), so a drafter that keeps
// missing (a random drafter, prompt lookup on text that does not repeat) is asked for fewer, down to
// none for a growing number of steps with a single-token probe in between; one that hits gets the
// whole block again. Exactness does not depend on it: any proposal count chosen from the past keeps
// verification exact (spec/verify.h). One per lane; not thread-safe.
#pragma once

#include <algorithm>

namespace splash {

class DraftBudget {
 public:
  // Proposals to ask for now, at most `max` (block - 1); 0 = decode plainly this step.
  int next(int max) {
    if (pause_ > 0) {
      --pause_;
      return 0;
    }
    return std::min(max, cap_ < 0 ? max : std::max(cap_, 1));
  }
  // After a verify step that proposed `proposed` (> 0) tokens and accepted `accepted` of them.
  void update(int proposed, int accepted, int max) {
    if (proposed <= 0) return;
    if (cap_ < 0) cap_ = max;
    if (accepted == proposed) {
      cap_ = std::min(max, cap_ * 2);
      backoff_ = 0;
    } else if (accepted > 0) {
      cap_ = std::min(max, std::max(accepted + 1, cap_));
      backoff_ = 0;
    } else if (cap_ > 1) {
      cap_ /= 2;
    } else {
      // Missing at one proposal: pause 1, 2, 4 ... 16 steps before the next single-token probe.
      backoff_ = std::min(16, backoff_ == 0 ? 1 : backoff_ * 2);
      pause_ = backoff_;
    }
  }

 private:
  int cap_ = -1;  // current proposal cap; -1 = not started (the whole block)
  int backoff_ = 0;
  int pause_ = 0;
};

}  // namespace splash
