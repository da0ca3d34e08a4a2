#include "backend/cpu/matmul_batch.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "core/check.h"

namespace splash {

void matmul_batch(std::span<const MatmulJob> jobs, ThreadPool& pool) {
  // Runs of about a quarter of a thread's share of the batch's bytes (at least 16 KiB): enough runs
  // that a thread that falls behind on a busy host is covered by the others, few enough that each
  // run's own quantization of its activations (matmul_rows) stays small against the weights it reads.
  struct Run {
    int64_t job, r0, r1;
  };
  thread_local std::vector<Run> runs;
  runs.clear();
  int64_t total = 0;
  for (const MatmulJob& j : jobs)
    if (j.n > 0) total += j.w->packed_bytes();
  const int threads = pool.size();
  const int64_t target = std::max<int64_t>(total / (4 * int64_t{threads}), 16 << 10);
  for (size_t i = 0; i < jobs.size(); ++i) {
    const MatmulJob& j = jobs[i];
    if (j.n <= 0) continue;
    SPLASH_CHECK(j.n <= 8);
    const int64_t rows = j.w->rows(), group = j.w->is_x8() ? j.w->group_rows() : 8;
    const int64_t row_bytes = std::max<int64_t>(1, j.w->packed_bytes() / rows);
    const int64_t step = std::max<int64_t>(group, target / row_bytes / group * group);
    for (int64_t r0 = 0; r0 < rows; r0 += step)
      runs.push_back({static_cast<int64_t>(i), r0, std::min(rows, r0 + step)});
  }
  auto run = [&](const Run& r) {
    const MatmulJob& j = jobs[static_cast<size_t>(r.job)];
    matmul_rows(*j.w, j.x, j.y, j.n, r.r0, r.r1);
  };
  if (threads == 1 || runs.size() == 1) {
    for (const Run& r : runs) run(r);
    return;
  }
  std::atomic<int64_t> next{0};
  const auto n_runs = static_cast<int64_t>(runs.size());
  const std::vector<Run>& all = runs;  // the caller's list: workers have their own thread_local
  pool.parallel_for(threads, [&](int64_t, int) {
    for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < n_runs;
         i = next.fetch_add(1, std::memory_order_relaxed))
      run(all[static_cast<size_t>(i)]);
  });
}

}  // namespace splash
