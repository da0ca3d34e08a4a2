// Engine scheduler on a tiny random model: a request alone equals generate(), concurrent requests
// equal themselves alone (batching invariance), decode batches get wide, a long prompt is prefilled
// in chunks between decode steps, and the stop conditions (stop strings, max_tokens, context limit,
// ignore_eos); plus stories15M real text when the demo model is present.
#include <cstdlib>
#include <fstream>
#include <limits>
#include <mutex>

#include "scheduler_test_util.h"

namespace splash {
namespace {

using namespace sched_test;

class SchedulerTiny : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { m_ = load_model(tiny_model_path()).release(); }
  static void TearDownTestSuite() {
    delete m_;
    m_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(m_, nullptr); }

  std::vector<int32_t> prompt(const std::string& text) const {
    std::vector<int32_t> p = {m_->tokenizer->bos_id()};
    for (int32_t id : m_->tokenizer->encode(text, false, false)) p.push_back(id);
    return p;
  }
  std::unique_ptr<Engine> engine(const EngineOptions& o = test_options()) const {
    auto e = Engine::create(m_->model, *m_->tokenizer, o);
    EXPECT_TRUE(e.ok()) << e.error_message();
    return e.ok() ? std::move(*e) : nullptr;
  }
  GenerateStats generate_alone(const EngineRequest& r, std::string* text = nullptr) const {
    GenerateOptions o;
    o.max_tokens = r.max_tokens;
    o.sampling = r.sampling;
    o.stop = r.stop;
    o.kv_format = KvFormat::kF32;
    o.threads = 2;
    auto s = generate(m_->model, *m_->tokenizer, r.prompt, o, [&](std::string_view piece) {
      if (text) *text += piece;
    });
    EXPECT_TRUE(s.ok()) << s.error_message();
    return s.ok() ? *s : GenerateStats{};
  }
  // Runs `r` alone on a fresh engine and returns its recorder.
  std::unique_ptr<Recorder> run_alone(const EngineRequest& r, const EngineOptions& o = test_options()) const {
    auto e = engine(o);
    auto rec = std::make_unique<Recorder>();
    auto id = e->submit(r, rec->callback());
    EXPECT_TRUE(id.ok()) << id.error_message();
    EXPECT_TRUE(rec->wait_done());
    return rec;
  }

