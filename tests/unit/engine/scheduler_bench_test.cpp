// Not a test: the measurement behind EngineOptions::mix_prefill (docs/SERVER.md). Disabled; run with
//   test_engine --gtest_also_run_disabled_tests --gtest_filter='*MixVsAlternate*'
// Three requests decode while a 512-token prompt arrives; reports the wall time until all finish,
// the long prompt's time to first token and the decoders' worst inter-token gap, for both modes.
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "scheduler_test_util.h"

namespace splash {
namespace {

using namespace sched_test;

TEST(SchedulerBench, DISABLED_MixVsAlternate) {
  const char* home = std::getenv("HOME");
  const std::string path = std::string(home ? home : "") + "/.cache/splash/demo/stories15M.bin";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  // stories15M was trained on 256 positions; the timing does not care, so widen the RoPE range.
  ModelOptions mo;
  mo.max_context = 1024;
  auto m = load_model(path, mo);
  ASSERT_TRUE(m);
  for (int rep = 0; rep < 2; ++rep)
    for (bool mix : {true, false}) {
      EngineOptions o = test_options(4);
      o.kv_format = KvFormat::kInt8;
      o.chunk_tokens = 64;
      o.mix_prefill = mix;
      auto e = Engine::create(m->model, *m->tokenizer, o);
      ASSERT_TRUE(e.ok()) << e.error_message();
      std::vector<Recorder> dec(3);
      std::vector<std::vector<double>> stamps(3);
      const auto t0 = std::chrono::steady_clock::now();
      auto ms = [&] { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(); };
      for (int i = 0; i < 3; ++i) {
        EngineRequest r = greedy_request({m->tokenizer->bos_id(), 100 + i}, 120);
        r.ignore_eos = true;
        ASSERT_TRUE((*e)->submit(r, [&, i](const EngineEvent& ev) {
                       if (ev.kind == EngineEvent::kText) stamps[i].push_back(ms());
                       dec[i].on_event(ev);
                     }).ok());
      }
      while (dec[0].count(EngineEvent::kText) < 10) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      std::vector<int32_t> p(512);
      for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<int32_t>(200 + (i * 37) % 20000);
      Recorder big;
      ASSERT_TRUE((*e)->submit(greedy_request(p, 8), big.callback()).ok());
      ASSERT_TRUE(big.wait_done());
      for (auto& d : dec) ASSERT_TRUE(d.wait_done());
      const double total = ms();
      double worst_gap = 0;
      for (auto& s : stamps)
        for (size_t i = 1; i < s.size(); ++i) worst_gap = std::max(worst_gap, s[i] - s[i - 1]);
      std::printf("%-11s total %7.1f ms  long-prompt prompt_ms %7.1f  decoders' worst gap %6.1f ms\n",
                  mix ? "mixed" : "alternating", total, big.done().prompt_ms, worst_gap);
    }
}

}  // namespace
}  // namespace splash
