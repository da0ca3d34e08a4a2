// The engine step's three parts driven one at a time on a tiny random model, on an engine whose
// thread never starts: schedule() (admission order, prefill chunking, decode rows mixed with a prompt
// chunk, cancels and deadlines, preemption of the youngest lane) and postprocess() (verification of
// proposals against logits rows the test writes, and the KV rollback of the rejected ones).
#include <algorithm>

#include "engine/scheduler_impl.h"
#include "scheduler_test_util.h"
#include "spec_test_drafters.h"

namespace splash {
namespace {

using namespace sched_test;

class EngineStep : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { m_ = load_model(tiny_model_path()).release(); }
  static void TearDownTestSuite() {
    delete m_;
    m_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(m_, nullptr); }

  static std::unique_ptr<EngineImpl> engine(const EngineOptions& o) {
    auto e = EngineImpl::create(m_->model, *m_->tokenizer, o);
    EXPECT_TRUE(e.ok()) << e.error_message();
    return e.ok() ? std::move(*e) : nullptr;
  }
  static std::vector<int32_t> ids(size_t n, int32_t salt = 0) {
    std::vector<int32_t> p = {m_->tokenizer->bos_id()};
    for (size_t i = 1; i < n; ++i) p.push_back(static_cast<int32_t>(3 + (i * 11 + salt) % 200));
    return p;
  }
  // Greedy, running to max_tokens (the random model may otherwise end at once).
  static EngineRequest long_request(std::vector<int32_t> prompt, int64_t max_tokens) {
    EngineRequest r = greedy_request(std::move(prompt), max_tokens);
    r.ignore_eos = true;
    return r;
  }
  static uint64_t submit(EngineImpl& e, EngineRequest r, Recorder& rec) {
    auto id = e.submit(std::move(r), rec.callback());
    EXPECT_TRUE(id.ok()) << id.error_message();
    return id.ok() ? *id : 0;
  }
  // One whole step, as the engine thread runs it.
  static void step(EngineImpl& e) {
    e.take_incoming();
    Batch b = e.schedule({});
    if (!b.empty() && e.run(b)) e.postprocess(b);
    e.publish_and_deliver();
  }
  // n distinct ids that end nothing (not end-of-generation).
  static std::vector<int32_t> plain_ids(size_t n) {
    std::vector<int32_t> out;
    for (int32_t t = 10; out.size() < n; ++t)
      if (!m_->tokenizer->is_eog(t)) out.push_back(t);
    return out;
  }
  // Rewrites logits row `row` of run `run` so that greedy sampling draws `token`.
  static void force_row(EngineImpl& e, size_t run, int64_t row, int32_t token) {
    ForwardOutput& out = e.forward_output();
    float* p = out.logits.data() + (out.logits_offset[run] + row) * out.n_vocab;
    std::fill(p, p + out.n_vocab, 0.0f);
    p[token] = 10.0f;
  }

