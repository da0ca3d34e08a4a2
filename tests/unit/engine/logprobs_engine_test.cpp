// Engine-side logprobs (EngineRequest::logprobs / prompt_logprobs) on the tiny random-weight model:
// one entry per generated token, greedy = the argmax of its own distribution, the prompt scored by
// prefill rows equal to the same tokens' logprobs when decoded, and scoring that survives chunking,
// preemption and a warm prefix cache.
#include <cmath>

#include "scheduler_test_util.h"

namespace splash {
namespace {

using namespace sched_test;

class EngineLogprobs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { m_ = load_model(tiny_model_path()).release(); }
  static void TearDownTestSuite() {
    delete m_;
    m_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(m_, nullptr); }

  std::unique_ptr<Engine> engine(const EngineOptions& o = test_options()) const {
    auto e = Engine::create(m_->model, *m_->tokenizer, o);
    EXPECT_TRUE(e.ok()) << e.error_message();
    return e.ok() ? std::move(*e) : nullptr;
  }
  std::vector<int32_t> prompt(int n, int salt) const {
    std::vector<int32_t> p = {m_->tokenizer->bos_id()};
    for (int t = 1; t < n; ++t) p.push_back(static_cast<int32_t>(3 + (t * (salt + 3) + salt) % 150));
    return p;
  }
  static std::vector<TokenLogprob> generated(const Recorder& r) {
    std::vector<TokenLogprob> out;
    for (const auto& e : r.events())
      if (e.kind == EngineEvent::kText) {
        EXPECT_EQ(e.logprobs.size(), e.tokens.size());
        out.insert(out.end(), e.logprobs.begin(), e.logprobs.end());
      }
    return out;
  }
  static std::vector<TokenLogprob> scored(const Recorder& r) {
    std::vector<TokenLogprob> out;
    int n_events = 0;
    for (const auto& e : r.events())
      if (e.kind == EngineEvent::kText && !e.prompt_logprobs.empty()) {
        ++n_events;
        out = e.prompt_logprobs;
      }
    EXPECT_EQ(n_events, 1);
    return out;
  }
  static EngineRequest scoring(std::vector<int32_t> p, int top_n) {
    EngineRequest r = greedy_request(std::move(p), 0);
    r.prompt_logprobs = true;
    r.logprobs = top_n;
    return r;
  }