  static inline LoadedModel* m_ = nullptr;
};

TinyModelCleanup cleanup;

TEST_F(SchedulerTiny, GreedyAloneEqualsGenerate) {
  const EngineRequest r = greedy_request(prompt("the cat sat on the mat"), 24);
  std::string gen_text;
  const GenerateStats gen = generate_alone(r, &gen_text);
  ASSERT_FALSE(gen.tokens.empty());
  for (int64_t chunk : {0, 2}) {  // whole prompt in one chunk, and 2-token chunks
    EngineOptions o = test_options();
    o.chunk_tokens = chunk;
    auto rec = run_alone(r, o);
    EXPECT_EQ(rec->tokens(), gen.tokens) << "chunk " << chunk;
    EXPECT_EQ(rec->text(), gen_text) << "chunk " << chunk;
    const EngineEvent done = rec->done();
    EXPECT_EQ(done.finish, gen.finish);
    EXPECT_EQ(done.completion_tokens, gen.n_generated);
    EXPECT_EQ(done.prompt_tokens, static_cast<int64_t>(r.prompt.size()));
    EXPECT_GE(done.prompt_ms, 0);
    EXPECT_GE(done.predicted_ms, 0);
    EXPECT_EQ(rec->events().back().kind, EngineEvent::kDone);
    EXPECT_EQ(rec->n_done(), 1);
  }
}

TEST_F(SchedulerTiny, ConcurrentRequestsEqualThemselvesAlone) {
  const std::vector<std::string> texts = {"the cat sat", "a dog ran far away from home", "once upon a time",
                                          "hello world, this is a longer prompt with more words in it"};
  std::vector<EngineRequest> reqs;
  std::vector<std::vector<int32_t>> alone;
  for (const auto& t : texts) {
    reqs.push_back(greedy_request(prompt(t), 32));
    reqs.back().ignore_eos = true;  // every request runs its full length, so the batch stays wide
    alone.push_back(run_alone(reqs.back())->tokens());
    ASSERT_EQ(alone.back().size(), 32u);
  }
  EngineOptions o = test_options();
  o.chunk_tokens = 4;  // prefill chunks interleave with the first requests' decode steps
  auto e = engine(o);
  std::vector<Recorder> recs(reqs.size());
  {
    // The first request waits after its first token until all four are queued.
    engine_test::TestGate::Closed closed(recs[0].text_gate());
    for (size_t i = 0; i < reqs.size(); ++i) ASSERT_TRUE(e->submit(reqs[i], recs[i].callback()).ok());
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_TRUE(recs[i].wait_done());
    EXPECT_EQ(recs[i].tokens(), alone[i]) << "request " << i;
    EXPECT_EQ(recs[i].done().finish, FinishReason::kLength);
  }
  const EngineStatus s = e->status();
  ASSERT_EQ(s.scheduler.decode_batches_by_width.size(), 4u);
  int64_t wide = 0, rows = 0;
  for (size_t w = 0; w < 4; ++w) {
    if (w > 0) wide += s.scheduler.decode_batches_by_width[w];
    rows += static_cast<int64_t>(w + 1) * s.scheduler.decode_batches_by_width[w];
  }
  EXPECT_GT(wide, 0) << "no decode batch had more than one row";
  EXPECT_EQ(rows, s.metrics.decode_tokens);
  EXPECT_EQ(s.requests.submitted, 4);
  EXPECT_EQ(s.requests.completed, 4);
  EXPECT_EQ(s.kv.pages_active, 0);
  EXPECT_EQ(s.active_lanes, 0);
  // Every token but each request's first is an inter-token sample; the first ones are TTFT samples.
  EXPECT_EQ(s.metrics.ttft_ms.samples, 4);
  EXPECT_EQ(s.metrics.itl_ms.samples, 4 * 31);
  EXPECT_GT(s.metrics.decode_tok_s, 0);
  EXPECT_GT(s.metrics.prefill_tok_s, 0);
  int64_t prompt_rows = 0;
  for (const auto& r : reqs) prompt_rows += static_cast<int64_t>(r.prompt.size());
  EXPECT_EQ(s.scheduler.prefill_rows, prompt_rows);
}

TEST_F(SchedulerTiny, SeededSamplingAloneEqualsGenerateAndRepeats) {
  EngineRequest r = greedy_request(prompt("the cat sat"), 24);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 42;
  const GenerateStats gen = generate_alone(r);
  ASSERT_FALSE(gen.tokens.empty());
  EXPECT_EQ(run_alone(r)->tokens(), gen.tokens);
  EXPECT_EQ(run_alone(r)->tokens(), gen.tokens);
  r.sampling.seed = 43;
  EXPECT_NE(run_alone(r)->tokens(), gen.tokens);
}

struct Interleaving {
  size_t between[2] = {0, 0};  // each decoder's tokens delivered during the long prompt's prefill
  EngineStatus status;         // when the long prompt finished
};

// A long prompt (1200 tokens, 16-token chunks: 75 prefill passes) arrives while two requests decode.
void run_long_prompt_among_decoders(LoadedModel* m, bool mix, double decode_share, Interleaving* out) {
  EngineOptions o = test_options();
  o.chunk_tokens = 16;
  o.mix_prefill = mix;
  o.decode_share = decode_share;
  auto e = Engine::create(m->model, *m->tokenizer, o);
  ASSERT_TRUE(e.ok()) << e.error_message();
  std::mutex mu;
  struct Seen {
    int who;
    EngineEvent::Kind kind;
    size_t n_tokens;
  };
  std::vector<Seen> order;  // in delivery order
  auto cb = [&](int who, Recorder* rec) {
    return [&, who, rec](const EngineEvent& ev) {
      {
        std::lock_guard lk(mu);
        order.push_back({who, ev.kind, ev.tokens.size()});
      }
      rec->on_event(ev);
    };
  };
  Recorder d0, d1, big;
  std::vector<int32_t> p0 = {m->tokenizer->bos_id(), 5, 6, 7}, p1 = {m->tokenizer->bos_id(), 9, 10};
  EngineRequest r0 = greedy_request(p0, 600), r1 = greedy_request(p1, 600);
  r0.ignore_eos = r1.ignore_eos = true;
  auto id0 = (*e)->submit(r0, cb(0, &d0));
  auto id1 = (*e)->submit(r1, cb(1, &d1));
  ASSERT_TRUE(id0.ok() && id1.ok());
  // Wait until both decode.
  for (int i = 0; i < 2000 && (d0.tokens().empty() || d1.tokens().empty()); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::vector<int32_t> long_prompt(1200);
  for (size_t i = 0; i < long_prompt.size(); ++i) long_prompt[i] = static_cast<int32_t>(3 + (i * 7) % 200);
  EngineRequest rb = greedy_request(long_prompt, 2);
  rb.want_progress = true;
  ASSERT_TRUE((*e)->submit(rb, cb(2, &big)).ok());
  ASSERT_TRUE(big.wait_done());
  out->status = (*e)->status();
  (*e)->cancel(*id0);
  (*e)->cancel(*id1);
  ASSERT_TRUE(d0.wait_done());
  ASSERT_TRUE(d1.wait_done());

  // Progress: one per 16-token chunk, processed monotone up to the prompt length.
  std::vector<EngineEvent> progress;
  for (const auto& ev : big.events())
    if (ev.kind == EngineEvent::kProgress) progress.push_back(ev);
  ASSERT_EQ(progress.size(), 1200u / 16);
  for (size_t i = 0; i < progress.size(); ++i) {
    EXPECT_EQ(progress[i].total, 1200);
    EXPECT_EQ(progress[i].processed, static_cast<int64_t>(16 * (i + 1)));
    EXPECT_EQ(progress[i].cache, 0);
    if (i > 0) {
      EXPECT_GE(progress[i].time_ms, progress[i - 1].time_ms);
    }
  }
  // Decoder events between the first and the last progress event.
  std::lock_guard lk(mu);
  size_t first = order.size(), last = 0;
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i].who == 2 && order[i].kind == EngineEvent::kProgress) {
      first = std::min(first, i);
      last = i;
    }
  ASSERT_LT(first, last);
  for (size_t i = first; i < last; ++i)
    if (order[i].who < 2 && order[i].kind == EngineEvent::kText) out->between[order[i].who] += order[i].n_tokens;
}

