#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace splash {
namespace {

TEST(ThreadPool, DefaultThreadCountIsPositive) { EXPECT_GE(default_thread_count(), 1); }

TEST(ThreadPool, EveryTaskRunsExactlyOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 5, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<bool> bad_thread{false};
      pool.parallel_for(n, [&](int64_t task, int thread) {
        if (thread < 0 || thread >= threads) bad_thread = true;
        hits[static_cast<size_t>(task)].fetch_add(1);
      });
      for (int64_t t = 0; t < n; ++t) EXPECT_EQ(hits[static_cast<size_t>(t)].load(), 1) << "task " << t;
      EXPECT_FALSE(bad_thread);
    }
  }
}

TEST(ThreadPool, ManySmallJobsBackToBack) {
  // A decode step dispatches hundreds of tiny jobs; none may be lost or run twice.
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  for (int rep = 0; rep < 5000; ++rep) pool.parallel_for(4, [&](int64_t t, int) { sum += t + 1; });
  EXPECT_EQ(sum.load(), 5000 * 10);
}

TEST(ThreadPool, UsesMoreThanOneThreadWhenTasksBlock) {
  ThreadPool pool(2);
  std::atomic<int> seen_mask{0};
  std::atomic<int> arrived{0};
  pool.parallel_for(2, [&](int64_t, int thread) {
    seen_mask |= 1 << thread;
    arrived++;
    // Hold each task until both have started, which needs two threads running at once; bounded so a
    // serial pool fails the expectation instead of hanging.
    for (int i = 0; i < 2000000 && arrived.load() < 2; ++i) std::this_thread::yield();
  });
  EXPECT_EQ(seen_mask.load(), 3);
}

TEST(ThreadPool, NestedCallRunsInline) {
  ThreadPool pool(2);
  std::atomic<int> inner{0};
  pool.parallel_for(4, [&](int64_t, int) { pool.parallel_for(3, [&](int64_t, int) { inner++; }); });
  EXPECT_EQ(inner.load(), 12);
}

TEST(ThreadPool, ConcurrentCallersAreSerialized) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  auto caller = [&] {
    for (int rep = 0; rep < 300; ++rep) pool.parallel_for(8, [&](int64_t t, int) { total += t; });
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 2 * 300 * 28);
}

TEST(ThreadPool, SleepingWorkersWakeUp) {
  ThreadPool pool(2);
  std::atomic<int> count{0};
  pool.parallel_for(8, [&](int64_t, int) { count++; });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // past the spin: workers now sleep
  pool.parallel_for(8, [&](int64_t, int) { count++; });
  EXPECT_EQ(count.load(), 16);
}

}  // namespace
}  // namespace splash
