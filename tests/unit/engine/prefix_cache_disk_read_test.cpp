// Restores from the SSD tier run off the engine thread (spec 5.4): while a lane's cached prefix is
// being read back, the other lanes keep decoding, and the restored lane's answer equals a cold run's.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "cache/disk/disk_block_store.h"
#include "engine/cache_namespace.h"
#include "scheduler_test_util.h"

namespace splash {
namespace {

using namespace sched_test;  // NOLINT
namespace fs = std::filesystem;

TinyModelCleanup cleanup;

std::vector<int32_t> ids(size_t n, int32_t salt) {
  std::vector<int32_t> p = {1};
  for (size_t i = 1; i < n; ++i)
    p.push_back(static_cast<int32_t>(3 + (i * 7 + static_cast<size_t>(salt) * 13 + i * i * static_cast<size_t>(salt + 1)) % 200));
  return p;
}

std::unique_ptr<Recorder> start(Engine& e, const EngineRequest& r) {
  auto rec = std::make_unique<Recorder>();
  auto id = e.submit(r, rec->callback());
  EXPECT_TRUE(id.ok()) << id.error_message();
  return rec;
}

EngineRequest req(std::vector<int32_t> prompt, int64_t n) {
  EngineRequest r = greedy_request(std::move(prompt), n);
  r.ignore_eos = true;
  return r;
}

TEST(PrefixCacheDiskRead, OtherLanesDecodeWhileAPrefixIsReadBack) {
  auto m = load_model(tiny_model_path());
  ASSERT_TRUE(m);
  const auto dir = fs::temp_directory_path() / ("splash_disk_read_" + std::to_string(getpid()));
  fs::create_directories(dir);
  EngineOptions o = test_options(2);
  o.kv_pages = 40;  // 1,280 positions: a second long prompt pushes the first one out to disk
  o.chunk_tokens = 256;
  DiskStoreOptions so;
  so.quota_bytes = 64 << 20;
  so.namespace_description = engine_cache_namespace(m->model, o.cache_identity, o.kv_format);
  so.dir = dir.string();
  auto store = DiskBlockStore::open(so);
  ASSERT_TRUE(store.ok()) << store.error_message();
  o.cache_store = store->get();

  const auto p = ids(600, 1);
  auto with_tail = p;
  for (int32_t t : ids(21, 2)) with_tail.push_back(t);  // BOS included: any token will do
  // The answer a cold engine gives.
  std::vector<int32_t> cold;
  {
    EngineOptions c = o;
    c.prefix_cache = false;
    c.cache_store = nullptr;
    auto e = Engine::create(m->model, *m->tokenizer, c);
    ASSERT_TRUE(e.ok()) << e.error_message();
    auto r = start(**e, req(with_tail, 6));
    ASSERT_TRUE(r->wait_done());
    cold = r->tokens();
  }
  auto e = Engine::create(m->model, *m->tokenizer, o);
  ASSERT_TRUE(e.ok()) << e.error_message();
  Engine& engine = **e;
  ASSERT_TRUE(start(engine, req(p, 1))->wait_done());
  ASSERT_TRUE(start(engine, req(ids(1100, 3), 1))->wait_done());  // p's deeper pages go to disk
  (*store)->flush();
  ASSERT_GT((*store)->stats().kv_records, 10);

  // A long decode on one lane; then the restore of p on the other, with the reader held back: the
  // decode runs to its end while the restored lane waits.
  auto decode = start(engine, req(ids(40, 4), 500));
  while (decode->tokens().size() < 5) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  (*store)->pause_reader_for_test(true);
  auto restored = start(engine, req(with_tail, 6));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (engine.status().scheduler.waiting_disk == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(engine.status().scheduler.waiting_disk, 1) << "the restored lane waits for its blocks";
  const size_t at_wait = decode->tokens().size();
  ASSERT_TRUE(decode->wait_done());
  EXPECT_EQ(decode->tokens().size(), 500u);
  EXPECT_LT(at_wait, 500u) << "the decode went on while the prefix was being read";
  EXPECT_EQ(restored->tokens().size(), 0u);
  EXPECT_EQ(engine.status().scheduler.waiting_disk, 1);
  (*store)->pause_reader_for_test(false);
  ASSERT_TRUE(restored->wait_done());
  EXPECT_EQ(restored->tokens(), cold);
  EXPECT_GE(restored->done().cached_tokens, 576);  // every whole page of p (RAM and disk)
  const PrefixCacheStats cs = engine.status().cache;
  EXPECT_GT(cs.kv_disk_hit_tokens, 0);
  EXPECT_GE(cs.disk_read_batches, 1);
  e->reset();
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace splash