// The prompt's chunks go into the decode batches (or take turns with them), so the decoders keep
// producing tokens during the whole prefill (counted in events, not wall time).
void check_long_prompt_interleaves(LoadedModel* m, bool mix) {
  Interleaving r;
  run_long_prompt_among_decoders(m, mix, 0.5, &r);
  // 74 chunk ticks: each decoder gets a token in every one of them (mixed) or every other one
  // (alternating), give or take a few held back for UTF-8. A prefill that stalled decoding leaves 0.
  const size_t want = mix ? 60 : 30;
  EXPECT_GE(r.between[0], want) << "mix " << mix;
  EXPECT_GE(r.between[1], want) << "mix " << mix;
}

TEST_F(SchedulerTiny, LongPromptDoesNotStallDecoders) { check_long_prompt_interleaves(m_, true); }
TEST_F(SchedulerTiny, LongPromptDoesNotStallDecodersAlternating) { check_long_prompt_interleaves(m_, false); }

// decode_share 0 = strictly alternate: one decode-only pass after each prefill pass that had
// decoders beside it (74 of the 75: the last ends the prompt), so in mixed mode each decoder gets two
// tokens per chunk (one riding along, one in the pass owed).
TEST_F(SchedulerTiny, DecodeShareZeroAlternatesOneDecodePassPerChunk) {
  for (bool mix : {true, false}) {
    Interleaving r;
    run_long_prompt_among_decoders(m_, mix, 0.0, &r);
    const int64_t owed = r.status.scheduler.decode_share_batches;
    EXPECT_GE(owed, 73) << "mix " << mix;
    EXPECT_LE(owed, 76) << "mix " << mix;
    const size_t want = mix ? 130 : 60;  // 2 or 1 per chunk, a few held back for UTF-8
    EXPECT_GE(r.between[0], want) << "mix " << mix;
    EXPECT_GE(r.between[1], want) << "mix " << mix;
  }
}

// decode_share 4: after each prefill pass the decoders are owed four times its wall time in
// decode-only passes, each no slower than the mixed pass that carries the same rows plus 16 prompt
// rows, so at least four passes per chunk: 296 while the decoders last (600 tokens each: if they
// finish first, nearly all of those were owed passes). Share 0 gives 74 (above).
TEST_F(SchedulerTiny, DecodeShareOwesDecodersTimePerUnitOfPrefill) {
  Interleaving r;
  run_long_prompt_among_decoders(m_, true, 4.0, &r);
  EXPECT_GE(r.status.scheduler.decode_share_batches, 2 * 74);
}

