// A drafter attached while the engine serves (issue 41: the demo's DFlash drafter finishes training
// after `splash serve` started on prompt lookup). Attached in the middle of a request: that request
// finishes on the drafter it started with, later requests draft with the new one (its proposals are
// accepted and rejected), and every greedy answer is the answer of an engine without drafts.
#include "scheduler_test_util.h"
#include "spec/prompt_lookup.h"
#include "spec_test_drafters.h"

namespace splash {
namespace {

using namespace sched_test;
using spec_test::TestSource;

TinyModelCleanup cleanup;

std::vector<int32_t> ids(int32_t bos, size_t n, int32_t salt) {
  std::vector<int32_t> p = {bos};
  for (size_t i = 1; i < n; ++i) p.push_back(static_cast<int32_t>(3 + (i * 7 + static_cast<size_t>(salt) * 13) % 200));
  return p;
}

EngineRequest req(std::vector<int32_t> prompt, int64_t n) {
  EngineRequest r = greedy_request(std::move(prompt), n);
  r.ignore_eos = true;
  return r;
}

std::unique_ptr<Engine> make_engine(const LoadedModel& m, const EngineOptions& o) {
  auto e = Engine::create(m.model, *m.tokenizer, o);
  EXPECT_TRUE(e.ok()) << e.error_message();
  return e.ok() ? std::move(*e) : nullptr;
}

std::vector<int32_t> plain(const LoadedModel& m, const EngineRequest& r) {
  auto e = make_engine(m, test_options(1));
  Recorder rec;
  EXPECT_TRUE(e->submit(r, rec.callback()).ok());
  EXPECT_TRUE(rec.wait_done());
  return rec.tokens();
}

const EngineStatus::Metrics::DraftMethod* find_method(const EngineStatus& st, std::string_view method) {
  for (const auto& d : st.metrics.draft_methods)
    if (d.method == method) return &d;
  return nullptr;
}

TEST(SpecAttach, DrafterAttachedMidRequestKeepsGreedyOutput) {
  auto m = load_model(tiny_model_path());
  ASSERT_TRUE(m);
  const int32_t bos = m->tokenizer->bos_id() >= 0 ? m->tokenizer->bos_id() : 1;
  const int32_t n_vocab = static_cast<int32_t>(m->model.config().n_vocab);
  const EngineRequest a = req(ids(bos, 30, 1), 48);
  const EngineRequest b = req(ids(bos, 27, 2), 40);
  const std::vector<int32_t> ta = plain(*m, a), tb = plain(*m, b);
  ASSERT_EQ(ta.size(), 48u);
  ASSERT_EQ(tb.size(), 40u);

  SpecOptions so;
  PromptLookupSource lookup(so);
  EngineOptions o = test_options(2);
  o.drafter = &lookup;
  o.spec_block = 8;
  auto e = make_engine(*m, o);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status().metrics.draft_method, "lookup");

  // The new drafter knows b's answer and gets every third proposal wrong: b's verify steps accept
  // and reject rows. It is attached from a's first text event, i.e. while a decodes.
  std::vector<int32_t> full_b = b.prompt;
  full_b.insert(full_b.end(), tb.begin(), tb.end());
  auto oracle = std::make_unique<TestSource>(TestSource::kOracle, full_b, 3, n_vocab);
  Recorder ra;
  bool attached = false;
  Status attach_status;
  auto on_a = [&, cb = ra.callback()](const EngineEvent& ev) {
    if (ev.kind == EngineEvent::kText && !attached) {
      attached = true;
      attach_status = e->attach_drafter(std::move(oracle));
    }
    cb(ev);
  };
  ASSERT_TRUE(e->submit(a, on_a).ok());
  ASSERT_TRUE(ra.wait_done());
  ASSERT_TRUE(attached);
  ASSERT_TRUE(attach_status.ok()) << attach_status.error_message();
  EXPECT_EQ(ra.tokens(), ta) << "the request running across the attach";

  Recorder rb;
  ASSERT_TRUE(e->submit(b, rb.callback()).ok());
  ASSERT_TRUE(rb.wait_done());
  EXPECT_EQ(rb.tokens(), tb) << "a request on the attached drafter";

  const EngineStatus st = e->status();
  EXPECT_EQ(st.metrics.draft_method, "oracle");
  EXPECT_EQ(st.metrics.drafters_attached, 1);
  EXPECT_GT(st.metrics.drafter_attached_unix_s, 0);
  ASSERT_EQ(st.metrics.draft_methods.size(), 2u);
  EXPECT_EQ(st.metrics.draft_methods[0].method, "lookup");
  const auto* o_m = find_method(st, "oracle");
  ASSERT_NE(o_m, nullptr);
  EXPECT_GT(o_m->accepted_draft_tokens, 0) << "b drafted with the attached source";
  EXPECT_GT(o_m->drafted_tokens - o_m->accepted_draft_tokens, 0) << "rejections to exercise";
  EXPECT_EQ(st.metrics.drafted_tokens, st.metrics.draft_methods[0].drafted_tokens + o_m->drafted_tokens);
}

TEST(SpecAttach, RefusedWithoutSpeculationOrSource) {
  auto m = load_model(tiny_model_path());
  ASSERT_TRUE(m);
  EngineOptions o = test_options(1);
  o.spec_block = 1;
  auto e = make_engine(*m, o);
  ASSERT_TRUE(e);
  SpecOptions so;
  Status st = e->attach_drafter(std::make_unique<PromptLookupSource>(so));
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.error_message().find("speculative decoding is off"), std::string::npos) << st.error_message();
  EXPECT_FALSE(e->attach_drafter(nullptr).ok());
  e->shutdown();
  o.spec_block = 8;
  auto e2 = make_engine(*m, o);
  ASSERT_TRUE(e2);
  e2->shutdown();
  EXPECT_FALSE(e2->attach_drafter(std::make_unique<PromptLookupSource>(so)).ok());
}

}  // namespace
}  // namespace splash
