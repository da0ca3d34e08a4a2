// A fixed pool of worker threads for data-parallel kernels. A decode step calls parallel_for a few
// hundred times per token, so dispatch has to cost microseconds: workers spin briefly on a
// generation counter after each job and only then sleep on a futex (std::atomic::wait).
//
// Thread-safety: parallel_for may be called from any thread; concurrent callers are serialized (one
// job runs at a time, so the pool never oversubscribes the cores). A parallel_for issued from inside
// a task of the same pool runs inline on the calling thread instead of deadlocking.
// Ownership: the pool owns its threads; the destructor joins them. Not copyable or movable.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace splash {

// Physical cores available to this process (affinity mask, SMT siblings counted once); >= 1.
int default_thread_count();

class ThreadPool {
 public:
  // n_threads counts the calling thread: a pool of 2 starts 1 worker. n_threads <= 0 means
  // default_thread_count().
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(task, thread) for every task in [0, n_tasks), spread over the pool's threads; thread is
  // in [0, size()) and no two concurrent calls share one (use it to index per-thread scratch).
  // Returns when every task has finished. fn must not throw.
  template <class Fn>
  void parallel_for(int64_t n_tasks, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    run(n_tasks, [](void* ctx, int64_t task, int thread) { (*static_cast<F*>(ctx))(task, thread); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using TaskFn = void (*)(void* ctx, int64_t task, int thread);

  void run(int64_t n_tasks, TaskFn fn, void* ctx);
  void worker_loop(int thread);
  void do_tasks(int thread);

  int n_threads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // one job at a time

  // The current job; written by the caller before it bumps generation_, read by workers after.
  TaskFn job_fn_ = nullptr;
  void* job_ctx_ = nullptr;
  int64_t job_n_ = 0;

  // Workers inside the current job, plus kClosed once the caller has run out of tasks: a worker that
  // wakes after that skips the job, so a descheduled worker (shared, oversubscribed cores) never holds
  // up the caller; the caller only waits for workers that actually joined.
  static constexpr int64_t kClosed = int64_t{1} << 40;
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int64_t> next_task_{0};
  alignas(64) std::atomic<int64_t> job_refs_{kClosed};
  alignas(64) std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace splash
