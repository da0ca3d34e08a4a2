// Dispatch cost of ThreadPool::parallel_for: a decode step issues a few hundred small jobs per token,
// so the per-call overhead (wake, hand out tasks, wait for the last worker) bounds tokens/s.
#include <benchmark/benchmark.h>

#include <atomic>

#include "core/thread_pool.h"

namespace splash {
namespace {

void bm_dispatch(benchmark::State& state) {
  ThreadPool pool(static_cast<int>(state.range(0)));
  std::atomic<int64_t> sink{0};
  for (auto _ : state) pool.parallel_for(state.range(1), [&](int64_t t, int) { sink.fetch_add(t, std::memory_order_relaxed); });
  benchmark::DoNotOptimize(sink.load());
}
// {threads, tasks}
BENCHMARK(bm_dispatch)->Args({1, 8})->Args({2, 2})->Args({2, 16})->Args({2, 256})->UseRealTime();

}  // namespace
}  // namespace splash

BENCHMARK_MAIN();
