// Computes a matcher's next token mask on a helper thread, so that the mask for step t+1 is built
// while the forward pass of step t runs (issue 39). The engine starts it right after the matcher
// accepts a token and waits for it, with a bound, when the next logits row is there.
//
//   MaskWorker worker(matcher);
//   worker.start();                                    // after matcher->accept(token)
//   ... forward pass ...
//   const uint64_t* mask = worker.wait(timeout);       // nullptr: not ready in time (503 mask_timeout)
//
// Between start() and a wait() that returned a mask, the matcher belongs to the worker: the caller
// must not touch it. Not thread-safe otherwise (one caller). The destructor does not wait: a
// computation still running finishes on its own thread, which keeps what it uses alive.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string_view>

#include "constrain/matcher.h"

namespace splash::constrain {

// The engine's error for a mask that came too late starts with this code; the HTTP layer answers it
// with 503 and error.code "mask_timeout".
inline constexpr std::string_view kMaskTimeoutError = "mask_timeout";

class MaskWorker {
 public:
  // delay: added before every computation; a test hook to make masks late on purpose.
  explicit MaskWorker(std::shared_ptr<Matcher> matcher, std::chrono::microseconds delay = {});
  ~MaskWorker();
  MaskWorker(const MaskWorker&) = delete;
  MaskWorker& operator=(const MaskWorker&) = delete;

  // Begins the mask of the matcher's current position (no-op if one is pending or ready).
  void start();
  bool started() const;
  // The mask start() began (vocab().mask_words() words, valid until the next start()), waiting at
  // most `timeout`; nullptr on timeout, and the computation goes on.
  const uint64_t* wait(std::chrono::microseconds timeout);

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
};

}  // namespace splash::constrain