TEST_F(SchedulerTiny, DecodeShareMustBeFiniteAndNonNegative) {
  for (double bad : {-0.5, std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    EngineOptions o = test_options();
    o.decode_share = bad;
    auto e = Engine::create(m_->model, *m_->tokenizer, o);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_NE(e.error_message().find("decode_share"), std::string::npos) << e.error_message();
  }
}

TEST_F(SchedulerTiny, MaxTokensAndIgnoreEos) {
  for (int64_t n : {1, 7}) {
    EngineRequest r = greedy_request(prompt("the cat"), n);
    r.ignore_eos = true;
    auto rec = run_alone(r);
    EXPECT_EQ(rec->done().finish, FinishReason::kLength);
    EXPECT_EQ(rec->done().completion_tokens, n);
    EXPECT_EQ(static_cast<int64_t>(rec->tokens().size()), n);
  }
  // Find a seed whose sampled run ends at an end-of-generation token, then ignore_eos must carry the
  // same request on to max_tokens without ever producing one.
  const int64_t n = 48;
  bool found = false;
  for (uint64_t seed = 1; seed <= 200 && !found; ++seed) {
    EngineRequest r = greedy_request(prompt("the"), n);
    r.sampling.temperature = 1.5f;
    r.sampling.seed = seed;
    auto rec = run_alone(r);
    if (rec->done().finish != FinishReason::kStop || rec->done().completion_tokens >= n) continue;
    found = true;
    r.ignore_eos = true;
    auto ign = run_alone(r);
    EXPECT_EQ(ign->done().finish, FinishReason::kLength) << "seed " << seed;
    ASSERT_EQ(static_cast<int64_t>(ign->tokens().size()), n);
    for (int32_t t : ign->tokens()) EXPECT_FALSE(m_->tokenizer->is_eog(t)) << "seed " << seed;
  }
  EXPECT_TRUE(found) << "no seed in 1..200 ended at an end-of-generation token";
}

TEST_F(SchedulerTiny, StopStringAcrossTokenBoundary) {
  EngineRequest r = greedy_request(prompt("the cat sat"), 40);
  r.ignore_eos = true;
  auto base = run_alone(r);
  const std::vector<int32_t> ids = base->tokens();
  const std::string full = base->text();
  // A two-byte printable stop string whose first byte ends token i's text and second starts token
  // i + 1's, so it can only match across the boundary.
  auto printable = [](char c) { return c >= 0x21 && c < 0x7f; };
  std::string stop;
  for (size_t i = ids.size() / 3; i + 1 < ids.size() && stop.empty(); ++i) {
    const size_t a = m_->tokenizer->decode(std::span(ids).first(i)).size();
    const size_t b = m_->tokenizer->decode(std::span(ids).first(i + 1)).size();
    if (a == 0 || b == a || b >= full.size()) continue;
    if (printable(full[b - 1]) && printable(full[b])) stop = full.substr(b - 1, 2);
  }
  ASSERT_FALSE(stop.empty()) << "no token boundary between printable bytes in '" << full << "'";
  EngineRequest rs = r;
  rs.stop = {stop};
  auto cut = run_alone(rs);
  EXPECT_EQ(cut->done().finish, FinishReason::kStop);
  EXPECT_EQ(cut->text(), full.substr(0, full.find(stop))) << "stop '" << stop << "'";
  EXPECT_LT(cut->done().completion_tokens, 40);
  for (const auto& ev : cut->events())
    if (ev.kind == EngineEvent::kText) {
      EXPECT_EQ(ev.text.find(stop), std::string::npos);
    }
  // generate() (which ignores nothing, so compare only when it also ran past the stop) agrees.
  std::string gen_text;
  EngineRequest rg = rs;
  rg.ignore_eos = false;
  const GenerateStats gen = generate_alone(rg, &gen_text);
  if (sched_test::ended_at_stop_string(gen)) {
    EXPECT_EQ(gen_text, cut->text());
  }
}

TEST_F(SchedulerTiny, StopsAtContextLimit) {
  ModelOptions mo;
  mo.max_context = 64;
  auto small = load_model(tiny_model_path(), mo);
  ASSERT_TRUE(small);
  auto e = Engine::create(small->model, *small->tokenizer, test_options());
  ASSERT_TRUE(e.ok()) << e.error_message();
  std::vector<int32_t> p(60, 17);
  p[0] = small->tokenizer->bos_id();
  EngineRequest r = greedy_request(p, 100);
  r.ignore_eos = true;
  Recorder rec;
  ASSERT_TRUE((*e)->submit(r, rec.callback()).ok());
  ASSERT_TRUE(rec.wait_done());
  EXPECT_EQ(rec.done().finish, FinishReason::kContext);
  // Positions 60..63 hold the first four sampled tokens; the fifth is sampled from position 63.
  EXPECT_EQ(rec.done().completion_tokens, 5);
  p.resize(64, 17);
  auto too_long = (*e)->submit(greedy_request(p, 1), rec.callback());
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.error_message().find("context limit"), std::string::npos) << too_long.error_message();
}

