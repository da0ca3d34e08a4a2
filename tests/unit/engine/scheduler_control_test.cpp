// Engine scheduler control paths on a tiny random model: cancel mid-prefill and mid-decode,
// deadlines, the bounded queue, shutdown with requests in flight, and a multi-threaded
// submit/cancel stress run (every accepted request gets exactly one kDone, last; no page leaks).
#include <atomic>
#include <random>
#include <thread>

#include "scheduler_test_util.h"

namespace splash {
namespace {

using namespace sched_test;

class SchedulerControl : public ::testing::Test {
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
  std::vector<int32_t> ids(size_t n, int32_t salt = 0) const {
    std::vector<int32_t> p = {m_->tokenizer->bos_id()};
    for (size_t i = 1; i < n; ++i) p.push_back(static_cast<int32_t>(3 + (i * 11 + salt) % 200));
    return p;
  }
  // Waits until the engine has nothing left (pages_active is published before kDone callbacks run).
  static void expect_idle(const Engine& e) {
    const EngineStatus s = e.status();
    EXPECT_EQ(s.kv.pages_active, 0);
    EXPECT_EQ(s.active_lanes, 0);
    // Finished requests' pages stay in the prefix cache, held by nothing else (reclaimable).
    EXPECT_EQ(s.kv.pages_free + s.kv.pages_cache, s.kv.pages_allocated);
  }
  static inline LoadedModel* m_ = nullptr;
};

TinyModelCleanup cleanup;

TEST_F(SchedulerControl, CancelMidPrefillFreesLaneAndPages) {
  EngineOptions o = test_options();
  o.chunk_tokens = 16;
  auto e = engine(o);
  std::atomic<uint64_t> id{0};
  std::atomic<int> progress_after_cancel{0};
  std::atomic<bool> cancelled{false};
  Recorder rec;
  EngineRequest r = greedy_request(ids(1000), 8);
  r.want_progress = true;
  auto submitted = e->submit(r, [&](const EngineEvent& ev) {
    rec.on_event(ev);
    if (ev.kind != EngineEvent::kProgress) return;
    if (cancelled) ++progress_after_cancel;
    // Cancel from inside the callback (the engine thread) at the third chunk.
    if (ev.processed == 48 && id != 0) {
      e->cancel(id);
      cancelled = true;
    }
  });
  ASSERT_TRUE(submitted.ok()) << submitted.error_message();
  id = *submitted;
  ASSERT_TRUE(rec.wait_done());
  if (!cancelled) GTEST_SKIP() << "the id was not known before the third chunk";
  EXPECT_EQ(rec.done().finish, FinishReason::kCancelled);
  EXPECT_EQ(rec.done().completion_tokens, 0);
  EXPECT_EQ(progress_after_cancel, 0) << "a chunk ran after the cancel";
  EXPECT_EQ(rec.count(EngineEvent::kText), 0);
  expect_idle(*e);
  EXPECT_EQ(e->status().requests.cancelled, 1);
}

TEST_F(SchedulerControl, CancelMidDecodeFromAnotherThread) {
  auto e = engine();
  // Two requests; one is cancelled after its third text event, the other runs on.
  Recorder a, b;
  EngineRequest ra = greedy_request(ids(5, 1), 1500), rb = greedy_request(ids(7, 2), 40);
  ra.ignore_eos = rb.ignore_eos = true;
  auto ida = e->submit(ra, a.callback());
  auto idb = e->submit(rb, b.callback());
  ASSERT_TRUE(ida.ok() && idb.ok());
  for (int i = 0; i < 5000 && a.count(EngineEvent::kText) < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  e->cancel(*ida);
  ASSERT_TRUE(a.wait_done());
  EXPECT_EQ(a.done().finish, FinishReason::kCancelled);
  EXPECT_LT(a.done().completion_tokens, 1500);
  EXPECT_EQ(a.events().back().kind, EngineEvent::kDone);
  ASSERT_TRUE(b.wait_done());
  EXPECT_EQ(b.done().finish, FinishReason::kLength);
  EXPECT_EQ(b.done().completion_tokens, 40);
  expect_idle(*e);
  e->cancel(*ida);  // finished ids are ignored
  e->cancel(12345);
  EXPECT_EQ(a.n_done(), 1);
}

TEST_F(SchedulerControl, DeadlineEndsWithTimeout) {
  auto e = engine();
  // Already past: ends before any forward pass.
  Recorder past;
  EngineRequest r = greedy_request(ids(5), 10);
  r.deadline = std::chrono::steady_clock::now() - std::chrono::milliseconds(1);
  ASSERT_TRUE(e->submit(r, past.callback()).ok());
  ASSERT_TRUE(past.wait_done());
  EXPECT_EQ(past.done().finish, FinishReason::kTimeout);
  EXPECT_EQ(past.done().completion_tokens, 0);
  // Mid-decode: the callback sleeps 2 ms per event, so 1500 tokens take > 3 s; the deadline is 100 ms.
  Recorder slow;
  EngineRequest rs = greedy_request(ids(5), 1500);
  rs.ignore_eos = true;
  rs.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  ASSERT_TRUE(e->submit(rs, [&](const EngineEvent& ev) {
                 slow.on_event(ev);
                 if (ev.kind == EngineEvent::kText) std::this_thread::sleep_for(std::chrono::milliseconds(2));
               }).ok());
  ASSERT_TRUE(slow.wait_done());
  EXPECT_EQ(slow.done().finish, FinishReason::kTimeout);
  EXPECT_GT(slow.done().completion_tokens, 0);
  EXPECT_LT(slow.done().completion_tokens, 1500);
  expect_idle(*e);
  EXPECT_EQ(e->status().requests.cancelled, 2);
}

TEST_F(SchedulerControl, QueueFullIsRefused) {
  EngineOptions o = test_options(1);
  o.queue_size = 2;
  auto e = engine(o);
  // The first request's first event holds the engine thread until the test has submitted the rest,
  // so nothing finishes in between.
  std::atomic<bool> release{false};
  Recorder a, b;
  EngineRequest r = greedy_request(ids(5), 4);
  r.ignore_eos = true;
  ASSERT_TRUE(e->submit(r, [&](const EngineEvent& ev) {
                 while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
                 a.on_event(ev);
               }).ok());
  ASSERT_TRUE(e->submit(r, b.callback()).ok());
  auto third = e->submit(r, b.callback());
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.error().code, ErrorCode::kQueueFull) << third.error_message();
  EXPECT_TRUE(third.error_message().starts_with("queue full")) << third.error_message();
  EXPECT_EQ(e->status().requests.rejected, 1);
  release = true;
  ASSERT_TRUE(a.wait_done());
  ASSERT_TRUE(b.wait_done());
  EXPECT_EQ(b.done().finish, FinishReason::kLength);
  // Room again.
  Recorder c;
  ASSERT_TRUE(e->submit(r, c.callback()).ok());
  ASSERT_TRUE(c.wait_done());
}

TEST_F(SchedulerControl, ShutdownCancelsEverythingInFlight) {
  auto e = engine();
  std::vector<Recorder> recs(7);
  for (size_t i = 0; i < recs.size(); ++i) {
    EngineRequest r = greedy_request(ids(5 + i, static_cast<int32_t>(i)), 1800);
    r.ignore_eos = true;
    ASSERT_TRUE(e->submit(r, recs[i].callback()).ok());
  }
  for (int i = 0; i < 5000 && recs[0].count(EngineEvent::kText) < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  e->shutdown();
  for (auto& rec : recs) {
    EXPECT_EQ(rec.n_done(), 1);
    EXPECT_EQ(rec.done().finish, FinishReason::kCancelled);
    EXPECT_EQ(rec.events().back().kind, EngineEvent::kDone);
  }
  auto late = e->submit(greedy_request(ids(5), 4), recs[0].callback());
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code, ErrorCode::kShuttingDown);
  EXPECT_TRUE(late.error_message().starts_with("shutting down"));
  e->shutdown();  // idempotent
  EXPECT_EQ(e->status().requests.cancelled, 7);
}

// 4 threads x random submit / cancel operations (50 in all) on a small pool, with deadlines and
// sampled requests mixed in. Every accepted request ends with exactly one kDone, as its last event.
TEST_F(SchedulerControl, StressSubmitAndCancelFromFourThreads) {
  EngineOptions o = test_options(3);
  o.queue_size = 8;
  o.kv_pages = 12;
  o.chunk_tokens = 8;
  auto e = engine(o);
  struct Req {
    uint64_t id = 0;
    Recorder rec;
  };
  std::mutex mu;
  std::vector<std::unique_ptr<Req>> accepted;
  std::atomic<int> ops{0}, refused{0};
  auto worker = [&](int seed) {
    std::mt19937 rng(static_cast<uint32_t>(seed));
    while (ops.fetch_add(1) < 50) {
      if (rng() % 3 == 0) {
        std::lock_guard lk(mu);
        if (!accepted.empty()) e->cancel(accepted[rng() % accepted.size()]->id);
        continue;
      }
      auto req = std::make_unique<Req>();
      EngineRequest r = greedy_request(ids(2 + rng() % 90, static_cast<int32_t>(rng() % 50)), 1 + rng() % 60);
      r.ignore_eos = rng() % 2 == 0;
      if (rng() % 2) {
        r.sampling.temperature = 0.8f;
        r.sampling.seed = rng();
      }
      if (rng() % 5 == 0) r.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(rng() % 20);
      if (rng() % 4 == 0) r.stop = {"a"};
      r.want_progress = rng() % 2;
      Req* raw = req.get();
      auto id = e->submit(r, raw->rec.callback());
      if (!id.ok()) {
        ++refused;
        EXPECT_EQ(id.error().code, ErrorCode::kQueueFull) << id.error_message();
        EXPECT_TRUE(id.error_message().starts_with("queue full")) << id.error_message();
        continue;
      }
      raw->id = *id;
      std::lock_guard lk(mu);
      accepted.push_back(std::move(req));
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t + 1);
  for (auto& t : threads) t.join();
  for (auto& r : accepted) ASSERT_TRUE(r->rec.wait_done()) << "request " << r->id;
  for (auto& r : accepted) {
    EXPECT_EQ(r->rec.n_done(), 1);
    EXPECT_EQ(r->rec.events().back().kind, EngineEvent::kDone);
    const EngineEvent d = r->rec.done();
    EXPECT_NE(d.finish, FinishReason::kError) << d.error;
    if (d.finish != FinishReason::kCancelled && d.finish != FinishReason::kTimeout) {
      EXPECT_EQ(static_cast<int64_t>(r->rec.tokens().size()), d.completion_tokens);
    }
  }
  const EngineStatus s = e->status();
  EXPECT_EQ(s.requests.submitted, static_cast<int64_t>(accepted.size()));
  EXPECT_EQ(s.requests.completed + s.requests.cancelled + s.requests.failed, s.requests.submitted);
  EXPECT_EQ(s.requests.rejected, refused.load());
  expect_idle(*e);
}

}  // namespace
}  // namespace splash
