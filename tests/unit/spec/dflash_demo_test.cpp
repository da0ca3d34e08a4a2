// The trained demo drafter on the real target (stories15M): a minimal greedy verify loop (propose,
// verify the block in one target pass with hidden taps, keep the accepted prefix + the target's
// token, crop KV, observe only committed rows) must reproduce plain greedy decoding token for token,
// and prints the mean accepted length. Skipped when ~/.cache/splash/demo has no stories15M-F32.gguf
// or no trained drafter (scripts/demo trains it; SPLASH_DFLASH_DEMO_DRAFTER=<dir> picks another).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "formats/model_files.h"
#include "model/model.h"
#include "spec/dflash/dflash_drafter.h"

namespace splash {
namespace {

std::string demo_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  if (xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/splash/demo";
  return std::string(home != nullptr ? home : "") + "/.cache/splash/demo";
}

int32_t argmax(const float* row, int64_t n) { return static_cast<int32_t>(std::max_element(row, row + n) - row); }

TEST(DFlashDemo, GreedySpeculativeEqualsPlainOnStories15M) {
  namespace fs = std::filesystem;
  const std::string model_path = demo_dir() + "/stories15M-F32.gguf";
  const char* env = std::getenv("SPLASH_DFLASH_DEMO_DRAFTER");
  const std::string drafter_dir = env != nullptr && *env != '\0' ? env : demo_dir() + "/stories15M-dflash";
  if (!fs::exists(model_path) || !fs::exists(drafter_dir + "/config.json"))
    GTEST_SKIP() << "no " << model_path << " or " << drafter_dir;
  auto files = ModelFiles::open(model_path);
  ASSERT_TRUE(files.ok()) << files.error_message();
  auto model = Model::load(*files);
  ASSERT_TRUE(model.ok()) << model.error_message();
  ThreadPool pool(2);
  auto kv = KvPagePool::create(model->kv_cache_config(KvFormat::kF32, 32));
  ASSERT_TRUE(kv.ok());
  auto source = make_dflash_source(drafter_dir, *model, 1);
  ASSERT_TRUE(source.ok()) << source.error_message();
  auto drafter = (*source)->make();
  const std::vector<int> taps = drafter->hidden_layers();
  const int64_t n_vocab = model->config().n_vocab, d = model->config().n_embd;
  const int n_new = 96;
  const int32_t bos = 1;

  // Plain greedy.
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  };
  std::vector<int32_t> plain{bos};
  SequenceState a;
  const auto t_plain = Clock::now();
  int32_t next = bos;
  for (int i = 0; i < n_new; ++i) {
    SequenceRun run{&a, {&next, 1}, LogitRows::kLast};
    auto out = model->forward({&run, 1}, *kv, pool);
    ASSERT_TRUE(out.ok());
    next = argmax(out->logits_row(0), n_vocab);
    plain.push_back(next);
  }
  const double plain_ms = ms_since(t_plain);
  release_sequence(*kv, a);

  // Speculative: hidden rows of every fed token, committed ones handed to the drafter.
  ForwardOptions fo;
  fo.hidden_layers = taps;
  auto rows_of = [&](const ForwardOutput& out, int64_t first, int64_t n) {
    std::vector<float> rows(static_cast<size_t>(n * taps.size() * d));
    const int64_t total = out.token_offset.back();
    for (int64_t r = 0; r < n; ++r)
      for (size_t l = 0; l < taps.size(); ++l)
        std::copy_n(out.hidden.data() + (l * total + first + r) * d, d, rows.data() + (r * taps.size() + l) * d);
    return rows;
  };
  SequenceState b;
  std::vector<int32_t> committed{bos};
  {
    SequenceRun run{&b, {committed.data(), 1}, LogitRows::kLast};
    auto out = model->forward({&run, 1}, *kv, pool, fo);
    ASSERT_TRUE(out.ok());
    committed.push_back(argmax(out->logits_row(0), n_vocab));
    auto rows = rows_of(*out, 0, 1);
    ASSERT_TRUE(drafter->observe({committed, rows.data(), 1, 0, static_cast<int64_t>(taps.size()) * d}).ok());
  }
  int64_t steps = 0, drafted = 0, accepted = 0;
  double draft_ms = 0;
  const auto t_spec = Clock::now();
  while (static_cast<int>(committed.size()) < n_new + 1) {
    const auto t_draft = Clock::now();
    auto props = drafter->propose(7);
    draft_ms += ms_since(t_draft);
    ASSERT_TRUE(props.ok()) << props.error_message();
    std::vector<int32_t> block{committed.back()};
    block.insert(block.end(), props->begin(), props->end());
    const int64_t anchor_pos = static_cast<int64_t>(committed.size()) - 1;
    ASSERT_EQ(b.n_tokens(), anchor_pos);
    SequenceRun run{&b, block, LogitRows::kAll};
    auto out = model->forward({&run, 1}, *kv, pool, fo);
    ASSERT_TRUE(out.ok()) << out.error_message();
    std::vector<int32_t> fresh;
    size_t acc = 0;
    for (;; ++acc) {
      const int32_t t = argmax(out->logits_at(0, static_cast<int64_t>(acc)), n_vocab);
      if (acc < props->size() && (*props)[acc] == t) {
        fresh.push_back(t);
        continue;
      }
      fresh.push_back(t);
      break;
    }
    truncate_sequence(*kv, b, anchor_pos + 1 + static_cast<int64_t>(acc));
    auto rows = rows_of(*out, 0, static_cast<int64_t>(acc) + 1);
    committed.insert(committed.end(), fresh.begin(), fresh.end());
    ASSERT_TRUE(drafter
                    ->observe({fresh, rows.data(), static_cast<int64_t>(acc) + 1, anchor_pos,
                               static_cast<int64_t>(taps.size()) * d})
                    .ok());
    ++steps;
    drafted += static_cast<int64_t>(props->size());
    accepted += static_cast<int64_t>(acc);
  }
  const double spec_ms = ms_since(t_spec);
  release_sequence(*kv, b);
  committed.resize(plain.size());
  EXPECT_EQ(committed, plain);
  const double mean_acc = static_cast<double>(accepted) / static_cast<double>(steps);
  std::printf("stories15M + %s: %lld verify steps, %lld drafted, %lld accepted: %.2f accepted per step, "
              "%.2f tokens per step\n",
              drafter_dir.c_str(), static_cast<long long>(steps), static_cast<long long>(drafted),
              static_cast<long long>(accepted), mean_acc, mean_acc + 1);
  // Wall time on whatever machine runs the test: indicative only (a benchmark, not an assertion).
  std::printf("plain %.1f ms for %d tokens; speculative %.1f ms (drafting %.1f ms, %.2f ms per pass)\n", plain_ms,
              n_new, spec_ms, draft_ms, draft_ms / static_cast<double>(steps));
}

}  // namespace
}  // namespace splash