TEST_F(SchedulerTiny, BadRequestsAreRefusedAtSubmit) {
  auto e = engine();
  Recorder rec;
  auto expect_invalid = [&](EngineRequest r, const char* what) {
    auto id = e->submit(std::move(r), rec.callback());
    ASSERT_FALSE(id.ok()) << what;
    EXPECT_EQ(id.error().code, ErrorCode::kInvalidArgument) << id.error_message();
    EXPECT_TRUE(id.error_message().starts_with("submit: ")) << id.error_message();
  };
  expect_invalid(greedy_request({}, 4), "empty prompt");
  expect_invalid(greedy_request({1, m_->tokenizer->n_vocab() + 3}, 4), "bad id");
  expect_invalid(greedy_request({1, -1}, 4), "negative id");
  expect_invalid(greedy_request({1, 2}, 0), "max_tokens 0");
  EngineRequest bad_temp = greedy_request({1, 2}, 4);
  bad_temp.sampling.temperature = -1;
  expect_invalid(bad_temp, "temperature");
  EngineRequest bad_stop = greedy_request({1, 2}, 4);
  bad_stop.stop = {""};
  expect_invalid(bad_stop, "empty stop");
  EXPECT_FALSE(e->submit(greedy_request({1, 2}, 4), nullptr).ok());
  EXPECT_EQ(rec.events().size(), 0u);
  EXPECT_EQ(e->status().requests.rejected, 7);
  EXPECT_EQ(e->status().requests.submitted, 0);

  // A request that cannot fit the pool even alone: 3 pages of positions against a 2-page pool.
  EngineOptions o = test_options();
  o.kv_pages = 2;
  auto tiny_pool = engine(o);
  auto big = tiny_pool->submit(greedy_request({1, 2, 3}, 80), rec.callback());
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code, ErrorCode::kCapacityExhausted) << big.error_message();
  EXPECT_TRUE(big.error_message().starts_with("capacity_exhausted")) << big.error_message();
  EXPECT_TRUE(tiny_pool->submit(greedy_request({1, 2, 3}, 60), rec.callback()).ok());  // 62 positions fit
  EXPECT_TRUE(rec.wait_done());
  EXPECT_NE(rec.done().finish, FinishReason::kError) << rec.done().error;

  EngineOptions bad = test_options();
  bad.lanes = 0;
  EXPECT_FALSE(Engine::create(m_->model, *m_->tokenizer, bad).ok());
  bad = test_options();
  bad.queue_size = 0;
  EXPECT_FALSE(Engine::create(m_->model, *m_->tokenizer, bad).ok());
}

// The pool holds 6 pages (192 positions) and three requests want 4 pages each: they cannot all be
// resident, so lanes wait or give pages back and recompute; none fails and each gives the tokens it
// gives alone.
TEST_F(SchedulerTiny, KvPressureWaitsInsteadOfFailing) {
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 3; ++i) {
    std::vector<int32_t> p = {m_->tokenizer->bos_id()};
    for (int t = 0; t < 40; ++t) p.push_back(static_cast<int32_t>(3 + (t * (i + 3)) % 150));
    reqs.push_back(greedy_request(p, 80));
    reqs.back().ignore_eos = true;
  }
  std::vector<std::vector<int32_t>> alone;
  for (const auto& r : reqs) alone.push_back(run_alone(r)->tokens());
  EngineOptions o = test_options(3);
  o.kv_pages = 6;
  o.chunk_tokens = 8;
  auto e = engine(o);
  std::vector<Recorder> recs(3);
  for (size_t i = 0; i < 3; ++i) ASSERT_TRUE(e->submit(reqs[i], recs[i].callback()).ok());
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(recs[i].wait_done());
    EXPECT_EQ(recs[i].done().finish, FinishReason::kLength) << recs[i].done().error;
    EXPECT_EQ(recs[i].tokens(), alone[i]) << "request " << i;
  }
  const EngineStatus s = e->status();
  EXPECT_EQ(s.requests.failed, 0);
  EXPECT_EQ(s.requests.completed, 3);
  EXPECT_GT(s.scheduler.preemptions + s.scheduler.waiting_resources, 0);
  EXPECT_EQ(s.kv.pages_active, 0);
  EXPECT_EQ(s.kv.pages_allocated, 6);
}

