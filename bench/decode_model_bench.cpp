// bench_decode_model: one real model's decode step against this machine's read bandwidth, measured
// in the same seconds. Shared hosts move their bandwidth by up to 2x within seconds, so
// bench/decode_bandwidth.sh (a membw run, a `splash bench` run, membw again) cannot tell a slow step
// from a slow minute; here every pass is a membw read followed at once by one way of reading the model,
// the ways rotating pass by pass. The membw figure is the better of two reads of a 512 MiB buffer:
// bench_matmul's membw/2 and membw_prefetch/256 (the bar of issue 3 is the best pattern measured).
// The ways:
//   "forward"  4 decode steps of Model::forward_into (one sequence at a fixed context: the KV is
//              truncated back after every pass), what `splash bench` tg times;
//   "matmuls"  the same step's matrix products alone (the 4 per layer and the output head, in
//              forward order, over the model's own packed weights) with fixed activations;
//   "written"  the same products, the calling thread rewriting the activations before each (as the
//              forward's norms and activation functions do), so the other threads read them from its
//              cache.
//   "pair"     every thread runs the whole product sequence alone, on a one-thread pool of its own,
//              thread t starting at layer t * n_layer / T so no two read one matrix at once: the
//              kernel's own streaming with no coordination at all (bytes: T times the weights).
//   "halves"   thread t streams its contiguous share of every product's rows (matmul_rows) back to
//              back: matmuls' access pattern without dispatch or barriers.
//   "team"     halves with a spin barrier after every layer product: a step whose threads stay in
//              one job per layer with fixed shares, as a tensor-parallel step would.
// A pass's share = bytes read / its time / the membw figure before it, where bytes = the step's
// weights (ModelMemory::decode_read) + its KV at that context. Shares are medians per way over all
// passes, and over the passes whose membw read was above / at most --split GB/s (default 45: this
// host kind's bandwidth moves between two levels). The gap between "forward" and "matmuls" is what
// the rest of a step (norms, attention, the activations one product hands the next) costs; "written"
// isolates the hand-over.
//
//   bench_decode_model MODEL [--seconds S] [--threads T] [--context C] [--split GB/s]
//
// A benchmark, not a test: nothing is asserted; run it on an idle machine.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"
#include "core/thread_pool.h"
#include "core/weight_arena.h"
#include "model/model.h"
#include "model/weights.h"

namespace splash {
namespace {

constexpr int64_t kMembwBytes = int64_t{512} << 20;

// Two interleaved sequential streams per 8 MiB task, summed as 64-bit words: bench_matmul membw/2.
uint64_t read_range(const uint64_t* p, int64_t words) {
  const int64_t per = words / 2;
  uint64_t acc[8] = {};
  for (int64_t k = 0; k + 8 <= per; k += 8)
    for (int s = 0; s < 2; ++s)
      for (int j = 0; j < 8; ++j) acc[j] += p[s * per + k + j];
  uint64_t t = 0;
  for (uint64_t a : acc) t += a;
  return t;
}

// The same two streams in 32-byte loads, each 128-byte step prefetching 256 bytes ahead into L1:
// bench_matmul membw_prefetch/256, on the Zen 4 hosts 10-20% above membw/2.
__attribute__((target("avx2"))) uint64_t read_range_prefetch(const uint64_t* words, int64_t n) {
  const auto* p = reinterpret_cast<const uint8_t*>(words);
  const int64_t per = n * 8 / 2 / 128 * 128;
  __m256i acc = _mm256_setzero_si256();
  for (int64_t o = 0; o < per; o += 128)
    for (int s = 0; s < 2; ++s) {
      const uint8_t* q = p + s * per + o;
      _mm_prefetch(reinterpret_cast<const char*>(q + 256), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(q + 256 + 64), _MM_HINT_T0);
      for (int k = 0; k < 128; k += 32)
        acc = _mm256_xor_si256(acc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + k)));
    }
  return static_cast<uint64_t>(_mm256_extract_epi64(acc, 0));
}

// One read of the 512 MiB buffer by the pool's threads in 64 tasks; bytes per second.
double membw_pass(ThreadPool& pool, const ArenaBuffer& buf, bool prefetch) {
  const auto* words = reinterpret_cast<const uint64_t*>(buf.data());
  const int64_t tasks = 64, per = kMembwBytes / 8 / tasks;
  std::vector<uint64_t> sums(tasks);
  const auto t0 = std::chrono::steady_clock::now();
  pool.parallel_for(tasks, [&](int64_t t, int) {
    sums[static_cast<size_t>(t)] =
        prefetch ? read_range_prefetch(words + t * per, per) : read_range(words + t * per, per);
  });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  volatile uint64_t sink = 0;
  for (uint64_t v : sums) sink = sink + v;
  return static_cast<double>(kMembwBytes) / s;
}

