#include "core/thread_pool.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>

#include <fstream>
#include <set>
#include <string>

#include "core/check.h"

namespace splash {

namespace {

// Marks the threads currently running a task of some pool, so that a nested parallel_for on the
// same pool runs inline rather than waiting for itself.
thread_local const ThreadPool* tls_running_pool = nullptr;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// PAUSEs before a worker sleeps: roughly 0.1-0.5 ms depending on the core's PAUSE latency, long
// enough to cover the gap between two matmuls of one decode step, short enough not to hog a core
// that other processes share.
constexpr int kSpinIterations = 4000;

// Direct futex calls: sleep while *word == expected / wake every sleeper. (libstdc++ 12's
// std::atomic::wait goes through a shared waiter table; the raw futex is simpler to reason about.)
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

}  // namespace

int default_thread_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    unsigned hc = std::thread::hardware_concurrency();
    return hc > 0 ? static_cast<int>(hc) : 1;
  }
  // Count distinct physical cores among the CPUs we may run on; SMT siblings share one core's
  // execution units, so running a second matmul thread there only adds contention.
  std::set<std::string> cores;
  int allowed = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    ++allowed;
    std::ifstream in("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list");
    std::string siblings;
    if (in && std::getline(in, siblings)) {
      cores.insert(siblings);
    } else {
      cores.insert("cpu" + std::to_string(cpu));
    }
  }
  int n = static_cast<int>(cores.size());
  if (n <= 0) n = allowed;
  return n > 0 ? n : 1;
}

ThreadPool::ThreadPool(int n_threads) {
  n_threads_ = n_threads > 0 ? n_threads : default_thread_count();
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_seq_cst);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(&generation_);
  for (auto& w : workers_) w.join();
}

void ThreadPool::do_tasks(int thread) {
  const ThreadPool* outer = tls_running_pool;
  tls_running_pool = this;
  for (;;) {
    const int64_t task = next_task_.fetch_add(1, std::memory_order_relaxed);
    if (task >= job_n_) break;
    job_fn_(job_ctx_, task, thread);
  }
  tls_running_pool = outer;
}

void ThreadPool::run(int64_t n_tasks, TaskFn fn, void* ctx) {
  if (n_tasks <= 0) return;
  // Inline when there is nothing to share or when called from inside one of our own tasks.
  if (n_threads_ == 1 || n_tasks == 1 || tls_running_pool == this) {
    for (int64_t t = 0; t < n_tasks; ++t) fn(ctx, t, 0);
    return;
  }
  std::lock_guard<std::mutex> lock(call_mu_);
  job_fn_ = fn;
  job_ctx_ = ctx;
  job_n_ = n_tasks;
  next_task_.store(0, std::memory_order_relaxed);
  // Open the job. Counts left by stragglers of the previous job (which saw it closed and are about
  // to leave) are kept, so they cancel out; a worker that joins from here on reads the fields above
  // through this release.
  job_refs_.fetch_and(~kClosed, std::memory_order_acq_rel);
  // seq_cst store then load pairs with the worker's sleepers_ increment then generation_ load, so
  // either we see a sleeper and wake it or it sees the new generation.
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) futex_wake_all(&generation_);

  do_tasks(0);
  // Every task is claimed. Close the job, then wait for the workers that joined to finish theirs;
  // spin, then yield in case one was descheduled mid-task.
  job_refs_.fetch_or(kClosed, std::memory_order_acq_rel);
  int spins = 0;
  while ((job_refs_.load(std::memory_order_acquire) & ~kClosed) != 0) {
    if (++spins < kSpinIterations) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::worker_loop(int thread) {
  // Generation 0 is the state at construction; a job may be posted before this thread first runs,
  // so the starting point must not be read here.
  uint32_t seen = 0;
  for (;;) {
    uint32_t gen = generation_.load(std::memory_order_acquire);
    for (int i = 0; gen == seen && i < kSpinIterations; ++i) {
      cpu_relax();
      gen = generation_.load(std::memory_order_acquire);
    }
    while (gen == seen) {
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      futex_wait(&generation_, seen);
      sleepers_.fetch_sub(1, std::memory_order_seq_cst);
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    // Join the open job, if any; the job may be a later one than the generation we woke for, which
    // is fine: joining goes through job_refs_, whose release by the caller publishes that job.
    const int64_t refs = job_refs_.fetch_add(1, std::memory_order_acq_rel);
    if ((refs & kClosed) == 0) do_tasks(thread);
    job_refs_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace splash
