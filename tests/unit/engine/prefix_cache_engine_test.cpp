// The prefix cache inside the engine: a second conversation sharing a prefix reuses it (cached_tokens,
// prefill rows) and returns the same greedy tokens as a cold run, on tiny random llama and qwen3 models
// and on stories15M when present; eviction under a small pool; two simultaneous same-prefix requests
// compute the prefix once; cache_prompt = false writes nothing.
#include <cstdlib>

#include "scheduler_test_util.h"

namespace splash {
namespace {

using namespace sched_test;

// A tiny preset written once into this process's temp dir (beside tiny_model_path's).
std::string preset_path(const std::string& preset) {
  const auto dir = std::filesystem::temp_directory_path() / ("splash_sched_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string p = (dir / (preset + ".gguf")).string();
  if (!std::filesystem::exists(p)) {
    auto spec = test_model_preset(preset);
    EXPECT_TRUE(spec.ok()) << spec.error_message();
    Status st = write_test_model(*spec, p);
    EXPECT_TRUE(st.ok()) << st.error_message();
  }
  return p;
}

TinyModelCleanup cleanup;

// Token ids in [3, 203) from a seed: prompts that share exactly what the test says they share.
std::vector<int32_t> ids(int32_t bos, size_t n, int32_t salt) {
  std::vector<int32_t> p = {bos};
  for (size_t i = 1; i < n; ++i) p.push_back(static_cast<int32_t>(3 + (i * 7 + static_cast<size_t>(salt) * 13 + i * i * static_cast<size_t>(salt + 1)) % 200));
  return p;
}

// a, then b without its first (BOS) token.
std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin() + 1, b.end());
  return a;
}

class PrefixCacheEngine : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string& preset = GetParam();
    m_ = load_model(preset == "tiny-llama" ? tiny_model_path() : preset_path(preset));
    ASSERT_TRUE(m_);
  }
  std::unique_ptr<Engine> engine(EngineOptions o = test_options()) const {
    auto e = Engine::create(m_->model, *m_->tokenizer, o);
    EXPECT_TRUE(e.ok()) << e.error_message();
    return e.ok() ? std::move(*e) : nullptr;
  }
  // Runs r on e and waits for it.
  static std::unique_ptr<Recorder> run(Engine& e, const EngineRequest& r) {
    auto rec = std::make_unique<Recorder>();
    auto id = e.submit(r, rec->callback());
    EXPECT_TRUE(id.ok()) << id.error_message();
    EXPECT_TRUE(rec->wait_done());
    return rec;
  }
  // The tokens of r on a fresh engine without a prefix cache.
  std::vector<int32_t> cold(const EngineRequest& r) const {
    EngineOptions o = test_options();
    o.prefix_cache = false;
    auto e = engine(o);
    return run(*e, r)->tokens();
  }
  int32_t bos() const { return m_->tokenizer->bos_id() >= 0 ? m_->tokenizer->bos_id() : 1; }
  static EngineRequest req(std::vector<int32_t> prompt, int64_t n = 12) {
    EngineRequest r = greedy_request(std::move(prompt), n);
    r.ignore_eos = true;
    return r;
  }

  std::unique_ptr<LoadedModel> m_;
};

