// Matmul micro-benchmarks at the Qwen3-0.6B shapes: GEMV (n = 1, decode; reported as weight GB/s)
// and GEMM (n = 512, prefill; reported as GOP/s, 2 ops per multiply-add). Machine limits to compare
// with (reference/peer-cpu.md, 2 threads): ~64 GB/s memory read, ~915 GOP/s int8 VNNI,
// ~425 GFLOP/s fp32 FMA.
//   bench_matmul [--benchmark_filter=Q4_0] ; SPLASH_BENCH_THREADS=1 for one thread
// membw/<streams per thread>: this machine's read bandwidth over a 512 MiB buffer with the pool's
// threads, the ceiling that decode (GEMV) is judged against; membw_prefetch/<bytes>: the same read
// as two streams per task of 32-byte loads with software prefetch that far ahead, as the decode
// kernels read (on the Intel host 0-4% above membw/2, best at 256-512 B, so the bar takes the best
// of all). decode/<type> and decode_sync/<type> (what the barrier per product costs) are described
// where they are defined.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/matmul.h"
#include "core/half.h"

namespace splash {
namespace {

struct Shape {
  const char* name;
  int64_t rows, cols;  // out features, in features
};
// q (2048 x 1024), k/v (1024 x 1024), o (1024 x 2048), gate/up (3072 x 1024), down (1024 x 3072),
// tied output (151936 x 1024).
constexpr Shape kShapes[] = {{"kv", 1024, 1024},  {"q", 2048, 1024},    {"o", 1024, 2048},
                             {"up", 3072, 1024},  {"down", 1024, 3072}, {"output", 151936, 1024}};

ThreadPool& pool() {
  static ThreadPool p([] {
    const char* t = std::getenv("SPLASH_BENCH_THREADS");
    return t ? std::atoi(t) : 2;
  }());
  return p;
}

// Random bytes are valid blocks for every GGML type once the fp16 scales are set to sane values.
std::vector<uint8_t> make_bytes(DType type, int64_t rows, int64_t cols) {
  const uint64_t n = *dtype_bytes(type, static_cast<uint64_t>(rows * cols));
  std::vector<uint8_t> v(n);
  std::mt19937 rng(7);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  const auto& tr = dtype_traits(type);
  const uint16_t small = f32_to_f16(0.01f);
  auto set16 = [&](uint64_t off) { std::memcpy(&v[off], &small, 2); };
  if (type == DType::kF16) {
    for (uint64_t k = 0; k < n; k += 2) set16(k);
  } else if (type == DType::kF32) {
    const float f = 0.01f;
    for (uint64_t k = 0; k < n; k += 4) std::memcpy(&v[k], &f, 4);
  } else if (type == DType::kBF16) {
    const uint16_t b = f32_to_bf16(0.01f);
    for (uint64_t k = 0; k < n; k += 2) std::memcpy(&v[k], &b, 2);
  } else if (tr.quantized) {
    for (uint64_t blk = 0; blk < n / tr.block_bytes; ++blk) {
      const uint64_t off = blk * tr.block_bytes;
      if (type == DType::kQ6_K) {
        set16(off + 208);
      } else {
        set16(off);
        if (type == DType::kQ4_K || type == DType::kQ5_K) set16(off + 2);
      }
    }
  }
  return v;
}

struct Weights {
  std::vector<uint8_t> bytes, scales, biases;
  PackedWeights packed;
};

std::unique_ptr<Weights> make_weights(const std::string& type, const Shape& s);

// Packed matrices are cached across benchmarks (the output matrix alone is 87-620 MB).
Weights& weights(const std::string& type, const Shape& s) {
  static std::map<std::string, std::unique_ptr<Weights>> cache;
  const std::string key = type + "/" + s.name;
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second;
  if (cache.size() > 2) cache.clear();  // bound memory: keep a couple of matrices
  return *cache.emplace(key, make_weights(type, s)).first->second;
}

std::unique_ptr<Weights> make_weights(const std::string& type, const Shape& s) {
  auto w = std::make_unique<Weights>();
  if (type == "MLX4") {
    std::mt19937 rng(3);
    w->bytes.resize(static_cast<size_t>(s.rows * s.cols / 2));
    for (auto& b : w->bytes) b = static_cast<uint8_t>(rng());
    const size_t groups = static_cast<size_t>(s.rows * s.cols / 64);
    w->scales.assign(groups * 2, 0);
    w->biases.assign(groups * 2, 0);
    MlxAffineView v;
    v.bits = 4;
    v.group_size = 64;
    v.scale_dtype = DType::kBF16;
    v.codes = reinterpret_cast<const uint32_t*>(w->bytes.data());
    v.scales = w->scales.data();
    v.biases = w->biases.data();
    w->packed = std::move(pack_mlx_weights(v, s.rows, s.cols).value());
    w->bytes.clear();
    w->bytes.shrink_to_fit();
  } else {
    const DType t = *dtype_from_name(type);
    w->bytes = make_bytes(t, s.rows, s.cols);
    w->packed = std::move(pack_weights(t, w->bytes.data(), s.rows, s.cols).value());
    if (w->packed.owns_data()) std::vector<uint8_t>().swap(w->bytes);  // repacked: the source is not read again
  }
  return w;
}

void bm_matmul(benchmark::State& state, std::string type, Shape s, int64_t n) {
  Weights& w = weights(type, s);
  std::vector<float> x(static_cast<size_t>(n * s.cols));
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  for (auto& v : x) v = dist(rng);
  std::vector<float> y(static_cast<size_t>(n * s.rows));
  for (auto _ : state) {
    matmul(w.packed, x.data(), y.data(), n, pool());
    benchmark::DoNotOptimize(y.data());
  }
  const double bytes = static_cast<double>(w.packed.packed_bytes());
  if (n == 1) {
    state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  } else {
    const double ops = 2.0 * static_cast<double>(n) * static_cast<double>(s.rows) * static_cast<double>(s.cols);
    state.counters["GOP/s"] = benchmark::Counter(ops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  }
  state.SetLabel(isa_level_name(w.packed.isa()));
}

// Sums 64-bit words of one range in `streams` interleaved sub-ranges (several independent
// sequential streams in flight, as a decode kernel over several row groups would have).
uint64_t read_range(const uint64_t* p, int64_t words, int streams) {
  const int64_t per = words / streams;
  uint64_t acc[8] = {};
  for (int64_t k = 0; k + 8 <= per; k += 8)
    for (int s = 0; s < streams; ++s)
      for (int j = 0; j < 8; ++j) acc[j] += p[s * per + k + j];
  uint64_t t = 0;
  for (uint64_t a : acc) t += a;
  return t;
}

// One read of the 512 MiB buffer by the pool's threads, `streams` interleaved streams per task.
constexpr int64_t kMembwWords = (int64_t{512} << 20) / 8;
// The 512 MiB read buffer: on huge pages like the repacked weights (core/weight_arena.h), touched
// once: resident.
const uint8_t* membw_buffer() {
  static const ArenaBuffer arena = [] {
    ArenaBuffer b = ArenaBuffer::allocate(static_cast<size_t>(kMembwWords * 8));
    std::memset(b.data(), 1, b.size());
    return b;
  }();
  return reinterpret_cast<const uint8_t*>(arena.data());
}

void membw_pass(int streams) {
  const auto* buf = reinterpret_cast<const uint64_t*>(membw_buffer());
  const int64_t tasks = 64;  // 8 MiB each, several per thread
  std::vector<uint64_t> sums(tasks);
  pool().parallel_for(tasks, [&](int64_t t, int) {
    sums[static_cast<size_t>(t)] = read_range(buf + t * (kMembwWords / tasks), kMembwWords / tasks, streams);
  });
  benchmark::DoNotOptimize(sums.data());
}

void bm_membw(benchmark::State& state) {
  for (auto _ : state) membw_pass(static_cast<int>(state.range(0)));
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(kMembwWords * 8) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Two interleaved streams over `bytes` at p, 128 bytes of each per step in 32-byte loads, each step
// prefetching its stream `pf` bytes ahead into L1: the decode kernels' access pattern without their
// arithmetic.
__attribute__((target("avx2"))) uint64_t read_range_prefetch(const uint8_t* p, int64_t bytes, int64_t pf) {
  const int64_t per = bytes / 2 / 128 * 128;
  __m256i acc = _mm256_setzero_si256();
  for (int64_t o = 0; o < per; o += 128)
    for (int s = 0; s < 2; ++s) {
      const uint8_t* q = p + s * per + o;
      _mm_prefetch(reinterpret_cast<const char*>(q + pf), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(q + pf + 64), _MM_HINT_T0);
      for (int k = 0; k < 128; k += 32)
        acc = _mm256_xor_si256(acc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + k)));
    }
  return static_cast<uint64_t>(_mm256_extract_epi64(acc, 0));
}

void bm_membw_prefetch(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx2")) {
    state.SkipWithError("needs AVX2");
    return;
  }
  const auto* buf = membw_buffer();
  const int64_t tasks = 64, bytes = kMembwWords * 8 / tasks;
  std::vector<uint64_t> sums(tasks);
  for (auto _ : state) {
    pool().parallel_for(tasks, [&](int64_t t, int) {
      sums[static_cast<size_t>(t)] = read_range_prefetch(buf + t * bytes, bytes, state.range(0));
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(kMembwWords * 8) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// decode/<type>: one decode token's matrix products over a whole Qwen3-0.6B-shaped model (28 layers
// of fused qkv 4096x1024, o 1024x2048, fused gate/up 6144x1024, down 1024x3072, then the tied output
// 151936x1024), in that order, so every matrix comes from DRAM as in `splash bench` tg. Each
// iteration also reads the membw buffer (2 streams per task) just before: this machine's bandwidth
// moves by 2x within minutes on a shared host, so the share is only meaningful in the same seconds.
// GB/s = the packed bytes per decode pass / its time (the reported time); "membw GB/s" the
// interleaved reads; "share" the median over the pairs of decode GB/s / membw GB/s; "out GB/s" and
// "layers GB/s" the output matrix (78-147 MB, one long stream) and the 112 layer matrices (1-3.5 MB).
// The arguments are the decode kernels' prefetch distance (PackedWeights::stream_prefetch_bytes; the
// default for this CPU and layout is default_stream_prefetch_bytes(format)) and streams per task
// (PackedWeights::decode_streams, default_decode_streams()), so one run compares them.
void bm_decode(benchmark::State& state, std::string type) {
  static std::string held_type;
  static std::vector<std::unique_ptr<Weights>> held;
  if (held_type != type) {
    held.clear();
    held_type = type;
    const Shape layer[] = {{"qkv", 4096, 1024}, {"o", 1024, 2048}, {"gateup", 6144, 1024}, {"down", 1024, 3072}};
    for (int l = 0; l < 28; ++l)
      for (const Shape& s : layer) held.push_back(make_weights(type, s));
    held.push_back(make_weights(type, {"output", 151936, 1024}));
  }
  for (auto& w : held) {
    w->packed.set_stream_prefetch_bytes(state.range(0));
    w->packed.set_decode_streams(static_cast<int>(state.range(1)));
  }
  std::vector<float> x(3072, 0.5f), y(151936);
  double bytes = 0;
  for (const auto& w : held) bytes += static_cast<double>(w->packed.packed_bytes());
  using Clock = std::chrono::steady_clock;
  double decode_s = 0, membw_s = 0, out_s = 0;
  std::vector<double> shares;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    membw_pass(2);
    const auto t1 = Clock::now();
    for (size_t k = 0; k + 1 < held.size(); ++k) matmul(held[k]->packed, x.data(), y.data(), 1, pool());
    const auto t15 = Clock::now();
    matmul(held.back()->packed, x.data(), y.data(), 1, pool());
    benchmark::DoNotOptimize(y.data());
    const auto t2 = Clock::now();
    out_s += std::chrono::duration<double>(t2 - t15).count();
    const double m = std::chrono::duration<double>(t1 - t0).count(), d = std::chrono::duration<double>(t2 - t1).count();
    membw_s += m;
    decode_s += d;
    shares.push_back(bytes / d / (static_cast<double>(kMembwWords * 8) / m));
    state.SetIterationTime(d);
  }
  const double passes = static_cast<double>(shares.size());
  std::sort(shares.begin(), shares.end());
  state.counters["GB/s"] = bytes * passes / decode_s * 1e-9;
  state.counters["membw GB/s"] = static_cast<double>(kMembwWords * 8) * passes / membw_s * 1e-9;
  state.counters["share"] = shares[shares.size() / 2];  // median over the pairs
  const double ob = static_cast<double>(held.back()->packed.packed_bytes());
  state.counters["out GB/s"] = ob * passes / out_s * 1e-9;
  state.counters["layers GB/s"] = (bytes - ob) * passes / (decode_s - out_s) * 1e-9;
}

// decode_sync/<type>: what the barrier after every product costs one-row decode. The 112 layer
// matrices of decode/<type> (no output matrix) read four ways, rotating per pass, each pass after a
// membw read: "matmul" the engine's matmul() per product (one share per thread, work stealing, a
// barrier per product); "halves_sync" each matrix packed as two halves, one per thread, a barrier
// per product; "layers_nosync" no barrier: thread t runs whole products of its half of the layers;
// "halves_nosync" no barrier: thread t runs its half of every product, one after the other. The last
// two are not a valid decode (a product needs the previous one's output), only the bound a barrier
// keeps the engine from. Shares are medians per way, split by the membw read: "up_" above 42 GB/s,
// "lo_" below (this host kind's bandwidth moves between two levels); "up_n" / "lo_n" count passes.
// Two threads; no arguments.
void bm_decode_sync(benchmark::State& state, std::string type) {
  if (pool().size() != 2) {
    state.SkipWithError("needs SPLASH_BENCH_THREADS=2");
    return;
  }
  std::vector<std::unique_ptr<Weights>> whole, halves;
  const Shape layer[] = {{"qkv", 4096, 1024}, {"o", 1024, 2048}, {"gateup", 6144, 1024}, {"down", 1024, 3072}};
  auto packed_only = [](std::unique_ptr<Weights> w) {
    w->bytes = {};
    return w;
  };
  for (int l = 0; l < 28; ++l)
    for (const Shape& s : layer) {
      whole.push_back(packed_only(make_weights(type, s)));
      for (int h = 0; h < 2; ++h) halves.push_back(packed_only(make_weights(type, {s.name, s.rows / 2, s.cols})));
    }
  double bytes = 0;
  for (const auto& w : whole) bytes += static_cast<double>(w->packed.packed_bytes());
  std::vector<float> x(3072, 0.5f), y[2] = {std::vector<float>(8192), std::vector<float>(8192)};
  static ThreadPool solo(1);  // inside a task: a product runs front to back on that task's thread
  const size_t P = whole.size();
  auto run = [&](int way) {
    if (way == 0) {
      for (size_t k = 0; k < P; ++k) matmul(whole[k]->packed, x.data(), y[0].data(), 1, pool());
    } else if (way == 1) {
      for (size_t k = 0; k < P; ++k)
        pool().parallel_for(2, [&](int64_t t, int) { matmul(halves[2 * k + t]->packed, x.data(), y[t].data(), 1, solo); });
    } else {
      pool().parallel_for(2, [&](int64_t t, int) {
        if (way == 2) {
          for (size_t k = t * P / 2; k < (t + 1) * P / 2; ++k) matmul(whole[k]->packed, x.data(), y[t].data(), 1, solo);
        } else {
          for (size_t k = 0; k < P; ++k) matmul(halves[2 * k + t]->packed, x.data(), y[t].data(), 1, solo);
        }
      });
    }
  };
  using Clock = std::chrono::steady_clock;
  constexpr int kWays = 4;
  std::vector<double> shares[2][kWays];  // [upper][way]
  int way = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    membw_pass(2);
    const auto t1 = Clock::now();
    run(way);
    benchmark::DoNotOptimize(y[0].data());
    benchmark::DoNotOptimize(y[1].data());
    const auto t2 = Clock::now();
    const double m = std::chrono::duration<double>(t1 - t0).count(), d = std::chrono::duration<double>(t2 - t1).count();
    const double membw = static_cast<double>(kMembwWords * 8) / m;
    shares[membw > 42e9 ? 1 : 0][way].push_back(bytes / d / membw);
    state.SetIterationTime(d);
    way = (way + 1) % kWays;
  }
  const char* names[kWays] = {"matmul", "halves_sync", "layers_nosync", "halves_nosync"};
  for (int u = 0; u < 2; ++u)
    for (int i = 0; i < kWays; ++i) {
      std::vector<double>& v = shares[u][i];
      const std::string level = u ? "up_" : "lo_";
      state.counters[level + "n" + std::to_string(i)] = static_cast<double>(v.size());
      if (v.empty()) continue;
      std::sort(v.begin(), v.end());
      state.counters[level + names[i]] = v[v.size() / 2];
    }
}

int register_all() {
  for (const char* type : {"Q4_0", "Q8_0"})
    benchmark::RegisterBenchmark((std::string("decode_sync/") + type).c_str(), bm_decode_sync, type)
        ->Unit(benchmark::kMillisecond)
        ->UseManualTime();
  for (const char* type : {"Q4_0", "Q8_0", "Q4_K", "Q6_K", "Q5_K", "MLX4", "F16"})
    benchmark::RegisterBenchmark((std::string("decode/") + type).c_str(), bm_decode, type)
        ->ArgNames({"prefetch", "streams"})
        ->ArgsProduct({{0, 256, 512, 768, 1024, 1536, 2048, 4096}, {1, 2}})
        ->Unit(benchmark::kMillisecond)
        ->UseManualTime();
  benchmark::RegisterBenchmark("membw", bm_membw)->Arg(1)->Arg(2)->Arg(4)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("membw_prefetch", bm_membw_prefetch)
      ->Arg(256)->Arg(512)->Arg(768)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();
  for (const char* type : {"Q4_0", "Q8_0", "Q4_K", "Q6_K", "Q5_K", "MLX4", "F16", "BF16", "F32"}) {
    for (const Shape& s : kShapes) {
      benchmark::RegisterBenchmark((std::string("gemv/") + type + "/" + s.name).c_str(), bm_matmul, type, s, 1)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
      if (s.rows < 100000)  // prefill on the output matrix happens for one row per sequence only
        benchmark::RegisterBenchmark((std::string("gemm512/") + type + "/" + s.name).c_str(), bm_matmul, type, s,
                                     512)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
    }
  }
  return 0;
}
const int registered = register_all();

}  // namespace
}  // namespace splash

BENCHMARK_MAIN();