  static inline LoadedModel* m_ = nullptr;
};

TinyModelCleanup cleanup;

TEST_F(EngineLogprobs, GreedyTokensLeadTheirOwnDistribution) {
  EngineRequest r = greedy_request(prompt(12, 1), 24);
  r.ignore_eos = true;
  r.logprobs = 5;
  auto e = engine();
  Recorder rec;
  ASSERT_TRUE(e->submit(r, rec.callback()).ok());
  ASSERT_TRUE(rec.wait_done());
  const auto tokens = rec.tokens();
  const auto lp = generated(rec);
  ASSERT_EQ(lp.size(), tokens.size());
  ASSERT_EQ(tokens.size(), 24u);
  for (size_t i = 0; i < lp.size(); ++i) {
    EXPECT_EQ(lp[i].id, tokens[i]);
    ASSERT_EQ(lp[i].top.size(), 5u);
    EXPECT_EQ(lp[i].top[0].id, tokens[i]) << "token " << i;
    EXPECT_EQ(lp[i].top[0].logprob, lp[i].logprob);
    double mass = 0;
    for (const auto& a : lp[i].top) mass += std::exp(a.logprob);
    EXPECT_LE(mass, 1.0 + 1e-6);
  }
  // Off: no logprobs, same tokens.
  r.logprobs = -1;
  Recorder off;
  ASSERT_TRUE(e->submit(r, off.callback()).ok());
  ASSERT_TRUE(off.wait_done());
  EXPECT_EQ(off.tokens(), tokens);
  for (const auto& ev : off.events()) EXPECT_TRUE(ev.logprobs.empty() && ev.prompt_logprobs.empty());
}

TEST_F(EngineLogprobs, PromptScoringEqualsGeneratedLogprobs) {
  EngineRequest r = greedy_request(prompt(9, 2), 16);
  r.ignore_eos = true;
  r.logprobs = 2;
  auto e = engine();
  Recorder gen;
  ASSERT_TRUE(e->submit(r, gen.callback()).ok());
  ASSERT_TRUE(gen.wait_done());
  std::vector<int32_t> all = r.prompt;
  for (int32_t t : gen.tokens()) all.push_back(t);
  Recorder sc;
  ASSERT_TRUE(e->submit(scoring(all, 2), sc.callback()).ok());
  ASSERT_TRUE(sc.wait_done());
  EXPECT_EQ(sc.done().finish, FinishReason::kLength);
  EXPECT_EQ(sc.done().completion_tokens, 0);
  EXPECT_TRUE(sc.tokens().empty());
  const auto s = scored(sc);
  ASSERT_EQ(s.size(), all.size() - 1);
  for (size_t i = 0; i < s.size(); ++i) EXPECT_EQ(s[i].id, all[i + 1]);
  const auto g = generated(gen);
  for (size_t i = 0; i < g.size(); ++i) {
    const TokenLogprob& p = s[r.prompt.size() - 1 + i];
    EXPECT_NEAR(p.logprob, g[i].logprob, 1e-4) << "token " << i;
    ASSERT_EQ(p.top.size(), 2u);
    EXPECT_EQ(p.top[0].id, g[i].top[0].id);
  }
}

TEST_F(EngineLogprobs, ScoringSurvivesChunksPreemptionAndTheCache) {
  // Scored prompts that then generate (echo with max_tokens > 0). Alone, on a roomy pool: the reference.
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 3; ++i) {
    reqs.push_back(scoring(prompt(40, i), 1));
    reqs.back().max_tokens = 80;
    reqs.back().ignore_eos = true;
  }
  std::vector<std::vector<TokenLogprob>> alone;
  std::vector<std::vector<int32_t>> alone_tokens;
  for (const auto& r : reqs) {
    auto e = engine();
    Recorder rec;
    ASSERT_TRUE(e->submit(r, rec.callback()).ok());
    ASSERT_TRUE(rec.wait_done());
    alone.push_back(scored(rec));
    alone_tokens.push_back(rec.tokens());
    ASSERT_EQ(alone.back().size(), 39u);
  }
  // Three at once on 6 pages (a lane needs 4) with 8-token chunks, the second round with the prompts
  // in the prefix cache: lanes give their pages back and recompute, and none may take cached pages it
  // has no logits for.
  EngineOptions o = test_options(3);
  o.kv_pages = 6;
  o.chunk_tokens = 8;
  auto e = engine(o);
  for (int round = 0; round < 2; ++round) {
    std::vector<Recorder> recs(3);
    for (size_t i = 0; i < 3; ++i) ASSERT_TRUE(e->submit(reqs[i], recs[i].callback()).ok());
    for (size_t i = 0; i < 3; ++i) {
      ASSERT_TRUE(recs[i].wait_done());
      EXPECT_EQ(recs[i].done().finish, FinishReason::kLength) << recs[i].done().error;
      EXPECT_EQ(recs[i].done().cached_tokens, 0);
      EXPECT_EQ(recs[i].tokens(), alone_tokens[i]);
      const auto s = scored(recs[i]);
      ASSERT_EQ(s.size(), alone[i].size());
      for (size_t k = 0; k < s.size(); ++k) EXPECT_NEAR(s[k].logprob, alone[i][k].logprob, 1e-4) << i << " " << k;
    }
  }
  EXPECT_GT(e->status().scheduler.preemptions, 0);
}

TEST_F(EngineLogprobs, SubmitChecksTheFields) {
  auto e = engine();
  Recorder rec;
  EngineRequest r = greedy_request(prompt(4, 0), 0);
  auto refused = e->submit(r, rec.callback());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error_message().find("max_tokens"), std::string::npos);
  r.max_tokens = 4;
  r.logprobs = kMaxTopLogprobs + 1;
  refused = e->submit(r, rec.callback());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error_message().find("logprobs"), std::string::npos);
}

}  // namespace
}  // namespace splash
