#include "constrain/mask_worker.h"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace splash::constrain {

struct MaskWorker::Shared {
  std::shared_ptr<Matcher> matcher;
  std::chrono::microseconds delay{0};
  std::mutex mu;
  std::condition_variable cv;
  enum class Phase : uint8_t { kIdle, kQueued, kReady } phase = Phase::kIdle;
  bool stop = false;
  bool thread_started = false;
  std::vector<uint64_t> mask;

  void run() {
    std::unique_lock lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return stop || phase == Phase::kQueued; });
      if (stop) return;
      lock.unlock();
      if (delay.count() > 0) std::this_thread::sleep_for(delay);
      matcher->fill_mask(mask.data());
      lock.lock();
      phase = Phase::kReady;
      cv.notify_all();
    }
  }
};

MaskWorker::MaskWorker(std::shared_ptr<Matcher> matcher, std::chrono::microseconds delay)
    : shared_(std::make_shared<Shared>()) {
  shared_->mask.resize(matcher->vocab().mask_words());
  shared_->matcher = std::move(matcher);
  shared_->delay = delay;
}

MaskWorker::~MaskWorker() {
  std::lock_guard lock(shared_->mu);
  shared_->stop = true;
  shared_->cv.notify_all();
}

void MaskWorker::start() {
  std::lock_guard lock(shared_->mu);
  if (shared_->phase != Shared::Phase::kIdle) return;
  shared_->phase = Shared::Phase::kQueued;
  if (!shared_->thread_started) {
    shared_->thread_started = true;
    // Detached: it holds the shared state, so a lane may go away while a mask is still computed.
    std::thread([s = shared_] { s->run(); }).detach();
  }
  shared_->cv.notify_all();
}

bool MaskWorker::started() const {
  std::lock_guard lock(shared_->mu);
  return shared_->phase != Shared::Phase::kIdle;
}

const uint64_t* MaskWorker::wait(std::chrono::microseconds timeout) {
  std::unique_lock lock(shared_->mu);
  if (!shared_->cv.wait_for(lock, timeout, [&] { return shared_->phase == Shared::Phase::kReady; })) return nullptr;
  shared_->phase = Shared::Phase::kIdle;
  return shared_->mask.data();
}

}  // namespace splash::constrain