TEST_P(PrefixCacheEngine, SecondConversationReusesTheSharedPrefix) {
  const auto shared = ids(bos(), 150, 1);  // 4 whole pages + 22 tokens
  const EngineRequest a = req(concat(shared, ids(bos(), 40, 2)));
  const EngineRequest b = req(concat(shared, ids(bos(), 30, 3)));
  ASSERT_NE(a.prompt[150], b.prompt[150]);
  auto e = engine();
  auto ra = run(*e, a);
  EXPECT_EQ(ra->done().cached_tokens, 0);
  const int64_t rows_before = e->status().scheduler.prefill_rows;
  auto rb = run(*e, b);
  // Every whole page of the shared prefix, plus the shared tokens of the next page (copied).
  EXPECT_EQ(rb->done().cached_tokens, 150);
  EXPECT_EQ(e->status().scheduler.prefill_rows - rows_before, static_cast<int64_t>(b.prompt.size()) - 150);
  EXPECT_EQ(rb->tokens(), cold(b));
  EXPECT_EQ(ra->tokens(), cold(a));
  const EngineStatus s = e->status();
  EXPECT_TRUE(s.cache_enabled);
  EXPECT_EQ(s.cache.hits, 1);
  EXPECT_EQ(s.cache.cold_misses, 1);
  EXPECT_EQ(s.cache.reused_tokens, 150);
  EXPECT_GT(s.cache.kv_pages, 0);
  EXPECT_EQ(s.kv.pages_active, 0);
  EXPECT_EQ(s.kv.pages_cache + s.kv.pages_free, s.kv.pages_allocated);

  // A follow-up turn resending a's conversation (prompt + answer) reuses its whole pages, answer included.
  auto ctx_a = a.prompt;
  const auto answer_a = ra->tokens();
  ctx_a.insert(ctx_a.end(), answer_a.begin(), answer_a.end());
  const EngineRequest follow = req(concat(ctx_a, ids(bos(), 20, 4)));
  auto rf = run(*e, follow);
  // a's KV held prompt + answer minus the last sampled token; its whole pages were published.
  const int64_t kv_a = static_cast<int64_t>(ctx_a.size()) - 1;
  EXPECT_EQ(rf->done().cached_tokens, kv_a / kKvPageTokens * kKvPageTokens);
  EXPECT_EQ(rf->tokens(), cold(follow));

  // The same prompt again: b's whole pages (its KV ended with prompt + answer - 1 tokens).
  auto again = run(*e, b);
  const int64_t kv_b = static_cast<int64_t>(b.prompt.size() + rb->tokens().size()) - 1;
  EXPECT_EQ(again->done().cached_tokens, kv_b / kKvPageTokens * kKvPageTokens);
  EXPECT_EQ(again->tokens(), rb->tokens());
}

TEST_P(PrefixCacheEngine, ProgressReportsTheCachedTokens) {
  const auto shared = ids(bos(), 100, 5);
  auto e = engine();
  run(*e, req(concat(shared, ids(bos(), 40, 6))));  // its whole pages cover the shared 100 tokens
  EngineRequest b = req(concat(shared, ids(bos(), 50, 7)));
  b.want_progress = true;
  auto rb = run(*e, b);
  bool saw = false;
  for (const EngineEvent& ev : rb->events())
    if (ev.kind == EngineEvent::kProgress) {
      EXPECT_EQ(ev.cache, 100);
      EXPECT_GE(ev.processed, 100);
      saw = true;
    }
  EXPECT_TRUE(saw);
}

TEST_P(PrefixCacheEngine, SimultaneousRequestsComputeASharedColdPrefixOnce) {
  const auto shared = ids(bos(), 200, 8);
  const EngineRequest a = req(concat(shared, ids(bos(), 40, 9)));  // a's prefill ends past page 7
  const EngineRequest b = req(concat(shared, ids(bos(), 25, 10)));
  EngineOptions o = test_options(2);
  o.chunk_tokens = 64;
  auto e = engine(o);
  Recorder ra, rb;
  ASSERT_TRUE(e->submit(a, ra.callback()).ok());
  ASSERT_TRUE(e->submit(b, rb.callback()).ok());
  ASSERT_TRUE(ra.wait_done());
  ASSERT_TRUE(rb.wait_done());
  EXPECT_EQ(ra.done().cached_tokens + rb.done().cached_tokens, 200);
  // The shared 200 tokens ran through the model once.
  EXPECT_EQ(e->status().scheduler.prefill_rows, static_cast<int64_t>(a.prompt.size() + b.prompt.size()) - 200);
  EXPECT_EQ(ra.tokens(), cold(a));
  EXPECT_EQ(rb.tokens(), cold(b));
}

TEST_P(PrefixCacheEngine, EvictsUnderASmallPoolAndStaysCorrect) {
  EngineOptions o = test_options(2);
  o.kv_pages = 16;  // 512 positions: a few conversations' worth
  auto e = engine(o);
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(req(ids(bos(), 150, 20 + i), 16));
  for (const auto& r : reqs) {
    auto rec = run(*e, r);
    EXPECT_EQ(rec->done().finish, FinishReason::kLength) << rec->done().error;
    EXPECT_EQ(rec->tokens(), cold(r));
  }
  EngineStatus s = e->status();
  EXPECT_GT(s.cache.kv_evictions, 0);
  EXPECT_LE(s.cache.kv_pages, 16);
  // The newest conversation is still cached; the oldest was evicted.
  auto last = run(*e, reqs.back());
  EXPECT_EQ(last->done().cached_tokens, 149);
  EXPECT_EQ(last->tokens(), cold(reqs.back()));
  auto first = run(*e, reqs.front());
  EXPECT_LT(first->done().cached_tokens, 149);
  EXPECT_EQ(first->tokens(), cold(reqs.front()));
  // Concurrent requests on the full pool: the cache gives pages back before any lane is preempted.
  Recorder r1, r2;
  ASSERT_TRUE(e->submit(reqs[1], r1.callback()).ok());
  ASSERT_TRUE(e->submit(reqs[2], r2.callback()).ok());
  ASSERT_TRUE(r1.wait_done());
  ASSERT_TRUE(r2.wait_done());
  EXPECT_EQ(r1.tokens(), cold(reqs[1]));
  EXPECT_EQ(r2.tokens(), cold(reqs[2]));
  s = e->status();
  EXPECT_EQ(s.scheduler.preemptions, 0);
  EXPECT_EQ(s.requests.failed, 0);
}

