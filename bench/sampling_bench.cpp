// Sampler cost per token at Qwen3's vocabulary (151,936), for the settings clients actually send.
// Logits: normal(0, 2) plus ten strong tokens (a peaked, LLM-like row), or normal(0, 3) (flat).
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "sampling/logprobs.h"
#include "sampling/sampler.h"

namespace splash {
namespace {

std::vector<float> make_row(bool peaked) {
  std::mt19937 gen(1);
  auto u01 = [&] { return (static_cast<double>(gen()) + 0.5) / 4294967296.0; };
  std::vector<float> row(151936);
  const double sigma = peaked ? 2.0 : 3.0;
  for (auto& l : row) l = static_cast<float>(sigma * std::sqrt(-2.0 * std::log(u01())) * std::cos(6.2831853 * u01()));
  if (peaked) {
    for (int j = 0; j < 10; ++j) row[j * 9973] = 12.0f + 0.3f * j;
  }
  return row;
}

void run(benchmark::State& state, SamplingParams p) {
  p.seed = 1;
  Sampler s = std::move(Sampler::create(p)).value();
  for (int i = 0; i < 64; ++i) s.accept(i * 7);
  const auto base = make_row(state.range(0) != 0);
  std::vector<float> row(base.size());
  for (auto _ : state) {
    state.PauseTiming();
    row = base;
    state.ResumeTiming();
    benchmark::DoNotOptimize(s.sample(row).ok());
  }
  state.SetLabel(state.range(0) ? "peaked" : "flat");
}

SamplingParams with(float t, int32_t k, float top_p, float min_p, float rep = 1.0f) {
  SamplingParams p;
  p.temperature = t;
  p.top_k = k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.repetition_penalty = rep;
  return p;
}

void BM_Greedy(benchmark::State& st) { run(st, with(0, 0, 1, 0)); }
void BM_PlainT1(benchmark::State& st) { run(st, with(1, 0, 1, 0)); }
void BM_TopK40(benchmark::State& st) { run(st, with(0.7f, 40, 1, 0)); }
void BM_TopP095(benchmark::State& st) { run(st, with(1, 0, 0.95f, 0)); }
void BM_MinP005(benchmark::State& st) { run(st, with(1, 0, 1, 0.05f)); }
void BM_Qwen3Chat(benchmark::State& st) { run(st, with(0.7f, 20, 0.8f, 0)); }
void BM_LlamaCppDefault(benchmark::State& st) { run(st, with(0.8f, 40, 0.95f, 0.05f, 1.1f)); }

// What `logprobs` adds per generated token (engine/lane.cpp): copying the raw row before sampling
// changes it, then token_logprob; the argument is top_logprobs (0 or 20), on the peaked row.
void BM_Logprobs(benchmark::State& st) {
  const auto base = make_row(true);
  std::vector<float> raw, scratch;
  for (auto _ : st) {
    raw.assign(base.begin(), base.end());
    benchmark::DoNotOptimize(token_logprob(raw, 7, static_cast<int>(st.range(0)), scratch).logprob);
  }
}

BENCHMARK(BM_Logprobs)->Arg(0)->Arg(20)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Greedy)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PlainT1)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TopK40)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TopP095)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MinP005)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Qwen3Chat)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LlamaCppDefault)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace splash

BENCHMARK_MAIN();