  static inline LoadedModel* m_ = nullptr;
};

TinyModelCleanup cleanup;

TEST_F(EngineStep, AdmitsInSubmitOrderAndMixesDecodeRowsWithTheNextPrompt) {
  auto e = engine(test_options(2));
  ASSERT_TRUE(e);
  Recorder ra, rb, rc;
  const uint64_t a = submit(*e, greedy_request(ids(10, 1), 4), ra);
  const uint64_t b = submit(*e, greedy_request(ids(12, 2), 4), rb);
  submit(*e, greedy_request(ids(9, 3), 4), rc);
  e->take_incoming();

  Batch first = e->schedule({});
  ASSERT_EQ(e->lanes().size(), 2u);
  EXPECT_EQ(e->lanes()[0]->id(), a);
  EXPECT_EQ(e->lanes()[1]->id(), b);
  EXPECT_EQ(e->queued(), 1u) << "the third request waits for a lane";
  // One prefill chunk, of the oldest lane: its whole prompt, logits of its last row only.
  ASSERT_EQ(first.runs.size(), 1u);
  EXPECT_EQ(first.n_decode, 0u);
  EXPECT_EQ(first.runs[0].lane->id(), a);
  EXPECT_FALSE(first.runs[0].decode);
  EXPECT_EQ(first.runs[0].position, 0);
  EXPECT_EQ(first.runs[0].tokens.size(), 10u);
  EXPECT_EQ(first.runs[0].logits, LogitRows::kLast);
  EXPECT_EQ(first.n_prefill, 10);
  EXPECT_FALSE(first.prefill_contended);
  ASSERT_TRUE(e->run(first));
  e->postprocess(first);
  EXPECT_TRUE(e->lanes()[0]->decoding());
  EXPECT_EQ(e->lanes()[0]->n_generated(), 1);

  // Next: a's decode row first, then b's prompt in the same forward.
  Batch second = e->schedule({});
  ASSERT_EQ(second.runs.size(), 2u);
  EXPECT_EQ(second.n_decode, 1u);
  EXPECT_EQ(second.runs[0].lane->id(), a);
  EXPECT_TRUE(second.runs[0].decode);
  EXPECT_EQ(second.runs[0].position, 10);
  ASSERT_EQ(second.runs[0].tokens.size(), 1u);
  EXPECT_EQ(second.runs[0].tokens[0], e->lanes()[0]->ctx().back());
  EXPECT_EQ(second.runs[1].lane->id(), b);
  EXPECT_EQ(second.runs[1].tokens.size(), 12u);
  EXPECT_TRUE(second.prefill_contended);
}

TEST_F(EngineStep, ChunksAPromptAndAsksForLogitsOnlyWithItsLastChunk) {
  EngineOptions o = test_options(1);
  o.chunk_tokens = 4;
  auto e = engine(o);
  ASSERT_TRUE(e);
  Recorder rec;
  submit(*e, long_request(ids(10), 3), rec);
  e->take_incoming();
  const std::vector<std::pair<int64_t, int64_t>> chunks = {{0, 4}, {4, 4}, {8, 2}};
  for (size_t i = 0; i < chunks.size(); ++i) {
    Batch b = e->schedule({});
    ASSERT_EQ(b.runs.size(), 1u);
    EXPECT_EQ(b.runs[0].position, chunks[i].first) << i;
    EXPECT_EQ(static_cast<int64_t>(b.runs[0].tokens.size()), chunks[i].second) << i;
    EXPECT_EQ(b.runs[0].logits, i + 1 < chunks.size() ? LogitRows::kNone : LogitRows::kLast) << i;
    ASSERT_TRUE(e->run(b));
    e->postprocess(b);
    EXPECT_EQ(e->lanes()[0]->n_generated(), i + 1 < chunks.size() ? 0 : 1) << i;
  }
  while (!e->lanes().empty()) step(*e);
  EXPECT_EQ(rec.done().finish, FinishReason::kLength);
  EXPECT_EQ(rec.done().completion_tokens, 3);
}

TEST_F(EngineStep, CancelsAndDeadlinesEndLanesBeforeTheBatch) {
  auto e = engine(test_options(2));
  ASSERT_TRUE(e);
  Recorder ra, rb, rc;
  const uint64_t a = submit(*e, greedy_request(ids(10, 1), 4), ra);
  EngineRequest late = greedy_request(ids(10, 2), 4);
  late.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  submit(*e, late, rb);
  const uint64_t c = submit(*e, greedy_request(ids(10, 3), 4), rc);
  e->take_incoming();
  Batch batch = e->schedule({a});
  // a was cancelled and b timed out before admission: c runs alone.
  ASSERT_EQ(e->lanes().size(), 1u);
  EXPECT_EQ(e->lanes()[0]->id(), c);
  ASSERT_EQ(batch.runs.size(), 1u);
  EXPECT_EQ(batch.runs[0].lane->id(), c);
  e->publish_and_deliver();
  EXPECT_EQ(ra.done().finish, FinishReason::kCancelled);
  EXPECT_EQ(rb.done().finish, FinishReason::kTimeout);
  EXPECT_EQ(rc.n_done(), 0);
}

TEST_F(EngineStep, ADryPoolPreemptsTheYoungestLane) {
  // Two requests of up to 79 positions (3 pages each) in a 4-page pool: both fit alone, not together.
  EngineOptions o = test_options(2);
  o.kv_pages = 4;
  o.prefix_cache = false;
  auto e = engine(o);
  ASSERT_TRUE(e);
  Recorder ra, rb;
  const uint64_t a = submit(*e, long_request(ids(20, 1), 60), ra);
  const uint64_t b = submit(*e, long_request(ids(20, 2), 60), rb);
  for (int i = 0; i < 200 && e->status().scheduler.preemptions == 0; ++i) step(*e);
  ASSERT_EQ(e->status().scheduler.preemptions, 1);
  ASSERT_EQ(e->lanes().size(), 2u);
  EXPECT_EQ(e->lanes()[0]->id(), a);
  EXPECT_EQ(e->lanes()[1]->id(), b);
  EXPECT_GT(e->lanes()[0]->kv_pages_held(), 0) << "the oldest lane keeps its pages";
  EXPECT_EQ(e->lanes()[1]->kv_pages_held(), 0) << "the youngest lane gave its pages back";
  EXPECT_TRUE(e->lanes()[1]->prefilling()) << "it recomputes its tokens";
  for (int i = 0; i < 400 && !e->lanes().empty(); ++i) step(*e);
  EXPECT_EQ(ra.done().finish, FinishReason::kLength);
  EXPECT_EQ(rb.done().finish, FinishReason::kLength);
  EXPECT_EQ(e->kv().kv_pages_free(), 4);
}

// A lane with a drafter feeds [last token, 3 proposals]; the test writes the verify rows' logits.
class EngineStepVerify : public EngineStep {
 protected:
  void SetUp() override {
    EngineStep::SetUp();
    prompt_ = ids(8);
    draft_ = plain_ids(24);
    std::vector<int32_t> full = prompt_;
    full.insert(full.end(), draft_.begin(), draft_.end());
    source_ = std::make_unique<spec_test::TestSource>(spec_test::TestSource::kOracle, full, 0,
                                                      static_cast<int32_t>(m_->model.config().n_vocab));
    EngineOptions o = test_options(1);
    o.drafter = source_.get();
    o.spec_block = 7;  // the draft budget's first step asks for half of 6 proposals
    o.spec_time_rule = false;
    o.prefix_cache = false;
    e_ = engine(o);
    ASSERT_TRUE(e_);
    submit(*e_, long_request(prompt_, 20), rec_);
    step(*e_);  // the prompt: first token sampled
    ASSERT_EQ(e_->lanes().size(), 1u);
    ASSERT_TRUE(e_->lanes()[0]->decoding());
  }
  // The verify batch; the drafter has seen prompt + first token, so it proposes draft_[1..3].
  Batch verify_batch() {
    Batch b = e_->schedule({});
    EXPECT_EQ(b.runs.size(), 1u);
    EXPECT_EQ(b.n_decode, 1u);
    const BatchRun& r = b.runs[0];
    EXPECT_EQ(r.position, 8);
    EXPECT_EQ(r.n_proposals, 3);
    EXPECT_EQ(r.logits, LogitRows::kAll);
    EXPECT_EQ(std::vector<int32_t>(r.tokens.begin(), r.tokens.end()),
              (std::vector<int32_t>{e_->lanes()[0]->ctx().back(), draft_[1], draft_[2], draft_[3]}));
    return b;
  }
  std::vector<int32_t> tail(size_t n) const {
    const auto ctx = e_->lanes()[0]->ctx();
    return std::vector<int32_t>(ctx.end() - static_cast<std::ptrdiff_t>(n), ctx.end());
  }

