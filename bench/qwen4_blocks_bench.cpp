// The qwen4_exp (Flash-Next) blocks at the shipped shapes (hidden 2560, 4 streams, rank 320; QSA 24
// heads of 256 over 2 KV heads, indexer 4 x 128, budget 2048 = 512 blocks of 4; PLE 2560 wide) with
// bf16 weights, one layer each:
//   hc_mix/rows:N          one hyper-connection mix with inject over N rows
//   ple/rows:N             the PLE layer's math after the gather over N rows
//   qsa_decode/ctx:C       one QSA decode step after C tokens (int8 KV pages): at C <= 2050 the
//                          query sees every token (the paged kernel), beyond it 512 selected blocks
//                          plus the tail are gathered from the pages
// Weights and cached keys are random; the state for qsa_decode is written directly (a real prefill
// of 32K tokens through the projections would take minutes here).
//   bench_qwen4_blocks [--benchmark_filter=qsa] ; SPLASH_BENCH_THREADS=1 for one thread
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "core/half.h"
#include "model/blocks/hyper_connection.h"
#include "model/blocks/ple_layer.h"
#include "model/blocks/qsa_attention.h"

namespace splash {
namespace {

ThreadPool& pool() {
  static ThreadPool p([] {
    const char* t = std::getenv("SPLASH_BENCH_THREADS");
    return t ? std::atoi(t) : 2;
  }());
  return p;
}

constexpr int64_t kH = 2560, kHc = 4, kRank = 320, kBank = kHc * kH;
constexpr int64_t kHeads = 24, kKvHeads = 2, kHeadDim = 256, kIdxHeads = 4, kIdxDim = 128, kRot = 64;

std::mt19937& rng() {
  static std::mt19937 r(43);
  return r;
}

std::vector<float> normal(int64_t n, float scale, float offset = 0.0f) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = offset + scale * nd(rng());
  return v;
}

// A random bf16 [rows, cols] matrix; `store` keeps the bytes alive (pack_weights views bf16 below
// AVX-512 and repacks at it).
PackedWeights bf16_matrix(int64_t rows, int64_t cols, std::vector<std::vector<uint16_t>>& store) {
  const std::vector<float> f = normal(rows * cols, 1.0f / std::sqrt(static_cast<float>(cols)));
  std::vector<uint16_t>& b = store.emplace_back(f.size());
  for (size_t i = 0; i < f.size(); ++i) b[i] = f32_to_bf16(f[i]);
  auto p = pack_weights(DType::kBF16, b.data(), rows, cols);
  SPLASH_CHECK(p.ok());
  return std::move(p).value();
}

const HyperConnectionShape kShape{kH, kHc, 1e-6f};

void bm_hc_mix(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<std::vector<uint16_t>> store;
  HyperConnectionWeights w;
  w.norm = normal(kBank, 0.1f, 1.0f);
  w.down = bf16_matrix(kRank, kBank, store);
  w.up = bf16_matrix(kBank, kRank, store);
  w.inject = bf16_matrix(kHc, kBank, store);
  const std::vector<float> bank = normal(n * kBank, 1.0f);
  std::vector<float> m(static_cast<size_t>(n * kH)), inject(static_cast<size_t>(n * kHc));
  HyperConnectionScratch scratch;
  for (auto _ : state) {
    hc_mix(w, kShape, bank.data(), n, m.data(), inject.data(), scratch, pool(), IsaLevel::kAvx512);
    benchmark::DoNotOptimize(m.data());
  }
  state.counters["rows/s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}

void bm_ple(benchmark::State& state) {
  const int64_t n = state.range(0);
  std::vector<std::vector<uint16_t>> store;
  PleLayerWeights w;
  w.key = bf16_matrix(kBank, kH, store);
  w.value = bf16_matrix(kH, kH, store);
  w.norm_key = normal(kBank, 0.1f, 1.0f);
  w.norm_query = normal(kBank, 0.1f, 1.0f);
  w.norm_conv = normal(kBank, 0.1f, 1.0f);
  w.conv = normal(kBank * 4, 0.3f);
  const PleLayerShape shape{kShape, kH, 4, 3};
  const std::vector<float> rows = normal(n * kH, 1.0f), bank = normal(n * kBank, 1.0f);
  std::vector<float> conv_state(static_cast<size_t>(shape.state_floats())), out(static_cast<size_t>(n * kBank));
  PleLayerScratch scratch;
  for (auto _ : state) {
    ple_layer(w, shape, rows.data(), bank.data(), n, conv_state.data(), out.data(), scratch, pool(), IsaLevel::kAvx512);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["rows/s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}

void bm_qsa_decode(benchmark::State& state) {
  const int64_t ctx = state.range(0);
  const QsaShape s{kH, kHeads, kKvHeads, kHeadDim, kIdxHeads, kIdxDim, 4, 512, 1e-6f};
  std::vector<std::vector<uint16_t>> store;
  QsaWeights w;
  w.q = bf16_matrix(2 * kHeads * kHeadDim, kH, store);
  w.k = bf16_matrix(kKvHeads * kHeadDim, kH, store);
  w.v = bf16_matrix(kKvHeads * kHeadDim, kH, store);
  w.o = bf16_matrix(kH, kHeads * kHeadDim, store);
  w.q_norm = w.k_norm = normal(kHeadDim, 0.1f, 1.0f);
  w.index_qk = bf16_matrix((kIdxHeads + 1) * kIdxDim, kH, store);
  w.index_q_norm = w.index_k_norm = normal(kIdxDim, 0.1f, 1.0f);
  auto rope = RopeTable::create({.head_dim = kHeadDim, .n_rot = kRot, .theta = 1e7}, 0, ctx + 1);
  auto index_rope = RopeTable::create({.head_dim = kIdxDim, .n_rot = kRot, .theta = 1e7}, 0, ctx + 1);
  auto kv = KvPagePool::create({.n_layer = 1,
                                .n_kv_head = kKvHeads,
                                .head_dim = kHeadDim,
                                .n_pages = ctx / kKvPageTokens + 2,
                                .format = KvFormat::kInt8});
  SPLASH_CHECK(rope.ok() && index_rope.ok() && kv.ok());
  KvPagePool& kv_pool = kv.value();
  KvPageTable table;
  SPLASH_CHECK(kv_pool.append(table, ctx).ok());
  const int64_t chunk = 1024;
  for (int64_t p = 0; p < ctx; p += chunk) {
    const int64_t c = std::min(chunk, ctx - p);
    const std::vector<float> k = normal(c * kKvHeads * kHeadDim, 1.0f), v = normal(c * kKvHeads * kHeadDim, 1.0f);
    kv_pool.write(table, 0, p, c, k.data(), v.data());
  }
  QsaIndexerCache cache;
  cache.n_tokens = ctx;
  cache.index_keys = normal(ctx * kIdxDim, 1.0f);
  cache.block_keys = normal(ctx / 4 * kIdxDim, 1.0f);
  const std::vector<float> x = normal(kH, 1.0f);
  std::vector<float> out(kH);
  QsaScratch scratch;
  for (auto _ : state) {
    SPLASH_CHECK(kv_pool.append(table, 1).ok());
    qsa_attention(w, s, rope.value(), index_rope.value(), {&kv_pool, &table, 0}, cache, x.data(), 1, out.data(),
                  scratch, pool(), IsaLevel::kAvx512);
    benchmark::DoNotOptimize(out.data());
    qsa_truncate(s, cache, ctx);
    kv_pool.truncate(table, ctx);
  }
  kv_pool.release(table);
}

BENCHMARK(bm_hc_mix)->Name("hc_mix")->ArgName("rows")->Arg(1)->Arg(256)->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_ple)->Name("ple")->ArgName("rows")->Arg(1)->Arg(256)->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_qsa_decode)
    ->Name("qsa_decode")
    ->ArgName("ctx")
    ->Arg(2048)
    ->Arg(8192)
    ->Arg(32768)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace splash

BENCHMARK_MAIN();
