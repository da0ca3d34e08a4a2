// Speculative lanes and the prefix cache (issue 8): two lanes decode with proposals rejected every few
// tokens, in the same batched forwards; each lane's answer equals plain decoding alone, and the pages
// their conversations leave in the prefix cache hold committed tokens only: follow-up turns that
// start from those pages (answers included) give what a cold engine without drafts and without a
// cache gives. A rejected row left in a published page would shift every later attention score of
// the follow-up, which a random tiny model turns into other greedy tokens.
#include "scheduler_test_util.h"
#include "spec_test_drafters.h"

namespace splash {
namespace {

using namespace sched_test;
using spec_test::TestSource;

TinyModelCleanup cleanup;

// Token ids in [3, 203) from a salt, as prefix_cache_engine_test's.
std::vector<int32_t> ids(int32_t bos, size_t n, int32_t salt) {
  std::vector<int32_t> p = {bos};
  for (size_t i = 1; i < n; ++i) p.push_back(static_cast<int32_t>(3 + (i * 5 + static_cast<size_t>(salt) * 11 + i * i * static_cast<size_t>(salt + 2)) % 200));
  return p;
}

EngineRequest req(std::vector<int32_t> prompt, int64_t n) {
  EngineRequest r = greedy_request(std::move(prompt), n);
  r.ignore_eos = true;
  return r;
}

std::unique_ptr<Engine> make_engine(const LoadedModel& m, EngineOptions o) {
  auto e = Engine::create(m.model, *m.tokenizer, o);
  EXPECT_TRUE(e.ok()) << e.error_message();
  return e.ok() ? std::move(*e) : nullptr;
}

// r's tokens on a fresh engine without drafts and without a prefix cache.
std::vector<int32_t> cold(const LoadedModel& m, const EngineRequest& r) {
  EngineOptions o = test_options(2);
  o.prefix_cache = false;
  auto e = make_engine(m, o);
  Recorder rec;
  EXPECT_TRUE(e->submit(r, rec.callback()).ok());
  EXPECT_TRUE(rec.wait_done());
  return rec.tokens();
}

TEST(SpecCache, LanesWithRejectedDraftsPublishOnlyCommittedTokens) {
  auto m = load_model(tiny_model_path());
  ASSERT_TRUE(m);
  const int32_t bos = m->tokenizer->bos_id() >= 0 ? m->tokenizer->bos_id() : 1;
  const int32_t n_vocab = static_cast<int32_t>(m->model.config().n_vocab);
  const EngineRequest a = req(ids(bos, 40, 1), 40);
  const EngineRequest b = req(ids(bos, 37, 2), 40);
  const std::vector<int32_t> ta = cold(*m, a), tb = cold(*m, b);
  ASSERT_EQ(ta.size(), 40u);

  // An oracle that knows a's answer but corrupts every third proposal: a's verify steps accept a
  // few rows and reject the rest; for b (other tokens) its proposals are wrong from the start.
  std::vector<int32_t> full_a = a.prompt;
  full_a.insert(full_a.end(), ta.begin(), ta.end());
  TestSource oracle(TestSource::kOracle, full_a, 3, n_vocab);
  EngineOptions o = test_options(2);
  o.drafter = &oracle;
  o.spec_block = 8;
  ASSERT_TRUE(o.prefix_cache);
  auto e = make_engine(*m, o);
  ASSERT_TRUE(e);
  Recorder ra, rb;
  {
    // Both requests are queued before a runs its first step, so the two lanes share forwards.
    engine_test::TestGate::Closed closed(oracle.admission_gate());
    ASSERT_TRUE(e->submit(a, ra.callback()).ok());
    ASSERT_TRUE(e->submit(b, rb.callback()).ok());
  }
  ASSERT_TRUE(ra.wait_done());
  ASSERT_TRUE(rb.wait_done());
  EXPECT_EQ(ra.tokens(), ta);
  EXPECT_EQ(rb.tokens(), tb);
  EngineStatus st = e->status();
  EXPECT_GT(st.metrics.accepted_draft_tokens, 0);
  EXPECT_GT(st.metrics.drafted_tokens - st.metrics.accepted_draft_tokens, 10) << "rejections to exercise";
  ASSERT_GE(st.scheduler.decode_batches_by_width.size(), 2u);
  EXPECT_GT(st.scheduler.decode_batches_by_width[1], 0) << "both lanes verified/decoded in one forward";
  EXPECT_EQ(st.kv.pages_active, 0);

  // Follow-up turns resend each conversation (prompt + answer): they start from the pages a and b
  // published, answers included, and must answer as a cold engine without drafts does.
  for (const auto& [r, t, salt] : {std::tuple{&a, &ta, 3}, std::tuple{&b, &tb, 4}}) {
    std::vector<int32_t> ctx = r->prompt;
    ctx.insert(ctx.end(), t->begin(), t->end());
    const std::vector<int32_t> more = ids(bos, 9, salt);
    ctx.insert(ctx.end(), more.begin() + 1, more.end());
    const EngineRequest follow = req(ctx, 16);
    Recorder rf;
    ASSERT_TRUE(e->submit(follow, rf.callback()).ok());
    ASSERT_TRUE(rf.wait_done());
    // The conversation's KV held prompt + answer - 1 tokens; its whole pages were published.
    const int64_t kv = static_cast<int64_t>(r->prompt.size() + t->size()) - 1;
    EXPECT_EQ(rf.done().cached_tokens, kv / kKvPageTokens * kKvPageTokens) << "salt " << salt;
    EXPECT_EQ(rf.tokens(), cold(*m, follow)) << "salt " << salt;
  }
}

}  // namespace
}  // namespace splash