  std::vector<int32_t> prompt_, draft_;
  std::unique_ptr<spec_test::TestSource> source_;
  std::unique_ptr<EngineImpl> e_;
  Recorder rec_;
};

TEST_F(EngineStepVerify, AcceptsTheMatchingProposalsAndRollsBackTheRest) {
  Batch b = verify_batch();
  ASSERT_TRUE(e_->run(b));
  EXPECT_EQ(e_->lanes()[0]->kv_len(), 12) << "the pass fed the last token and 3 proposals";
  const int32_t first = e_->lanes()[0]->ctx().back();
  const int32_t other = draft_[4];  // not the third proposal (plain_ids are distinct)
  force_row(*e_, 0, 0, draft_[1]);
  force_row(*e_, 0, 1, draft_[2]);
  force_row(*e_, 0, 2, other);
  force_row(*e_, 0, 3, draft_[4]);  // after a rejection: never read
  e_->postprocess(b);
  const Lane& lane = *e_->lanes()[0];
  EXPECT_EQ(tail(4), (std::vector<int32_t>{first, draft_[1], draft_[2], other}));
  EXPECT_EQ(lane.n_generated(), 4);
  EXPECT_EQ(lane.kv_len(), 11) << "the KV keeps the last token and the two accepted proposals";
  EXPECT_EQ(lane.kv_pages_held(), 1);
  e_->publish_and_deliver();
  const EngineStatus st = e_->status();
  EXPECT_EQ(st.metrics.drafted_tokens, 3);
  EXPECT_EQ(st.metrics.accepted_draft_tokens, 2);
  EXPECT_EQ(st.metrics.verify_steps, 1);
}

TEST_F(EngineStepVerify, ARejectedFirstProposalKeepsOnlyTheTargetsToken) {
  Batch b = verify_batch();
  ASSERT_TRUE(e_->run(b));
  const int32_t first = e_->lanes()[0]->ctx().back();
  const int32_t other = draft_[2];  // not the first proposal
  force_row(*e_, 0, 0, other);
  e_->postprocess(b);
  EXPECT_EQ(tail(2), (std::vector<int32_t>{first, other}));
  EXPECT_EQ(e_->lanes()[0]->n_generated(), 2);
  EXPECT_EQ(e_->lanes()[0]->kv_len(), 9);
  e_->publish_and_deliver();
  EXPECT_EQ(e_->status().metrics.accepted_draft_tokens, 0);
}

TEST_F(EngineStepVerify, AProposalMatchingEveryRowIsAllAccepted) {
  Batch b = verify_batch();
  ASSERT_TRUE(e_->run(b));
  for (int64_t i = 0; i < 4; ++i) force_row(*e_, 0, i, draft_[static_cast<size_t>(i + 1)]);
  e_->postprocess(b);
  EXPECT_EQ(tail(4), (std::vector<int32_t>{draft_[1], draft_[2], draft_[3], draft_[4]}));
  EXPECT_EQ(e_->lanes()[0]->n_generated(), 5);
  EXPECT_EQ(e_->lanes()[0]->kv_len(), 12) << "nothing to roll back";
}

}  // namespace
}  // namespace splash