// --- stories15M (skipped when the demo model is absent) ----------------------------------------------

TEST(SchedulerStories15M, TwoLanesGiveGoldenText) {
  const char* home = std::getenv("HOME");
  const std::string path = std::string(home ? home : "") + "/.cache/splash/demo/stories15M.bin";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  auto m = load_model(path);
  ASSERT_TRUE(m);
  auto e = Engine::create(m->model, *m->tokenizer, test_options(2));
  ASSERT_TRUE(e.ok()) << e.error_message();
  Recorder a, b;
  {
    // a waits after its first token until b is queued, so the two share decode batches.
    engine_test::TestGate::Closed closed(a.text_gate());
    ASSERT_TRUE((*e)->submit(greedy_request({m->tokenizer->bos_id()}, 20), a.callback()).ok());
    std::vector<int32_t> p = {m->tokenizer->bos_id()};
    for (int32_t id : m->tokenizer->encode("Tom had a red ball", false, false)) p.push_back(id);
    ASSERT_TRUE((*e)->submit(greedy_request(p, 20), b.callback()).ok());
  }
  ASSERT_TRUE(a.wait_done());
  ASSERT_TRUE(b.wait_done());
  EXPECT_EQ(a.text().rfind("Once upon a time, there was a little girl named Lily.", 0), 0u) << a.text();
  // The reference's greedy ids from BOS (tests/reference/golden), batched with another request.
  std::ifstream f(std::string(SPLASH_SOURCE_DIR) + "/tests/reference/golden/stories15M_greedy200.ids");
  std::vector<int32_t> golden;
  std::string item;
  while (golden.size() < 20 && std::getline(f, item, ',')) golden.push_back(std::stoi(item));
  ASSERT_EQ(golden.size(), 20u);
  EXPECT_EQ(a.tokens(), golden);
  EXPECT_FALSE(b.text().empty());
  EXPECT_GT((*e)->status().scheduler.decode_batches_by_width[1], 0);
}

}  // namespace
}  // namespace splash

namespace splash {
namespace {

using namespace sched_test;

// /status `state.restore_state_bytes`: the size of one checkpoint (spec 5.1 restore state); 0 for
// attention-only models. A hybrid's lanes carry that state, and two concurrent lanes on a hybrid
// produce what each gives alone.
TEST(SchedulerHybrid, RestoreStateSizeAndLanesAlone) {
  const auto dir = std::filesystem::temp_directory_path() / ("splash_sched_hybrid_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "next.gguf").string();
  ASSERT_TRUE(write_test_model(*test_model_preset("tiny-qwen3-next"), path).ok());
  auto m = load_model(path);
  ASSERT_TRUE(m);
  ASSERT_GT(m->model.recurrent_state_floats(), 0);
  auto llama = load_model(tiny_model_path());
  ASSERT_TRUE(llama);
  EXPECT_EQ((*Engine::create(llama->model, *llama->tokenizer, test_options()))->status().restore_state_bytes, 0);
  auto run = [&](int lanes, const std::vector<std::vector<int32_t>>& prompts) {
    auto e = Engine::create(m->model, *m->tokenizer, test_options(lanes));
    EXPECT_TRUE(e.ok()) << e.error_message();
    EXPECT_EQ((*e)->status().restore_state_bytes, m->model.recurrent_state_floats() * 4);
    std::vector<std::unique_ptr<Recorder>> recs;
    for (const auto& p : prompts) {
      recs.push_back(std::make_unique<Recorder>());
      EXPECT_TRUE((*e)->submit(greedy_request(p, 12), recs.back()->callback()).ok());
    }
    std::vector<std::vector<int32_t>> out;
    for (auto& r : recs) {
      EXPECT_TRUE(r->wait_done());
      out.push_back(r->tokens());
    }
    return out;
  };
  const std::vector<std::vector<int32_t>> prompts = {{1, 50, 60, 70, 80, 90}, {1, 200, 17, 33}};
  const auto both = run(2, prompts);
  EXPECT_EQ(both[0], run(1, {prompts[0]})[0]);
  EXPECT_EQ(both[1], run(1, {prompts[1]})[0]);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace splash
