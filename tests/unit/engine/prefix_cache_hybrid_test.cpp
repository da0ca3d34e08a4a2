// The prefix cache on hybrid models (issue 6, spec 5.1): recurrent (Gated DeltaNet) state cannot be
// truncated, so a second conversation sharing a long prefix resumes from a checkpoint: the last
// rolling one (every 4096 prefill tokens, none within 2048 of the resume or replay point) at or before
// the shared prefix, and prefills only the rest; a follow-up turn resumes from the first turn's replay
// point (the last whole page before its prompt's end). Greedy tokens equal a cold engine's. Checkpoints
// also travel through the SSD tier: evicted from RAM to a temporary store and read back, and written
// to a persistent directory at a clean stop, then taken back and hit by a new engine.
//
// The unit cases share a ~6.2K-token prefix (one rolling checkpoint, ~3 s on 2 loaded cores). The
// 16K-token case of the issue runs when SPLASH_LONG_TESTS=1 (ctest prefix_cache_hybrid_16k, label
// cache_long).
#include <chrono>
#include <cstdlib>
#include <map>
#include <thread>

#include "cache/disk/disk_block_store.h"
#include "engine/cache_namespace.h"
#include "scheduler_test_util.h"

namespace splash {
namespace {

using namespace sched_test;

constexpr int64_t kInterval = 4096;  // spec 5.1 rolling checkpoint interval (the engine's default)
constexpr int64_t kSpacing = 2048;

// No function-local static: `cleanup` below is constructed before such a static would be, so it
// would be destroyed first and the destructor would read a freed path (ASan at exit).
std::filesystem::path work_path() {
  return std::filesystem::temp_directory_path() / ("splash_cache_hybrid_" + std::to_string(getpid()));
}

std::filesystem::path work_dir() {
  const auto d = work_path();
  std::filesystem::create_directories(d);
  return d;
}

struct Cleanup {
  ~Cleanup() {
    std::error_code ec;
    std::filesystem::remove_all(work_path(), ec);
  }
} cleanup;

// A tiny hybrid whose context holds the long prompts.
LoadedModel& hybrid(const std::string& preset) {
  static std::map<std::string, std::unique_ptr<LoadedModel>> models;
  auto& m = models[preset];
  if (!m) {
    auto spec = test_model_preset(preset);
    EXPECT_TRUE(spec.ok()) << spec.error_message();
    spec->context_length = 20480;
    const std::string path = (work_dir() / (preset + ".gguf")).string();
    Status st = write_test_model(*spec, path);
    EXPECT_TRUE(st.ok()) << st.error_message();
    m = load_model(path);
  }
  return *m;
}

// n token ids in [3, 203) from a seed (first = BOS).
std::vector<int32_t> ids(size_t n, int32_t salt) {
  std::vector<int32_t> p = {1};
  for (size_t i = 1; i < n; ++i)
    p.push_back(static_cast<int32_t>(3 + (i * 7 + static_cast<size_t>(salt) * 13 + i * i * static_cast<size_t>(salt + 1)) % 200));
  return p;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin() + 1, b.end());
  return a;
}

EngineRequest req(std::vector<int32_t> prompt) {
  EngineRequest r = greedy_request(std::move(prompt), 8);
  r.ignore_eos = true;
  return r;
}

std::unique_ptr<Recorder> run(Engine& e, const EngineRequest& r) {
  auto rec = std::make_unique<Recorder>();
  auto id = e.submit(r, rec->callback());
  EXPECT_TRUE(id.ok()) << id.error_message();
  EXPECT_TRUE(rec->wait_done());
  EXPECT_EQ(rec->done().finish, FinishReason::kLength) << rec->done().error;
  return rec;
}

std::unique_ptr<Engine> engine(LoadedModel& m, EngineOptions o) {
  auto e = Engine::create(m.model, *m.tokenizer, o);
  EXPECT_TRUE(e.ok()) << e.error_message();
  return e.ok() ? std::move(*e) : nullptr;
}

EngineOptions options() {
  EngineOptions o = test_options(1);
  o.chunk_tokens = 2048;
  return o;
}

// The deepest rolling checkpoint a cold prefill of n_prompt tokens keeps (each retires the previous).
int64_t last_rolling(int64_t n_prompt) {
  const int64_t replay = (n_prompt - 1) / kKvPageTokens * kKvPageTokens;
  int64_t last = 0;
  for (int64_t b = kInterval; b < replay; b += kInterval)
    if (b >= kSpacing && replay - b >= kSpacing) last = b;
  return last;
}

// One shared prefix, two conversations on it and a follow-up turn of the first.
struct Workload {
  EngineRequest a, b;
  int64_t shared = 0;
};

Workload workload(int64_t shared) {
  const auto prefix = ids(static_cast<size_t>(shared), 1);
  Workload w;
  w.shared = shared;
  w.a = req(concat(prefix, ids(300, 2)));
  w.b = req(concat(prefix, ids(200, 3)));
  return w;
}

// b's tokens on a cold engine without the cache (computed once per model and length).
const std::vector<int32_t>& cold_b(const std::string& preset, const Workload& w) {
  static std::map<std::pair<std::string, int64_t>, std::vector<int32_t>> memo;
  auto& out = memo[{preset, w.shared}];
  if (out.empty()) {
    EngineOptions o = options();
    o.prefix_cache = false;
    out = run(*engine(hybrid(preset), o), w.b)->tokens();
  }
  return out;
}

void second_conversation_resumes_from_a_checkpoint(const std::string& preset, int64_t shared) {
  LoadedModel& m = hybrid(preset);
  ASSERT_GT(m.model.recurrent_state_floats(), 0);
  const Workload w = workload(shared);
  const int64_t resume = last_rolling(static_cast<int64_t>(w.a.prompt.size()));
  ASSERT_GT(resume, 0);
  ASSERT_LE(resume, shared);
  auto e = engine(m, options());
  auto ra = run(*e, w.a);
  EXPECT_EQ(ra->done().cached_tokens, 0);
  EngineStatus s = e->status();
  EXPECT_GE(s.cache.checkpoint_publications, 1);  // rolling
  EXPECT_EQ(s.cache.replay_publications, 1);
  EXPECT_EQ(s.cache.checkpoints, 2);  // the last rolling one and the replay point
  EXPECT_EQ(s.cache.checkpoint_bytes, 2 * m.model.recurrent_state_floats() * int64_t{sizeof(float)});

  const int64_t rows_before = s.scheduler.prefill_rows;
  auto rb = run(*e, w.b);
  EXPECT_EQ(rb->done().cached_tokens, resume);
  EXPECT_EQ(e->status().scheduler.prefill_rows - rows_before, static_cast<int64_t>(w.b.prompt.size()) - resume);
  EXPECT_EQ(e->status().cache.checkpoint_hits, 1);
  EXPECT_EQ(rb->tokens(), cold_b(preset, w)) << "same greedy tokens as a cold run";

  // A follow-up turn of a (prompt + answer + more) resumes from a's replay point.
  auto ctx = w.a.prompt;
  const auto answer = ra->tokens();
  ctx.insert(ctx.end(), answer.begin(), answer.end());
  const EngineRequest follow = req(concat(ctx, ids(40, 4)));
  const int64_t replay_a = (static_cast<int64_t>(w.a.prompt.size()) - 1) / kKvPageTokens * kKvPageTokens;
  const int64_t rows_follow = e->status().scheduler.prefill_rows;
  auto rf = run(*e, follow);
  EXPECT_EQ(rf->done().cached_tokens, replay_a);
  EXPECT_EQ(e->status().scheduler.prefill_rows - rows_follow, static_cast<int64_t>(follow.prompt.size()) - replay_a);
  EngineOptions o = options();
  o.prefix_cache = false;
  EXPECT_EQ(rf->tokens(), run(*engine(m, o), follow)->tokens());
}

class HybridPrefixCache : public ::testing::TestWithParam<std::string> {};

TEST_P(HybridPrefixCache, SecondConversationResumesFromARollingCheckpoint) {
  second_conversation_resumes_from_a_checkpoint(GetParam(), 6200);
}

// Checkpoints beyond the RAM budget go to the SSD tier (state records) and come back on a hit.
TEST(HybridPrefixCacheDisk, EvictedCheckpointIsReadBackFromTheDiskTier) {
  const std::string preset = "tiny-qwen3-next";
  LoadedModel& m = hybrid(preset);
  const Workload w = workload(6200);
  const int64_t state_bytes = m.model.recurrent_state_floats() * int64_t{sizeof(float)};
  EngineOptions o = options();
  DiskStoreOptions so;
  so.quota_bytes = 64 << 20;
  so.namespace_description = engine_cache_namespace(m.model, o.cache_identity, o.kv_format);
  so.dir = work_dir().string();
  auto store = DiskBlockStore::open(so);
  ASSERT_TRUE(store.ok()) << store.error_message();
  o.cache_store = store->get();
  o.max_checkpoint_bytes = state_bytes;  // room for one: the rolling one leaves for the replay point
  auto e = engine(m, o);
  run(*e, w.a);
  EXPECT_EQ(e->status().cache.checkpoints, 1);
  EXPECT_EQ(e->status().cache.checkpoint_evictions, 1);
  (*store)->flush();
  EXPECT_EQ((*store)->stats().state_records, 1);
  EXPECT_EQ((*store)->stats().states_written, 1);
  auto rb = run(*e, w.b);
  EXPECT_EQ(rb->done().cached_tokens, last_rolling(static_cast<int64_t>(w.a.prompt.size())));
  EXPECT_EQ(e->status().cache.disk_hits, 1);  // the state; the KV pages were still in RAM
  EXPECT_EQ((*store)->stats().states_read, 1);
  EXPECT_EQ(rb->tokens(), cold_b(preset, w));
}

// A clean stop writes pages and checkpoints to a persistent directory; a new store takes them back and
// a new engine's second conversation resumes from the checkpoint read from disk.
TEST(HybridPrefixCacheDisk, CheckpointsSurviveAPersistentRestart) {
  const std::string preset = "tiny-qwen3-next";
  LoadedModel& m = hybrid(preset);
  const Workload w = workload(6200);
  EngineOptions o = options();
  DiskStoreOptions so;
  so.quota_bytes = 64 << 20;
  so.namespace_description = engine_cache_namespace(m.model, o.cache_identity, o.kv_format);
  so.persistent = true;
  so.dir = (work_dir() / "persistent").string();
  {
    auto store = DiskBlockStore::open(so);
    ASSERT_TRUE(store.ok()) << store.error_message();
    o.cache_store = store->get();
    auto e = engine(m, o);
    run(*e, w.a);
    e.reset();  // clean stop: the cache goes to disk
    EXPECT_EQ((*store)->stats().state_records, 2);
  }
  auto store = DiskBlockStore::open(so);
  ASSERT_TRUE(store.ok()) << store.error_message();
  const BlockStoreStats back = (*store)->stats();
  EXPECT_EQ(back.restored_states, 2);
  EXPECT_GE(back.restored_kv_blocks, static_cast<int64_t>(w.a.prompt.size()) / kKvPageTokens);
  o.cache_store = store->get();
  auto e = engine(m, o);
  auto rb = run(*e, w.b);
  const int64_t resume = last_rolling(static_cast<int64_t>(w.a.prompt.size()));
  EXPECT_EQ(rb->done().cached_tokens, resume);
  EXPECT_EQ(e->status().cache.kv_disk_hit_tokens, resume);
  // Every shared whole page was read back (the match is cut back to the checkpoint after), + the state.
  EXPECT_EQ(e->status().cache.disk_hits, w.shared / kKvPageTokens + 1);
  EXPECT_EQ(rb->tokens(), cold_b(preset, w));
}

// Write-behind (spec 5.6): with a persistent store, a conversation's restore point (the replay
// checkpoint of a ~2.5K-token prompt, with its KV chain) reaches the disk a short delay after
// publication, while the engine keeps running: no eviction, no clean stop. A copy of the ring taken
// then (what kill -9 leaves) is taken back whole, and a new engine resumes there with the same tokens.
TEST(HybridPrefixCacheDisk, WriteBehindMakesTheRestorePointDurableWithoutAStop) {
  const std::string preset = "tiny-qwen3-next";
  LoadedModel& m = hybrid(preset);
  const EngineRequest a = req(ids(2500, 7));
  const int64_t replay = (static_cast<int64_t>(a.prompt.size()) - 1) / kKvPageTokens * kKvPageTokens;
  EngineOptions o = options();
  o.cache_write_behind_delay = std::chrono::milliseconds(200);
  DiskStoreOptions so;
  so.quota_bytes = 64 << 20;
  so.namespace_description = engine_cache_namespace(m.model, o.cache_identity, o.kv_format);
  so.persistent = true;
  so.dir = (work_dir() / "write-behind").string();
  auto store = DiskBlockStore::open(so);
  ASSERT_TRUE(store.ok()) << store.error_message();
  o.cache_store = store->get();
  auto e = engine(m, o);
  auto ra = run(*e, a);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (e->status().cache.write_behind_durable < 1 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const EngineStatus s = e->status();
  EXPECT_EQ(s.cache.write_behind_durable, 1);
  EXPECT_EQ(s.cache.write_behind_waiting, 0);
  EXPECT_EQ(s.cache.kv_evictions, 0) << "nothing was evicted: the blocks were written behind";
  EXPECT_EQ(s.cache.checkpoint_evictions, 0);
  const BlockStoreStats st = (*store)->stats();
  EXPECT_EQ(st.kv_records, replay / kKvPageTokens);
  EXPECT_EQ(st.state_records, 1);

  // The ring as kill -9 would leave it (the engine and the store still running).
  const auto copy = work_dir() / "write-behind-copy";
  const auto ns = std::filesystem::path((*store)->directory()).filename();
  std::filesystem::create_directories(copy / ns);
  std::filesystem::copy_file(std::filesystem::path((*store)->directory()) / "blocks.ring", copy / ns / "blocks.ring");
  DiskStoreOptions so2 = so;
  so2.dir = copy.string();
  auto back = DiskBlockStore::open(so2);
  ASSERT_TRUE(back.ok()) << back.error_message();
  EXPECT_EQ((*back)->stats().restored_points, 1);
  EXPECT_EQ((*back)->stats().restored_states, 1);
  EXPECT_EQ((*back)->stats().restored_kv_blocks, replay / kKvPageTokens);
  EngineOptions o2 = options();
  o2.cache_store = back->get();
  auto e2 = engine(m, o2);
  auto again = run(*e2, a);
  EXPECT_EQ(again->done().cached_tokens, replay);
  EXPECT_EQ(again->tokens(), ra->tokens());
}

INSTANTIATE_TEST_SUITE_P(Tiny, HybridPrefixCache, ::testing::Values("tiny-qwen3-next", "tiny-qwen3-5"));

// The 16K-token shared prefix (rolling checkpoints at 4096, 8192, 12288; the last one kept).
TEST(HybridPrefixCacheLong, SixteenThousandTokenPrefix) {
  const char* on = std::getenv("SPLASH_LONG_TESTS");
  if (on == nullptr || std::string(on) != "1") GTEST_SKIP() << "SPLASH_LONG_TESTS=1 runs it (ctest prefix_cache_hybrid_16k)";
  second_conversation_resumes_from_a_checkpoint("tiny-qwen3-next", 16384);
}

}  // namespace
}  // namespace splash