TEST_P(PrefixCacheEngine, CachePromptFalseReadsButWritesNothing) {
  const auto shared = ids(bos(), 120, 30);
  auto e = engine();
  EngineRequest a = req(concat(shared, ids(bos(), 10, 31)));
  a.cache_prompt = false;
  run(*e, a);
  EXPECT_EQ(e->status().cache.kv_pages, 0);
  auto rb = run(*e, req(concat(shared, ids(bos(), 10, 32))));
  EXPECT_EQ(rb->done().cached_tokens, 0);
  EngineRequest c = req(concat(shared, ids(bos(), 10, 33)));
  c.cache_prompt = false;
  auto rc = run(*e, c);  // reads what b wrote
  EXPECT_EQ(rc->done().cached_tokens, 120);
}

TEST_P(PrefixCacheEngine, DisabledCacheReusesNothing) {
  EngineOptions o = test_options();
  o.prefix_cache = false;
  auto e = engine(o);
  const EngineRequest a = req(ids(bos(), 100, 40));
  run(*e, a);
  EXPECT_EQ(run(*e, a)->done().cached_tokens, 0);
  EXPECT_FALSE(e->status().cache_enabled);
  EXPECT_EQ(e->status().kv.pages_free, e->status().kv.pages_allocated);
}

INSTANTIATE_TEST_SUITE_P(Tiny, PrefixCacheEngine, ::testing::Values("tiny-llama", "tiny-qwen3"));

// --- stories15M: real weights, real text (skipped when the demo model is absent) ---------------------

TEST(PrefixCacheStories15M, SecondStoryReusesTheSharedOpening) {
  const char* home = std::getenv("HOME");
  const std::string path = std::string(home ? home : "") + "/.cache/splash/demo/stories15M.bin";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  auto m = load_model(path);
  ASSERT_TRUE(m);
  auto encode = [&](const std::string& text) {
    std::vector<int32_t> p = {m->tokenizer->bos_id()};
    for (int32_t id : m->tokenizer->encode(text, false, false)) p.push_back(id);
    return p;
  };
  const std::string opening =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine. One day, "
      "she saw a big red ball in the park. She ran to the ball and kicked it very hard. The ball flew over the "
      "fence and into the garden of an old man.";
  const EngineRequest a = greedy_request(encode(opening + " The old man was angry."), 24);
  const EngineRequest b = greedy_request(encode(opening + " Lily was sad and began to cry."), 24);
  auto e = Engine::create(m->model, *m->tokenizer, test_options(2));
  ASSERT_TRUE(e.ok()) << e.error_message();
  Recorder ra, rb;
  ASSERT_TRUE((*e)->submit(a, ra.callback()).ok());
  ASSERT_TRUE(ra.wait_done());
  ASSERT_TRUE((*e)->submit(b, rb.callback()).ok());
  ASSERT_TRUE(rb.wait_done());
  size_t shared = 0;
  while (a.prompt[shared] == b.prompt[shared]) ++shared;
  EXPECT_GE(shared, 64u);
  // The shared whole pages at least; all shared tokens when a's KV covered their last page.
  EXPECT_GE(rb.done().cached_tokens, static_cast<int64_t>(shared) / kKvPageTokens * kKvPageTokens);
  EXPECT_LE(rb.done().cached_tokens, static_cast<int64_t>(shared));
  EngineOptions o = test_options(1);
  o.prefix_cache = false;
  auto cold = Engine::create(m->model, *m->tokenizer, o);
  ASSERT_TRUE(cold.ok());
  Recorder rc;
  ASSERT_TRUE((*cold)->submit(b, rc.callback()).ok());
  ASSERT_TRUE(rc.wait_done());
  EXPECT_EQ(rb.tokens(), rc.tokens());
  EXPECT_EQ(rb.text(), rc.text());
  EXPECT_FALSE(rb.text().empty());
}

}  // namespace
}  // namespace splash
