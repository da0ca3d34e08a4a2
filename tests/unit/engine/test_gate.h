// A gate a test closes to make the engine thread wait at one point (a lane's admission, a request's
// first text event) while the test queues more requests: lanes that must share batched forwards then
// do, even when the test thread is descheduled between its submits on a loaded 2-core CI machine.
// The engine reaches those points outside the scheduler's lock, so submits still queue meanwhile.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace splash::engine_test {

class TestGate {
 public:
  void close() {
    std::lock_guard lk(mu_);
    closed_ = true;
  }
  void open() {
    {
      std::lock_guard lk(mu_);
      closed_ = false;
    }
    cv_.notify_all();
  }
  // Returns once the gate is open, or after 10 s so a failed test cannot hang.
  void pass() {
    std::unique_lock lk(mu_);
    cv_.wait_for(lk, std::chrono::seconds(10), [&] { return !closed_; });
  }

  // Closed for the lifetime of the returned object (opened again on any exit from the scope,
  // failed assertions included).
  class Closed {
   public:
    explicit Closed(TestGate& g) : g_(g) { g_.close(); }
    ~Closed() { g_.open(); }
    Closed(const Closed&) = delete;
    Closed& operator=(const Closed&) = delete;

   private:
    TestGate& g_;
  };

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;
};

}  // namespace splash::engine_test
