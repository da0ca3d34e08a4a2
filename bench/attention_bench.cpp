// Decode attention micro-benchmark at the Qwen3-0.6B shape (28 layers, 16 query heads, 8 KV heads,
// head_dim 128): one query token over C cached tokens, every layer in turn as a decode step runs
// them. From 3,000 tokens the pool (170 MB in int8) is far larger than the caches, so the pages come
// from memory; at 32-128 tokens (2-7.5 MB) the kernels run with the KV in cache (their fixed
// costs). Reported as the KV bytes read per step / time (GB/s), to set beside `bench_matmul membw`;
// read/ctx:3000 is a plain read of the same bytes in the same order.
//   bench_attention [--benchmark_filter=decode/int8/ctx:3000] ; SPLASH_BENCH_THREADS=1 for one thread,
//   SPLASH_BENCH_ISA=avx2 for the AVX2 kernels on an AVX-512 machine
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/attention.h"
#include "core/weight_arena.h"

namespace splash {
namespace {

ThreadPool& pool() {
  static ThreadPool p([] {
    const char* t = std::getenv("SPLASH_BENCH_THREADS");
    return t ? std::atoi(t) : 2;
  }());
  return p;
}

constexpr int kLayers = 28, kHeads = 16, kKvHeads = 8, kHeadDim = 128;

void bm_decode(benchmark::State& state, KvFormat format) {
  const int64_t ctx = state.range(0);
  KvPageGeometry geo;
  geo.format = format;
  geo.n_layer = kLayers;
  geo.n_kv_head = kKvHeads;
  geo.head_dim = kHeadDim;
  const int64_t n_pages = (ctx + kKvPageTokens - 1) / kKvPageTokens;
  ArenaBuffer kv = ArenaBuffer::allocate(static_cast<size_t>(n_pages * geo.page_bytes()));
  // Random codes and sane scales (what kv_store_row writes for unit-normal rows: ~max|x| / 127).
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  uint8_t* base = kv.data();
  for (size_t i = 0; i + 8 <= kv.size(); i += 8) {
    const uint64_t r = (static_cast<uint64_t>(rng()) << 32) | rng();
    std::memcpy(base + i, &r, 8);
  }
  if (format == KvFormat::kInt8) {
    for (int64_t pg = 0; pg < n_pages; ++pg)
      for (int64_t blk = 0; blk < 2 * kLayers; ++blk) {
        float* sc = reinterpret_cast<float*>(base + pg * geo.page_bytes() + blk * geo.block_bytes() + geo.scales_offset(0));
        for (int j = 0; j < kKvHeads * kKvPageTokens; ++j) sc[j] = 0.02f;
      }
  } else {  // bf16: small finite values (random words may be NaN)
    auto* w = reinterpret_cast<uint16_t*>(base);
    for (size_t i = 0; i < kv.size() / 2; ++i) w[i] = static_cast<uint16_t>(0x3c00 | (w[i] & 0x80ff));
  }
  // Pages in a shuffled order, as a pool that has served other sequences hands them out.
  std::vector<int32_t> pages(static_cast<size_t>(n_pages));
  for (int64_t i = 0; i < n_pages; ++i) pages[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  if (state.range(1) != 0) std::shuffle(pages.begin(), pages.end(), rng);
  std::vector<float> q(static_cast<size_t>(kHeads * kHeadDim)), out(q.size());
  for (auto& x : q) x = nd(rng);
  AttentionParams p;
  p.n_head = kHeads;
  p.n_kv_head = kKvHeads;
  p.head_dim = kHeadDim;
  if (const char* isa = std::getenv("SPLASH_BENCH_ISA"); isa != nullptr && std::string(isa) == "avx2")
    p.level = IsaLevel::kAvx2;
  AttentionScratch scratch;
  PagedKvView view;
  view.geo = geo;
  view.n_tokens = ctx;
  view.pool = kv.data();
  view.pages = pages.data();
  for (auto _ : state) {
    for (int il = 0; il < kLayers; ++il) {
      view.layer = il;
      attention(q.data(), 1, ctx - 1, view, p, out.data(), pool(), &scratch);
    }
    benchmark::DoNotOptimize(out.data());
  }
  const double row_bytes = static_cast<double>(geo.head_bytes()) / kKvPageTokens +
                           (format == KvFormat::kInt8 ? 4.0 : 0.0);  // one token of one head
  const double bytes = 2.0 * kLayers * kKvHeads * static_cast<double>(ctx) * row_bytes;
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// The bandwidth ceiling for the same bytes in the same order: every layer's K and V blocks of every
// page summed as 64-bit words, the pages split between the threads as decode splits them.
void bm_read(benchmark::State& state) {
  const int64_t ctx = state.range(0);
  KvPageGeometry geo;
  geo.n_layer = kLayers;
  geo.n_kv_head = kKvHeads;
  geo.head_dim = kHeadDim;
  const int64_t n_pages = (ctx + kKvPageTokens - 1) / kKvPageTokens;
  ArenaBuffer kv = ArenaBuffer::allocate(static_cast<size_t>(n_pages * geo.page_bytes()));
  std::memset(kv.data(), 1, kv.size());
  std::vector<uint64_t> sums(64);
  for (auto _ : state) {
    for (int il = 0; il < kLayers; ++il) {
      pool().parallel_for(pool().size(), [&](int64_t t, int) {
        const int64_t p0 = n_pages * t / pool().size(), p1 = n_pages * (t + 1) / pool().size();
        uint64_t s0 = 0, s1 = 0;
        for (int64_t pg = p0; pg < p1; ++pg) {
          const auto* w = reinterpret_cast<const uint64_t*>(kv.data() + pg * geo.page_bytes() + geo.k_offset(il));
          const int64_t words = 2 * geo.block_bytes() / 8;
          for (int64_t i = 0; i < words; i += 2) {
            s0 += w[i];
            s1 ^= w[i + 1];
          }
        }
        sums[static_cast<size_t>(t)] += s0 + s1;
      });
    }
    benchmark::DoNotOptimize(sums.data());
  }
  const double bytes = 2.0 * kLayers * static_cast<double>(n_pages) * static_cast<double>(geo.block_bytes());
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
  benchmark::RegisterBenchmark("read", bm_read)->Arg(3000)->ArgName("ctx")->Unit(benchmark::kMillisecond)->UseRealTime();
  for (auto [name, f] : {std::pair{"int8", KvFormat::kInt8}, std::pair{"bf16", KvFormat::kBF16}})
    benchmark::RegisterBenchmark((std::string("decode/") + name).c_str(),
                                 [f = f](benchmark::State& s) { bm_decode(s, f); })
        ->ArgsProduct({{32, 64, 128, 512, 3000, 8000}, {0, 1}})
        ->ArgNames({"ctx", "shuffled"})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
}

}  // namespace
}  // namespace splash

int main(int argc, char** argv) {
  splash::register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