// Keeps the compiler from dropping or moving stores to *p across this point.
void compiler_barrier(void* p) { asm volatile("" : : "g"(p) : "memory"); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int usage(const char* msg) {
  std::fprintf(stderr, "error: %s\nusage: bench_decode_model MODEL [--seconds S] [--threads T] [--context C] [--split GB/s]\n",
               msg);
  return 2;
}

int run(int argc, char** argv) {
  std::string path;
  double seconds = 60, split = 45;
  int threads = 2;
  int64_t context = 64;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--seconds" && (v = next())) seconds = std::atof(v);
    else if (a == "--threads" && (v = next())) threads = std::atoi(v);
    else if (a == "--context" && (v = next())) context = std::atoll(v);
    else if (a == "--split" && (v = next())) split = std::atof(v);
    else if (!a.empty() && a[0] != '-' && path.empty()) path = a;
    else return usage(("unknown or incomplete argument: " + a).c_str());
  }
  if (path.empty()) return usage("MODEL is required");
  if (seconds <= 0 || threads < 1 || context < 1) return usage("--seconds, --threads and --context must be positive");

  auto files = ModelFiles::open(path);
  if (!files.ok()) return std::fprintf(stderr, "error: %s\n", files.error_message().c_str()), 1;
  auto model = Model::load(*files);
  if (!model.ok()) return std::fprintf(stderr, "error: %s\n", model.error_message().c_str()), 1;
  const Model& m = *model;
  const ModelConfig& c = m.config();
  constexpr int kSteps = 4;
  if (context + kSteps + 1 > m.max_context()) return usage("--context is past the model's context");
  auto kv = KvPagePool::create(m.kv_cache_config(KvFormat::kInt8, (context + kSteps) / kKvPageTokens + 2));
  if (!kv.ok()) return std::fprintf(stderr, "error: %s\n", kv.error_message().c_str()), 1;
  ThreadPool pool(threads);

  // The products of one step, in forward order, over the model's own packed matrices.
  std::vector<const PackedWeights*> mats;
  for (const LayerWeights& l : m.weights().layers) {
    if (l.moe || l.gdn) return usage("dense attention models only");
    for (const Projection& p : l.attn.qkv) mats.push_back(&p.w);
    mats.push_back(&l.attn.o.w);
    for (const Projection& p : l.mlp.gate_up) mats.push_back(&p.w);
    mats.push_back(&l.mlp.down.w);
  }
  mats.push_back(&m.weights().output_matrix());
  int64_t widest = 0;
  for (const PackedWeights* w : mats) widest = std::max({widest, w->rows(), w->cols()});
  std::vector<float> x(static_cast<size_t>(widest)), y(static_cast<size_t>(widest));
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  for (float& v : x) v = dist(rng);

  // The step's bytes: the weights, and K and V of every layer at the context (int8 + a scale per
  // token and head).
  const double kv_bytes = 2.0 * static_cast<double>(c.n_layer) * static_cast<double>(c.n_head_kv) *
                          (static_cast<double>(c.head_dim) + 4.0) * static_cast<double>(context);
  const double step_bytes = static_cast<double>(m.memory().decode_read) + kv_bytes;

  const std::vector<int32_t> prompt(static_cast<size_t>(context), 100);
  SequenceState seq;
  ForwardOutput out;
  SequenceRun first{&seq, prompt, LogitRows::kLast};
  if (Status st = m.forward_into({&first, 1}, *kv, pool, out); !st.ok())
    return std::fprintf(stderr, "error: %s\n", st.error_message().c_str()), 1;
  const int32_t token = 200;

  ArenaBuffer buf = ArenaBuffer::allocate(static_cast<size_t>(kMembwBytes));
  std::memset(buf.data(), 1, buf.size());

  const bool avx2 = __builtin_cpu_supports("avx2");
  constexpr int kWays = 6;
  const char* names[kWays] = {"forward", "matmuls", "written", "pair", "halves", "team"};
  std::vector<std::unique_ptr<ThreadPool>> solo;
  std::vector<std::vector<float>> px(static_cast<size_t>(threads), x), py(static_cast<size_t>(threads), y);
  for (int t = 0; t < threads; ++t) solo.push_back(std::make_unique<ThreadPool>(1));
  std::vector<double> shares[3][kWays], gbs[3][kWays], membws[3];  // [lower, upper, all]
  // Thread t's contiguous share of w's rows (whole row groups), on the calling thread: halves, team.
  auto rows_share = [&](const PackedWeights& w, int64_t t) {
    const int64_t g = w.is_x8() ? w.group_rows() : 8, groups = (w.rows() + g - 1) / g;
    const int64_t r0 = groups * t / threads * g, r1 = std::min(w.rows(), groups * (t + 1) / threads * g);
    matmul_rows(w, px[static_cast<size_t>(t)].data(), py[static_cast<size_t>(t)].data(), 1, r0, r1);
  };
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (int pass = 0; std::chrono::duration<double>(Clock::now() - start).count() < seconds; ++pass) {
    const int way = pass % kWays;
    double membw = membw_pass(pool, buf, false);
    if (avx2) membw = std::max(membw, membw_pass(pool, buf, true));
    const auto t0 = Clock::now();
    double bytes = 0;
    if (way == 0) {
      for (int s = 0; s < kSteps; ++s) {
        SequenceRun step{&seq, {&token, 1}, LogitRows::kLast};
        if (Status st = m.forward_into({&step, 1}, *kv, pool, out); !st.ok())
          return std::fprintf(stderr, "error: %s\n", st.error_message().c_str()), 1;
      }
      bytes = kSteps * step_bytes;
    } else if (way == 3) {
      const size_t n = mats.size(), per_layer = (n - 1) / static_cast<size_t>(c.n_layer);
      pool.parallel_for(threads, [&](int64_t t, int) {
        const size_t first = static_cast<size_t>(t) * static_cast<size_t>(c.n_layer / threads) * per_layer;
        for (size_t k = 0; k < n; ++k)
          matmul(*mats[(first + k) % n], px[static_cast<size_t>(t)].data(), py[static_cast<size_t>(t)].data(), 1,
                 *solo[static_cast<size_t>(t)]);
      });
      bytes = static_cast<double>(threads) * static_cast<double>(m.memory().decode_read);
    } else if (way == 4) {
      pool.parallel_for(threads, [&](int64_t t, int) {
        for (const PackedWeights* w : mats) rows_share(*w, t);
      });
      bytes = static_cast<double>(m.memory().decode_read);
    } else if (way == 5) {
      const size_t per_layer = (mats.size() - 1) / static_cast<size_t>(c.n_layer);
      std::atomic<int> arrived{0};
      std::atomic<int> phase{0};
      auto body = [&](int t) {
        int my_phase = 0;
        for (size_t k = 0; k < mats.size(); ++k) {
          const PackedWeights* w = mats[k];
          rows_share(*w, t);
          if (k + 1 < mats.size() && per_layer > 0) {  // a spin barrier after every layer product
            ++my_phase;
            if (arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == threads * my_phase)
              phase.store(my_phase, std::memory_order_release);
            while (phase.load(std::memory_order_acquire) < my_phase) __builtin_ia32_pause();
          }
        }
      };
      // One task per pool thread: the caller cannot take a second task while its first waits at a
      // barrier, and the job stays open until it does, so every worker joins and takes one.
      pool.parallel_for(threads, [&](int64_t t, int) { body(static_cast<int>(t)); });
      bytes = static_cast<double>(m.memory().decode_read);
    } else {
      for (const PackedWeights* w : mats) {
        if (way == 2) {  // the calling thread writes the activations just before, as the forward's ops do
          for (int64_t i = 0; i < w->cols(); ++i) x[static_cast<size_t>(i)] += 0.0f;
          compiler_barrier(x.data());
        }
        matmul(*w, x.data(), y.data(), 1, pool);
      }
      bytes = static_cast<double>(m.memory().decode_read);
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (way == 0) truncate_sequence(*kv, seq, context);
    const int up = membw > split * 1e9 ? 1 : 0;
    for (int level : {up, 2}) {
      shares[level][way].push_back(bytes / s / membw);
      gbs[level][way].push_back(bytes / s * 1e-9);
      if (way == 0) membws[level].push_back(membw * 1e-9);
    }
  }
  release_sequence(*kv, seq);

  std::printf("%s: %s, %d threads, context %lld, %.1f MiB per step (weights %.1f + KV %.1f)\n", path.c_str(),
              m.describe_weights().c_str(), threads, static_cast<long long>(context), step_bytes / 1048576.0,
              static_cast<double>(m.memory().decode_read) / 1048576.0, kv_bytes / 1048576.0);
  for (int level : {2, 1, 0}) {
    if (level == 2) std::printf("all passes: membw median %.1f GB/s\n", median(membws[level]));
    else std::printf("%s level (membw %s %.0f GB/s): membw median %.1f GB/s\n", level ? "upper" : "lower",
                     level ? ">" : "<=", split, median(membws[level]));
    for (int w = 0; w < kWays; ++w)
      std::printf("  %-8s n=%-4zu share %.3f  (%.1f GB/s)\n", names[w], shares[level][w].size(),
                  median(shares[level][w]), median(gbs[level][w]));
  }
  return 0;
}

}  // namespace
}  // namespace splash

int main(int argc, char** argv) { return splash::run(argc, argv); }
