// The SSD tier's persistent directory: restart take-back, damaged files (truncated, bit-flipped,
// torn tail), one owner per directory, kill -9 in the middle of writes.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include <chrono>
#include <thread>

#include "cache/disk/disk_block_store.h"
#include "cache/disk/record.h"
#include "disk_test_util.h"

namespace splash {
namespace {

using namespace disk_test;  // NOLINT

constexpr size_t kPayload = 50000;

TEST(DiskPersist, RestartTakesBackWholeChains) {
  TempDir dir;
  auto chain = make_chain(10, kPayload);
  auto branch = make_chain(3, kPayload, chain[4].info.key, 100000);  // a second conversation from block 4
  auto orphan_parent = make_chain(2, kPayload, namespace_key(kNamespace), 200000);
  Block state;
  state.info = chain[9].info;
  state.info.kind = BlockKind::kState;
  state.tokens = chain[9].tokens;
  state.payload = payload_of(777, 9000);
  std::string ns_dir;
  {
    auto s = open_store(dir.path(), 16 << 20, true);
    ASSERT_TRUE(s);
    EXPECT_TRUE(s->persistent());
    EXPECT_EQ(s->stats().restored_records, 0);
    for (const Block& b : chain) put(*s, b);
    for (const Block& b : branch) put(*s, b);
    put(*s, orphan_parent[1]);  // its parent block is never written: a broken chain
    put(*s, state);
    ns_dir = s->directory();
  }  // the destructor flushes and syncs
  EXPECT_TRUE(fs::exists(ns_dir + "/namespace.txt"));
  EXPECT_TRUE(fs::exists(ns_dir + "/lock"));
  EXPECT_EQ(fs::status(ns_dir).permissions() & fs::perms::all, fs::perms::owner_all);
  auto s = open_store(dir.path(), 16 << 20, true);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->directory(), ns_dir);
  const BlockStoreStats st = s->stats();
  EXPECT_EQ(st.restored_kv_blocks, 13);
  EXPECT_EQ(st.restored_states, 1);
  EXPECT_EQ(st.restored_records, 14);
  EXPECT_EQ(st.restored_points, 2);  // the ends of the two conversations
  EXPECT_EQ(st.left_behind, 1);
  EXPECT_EQ(st.read_failures, 0);
  for (const Block& b : chain) EXPECT_TRUE(get_ok(*s, b));
  for (const Block& b : branch) EXPECT_TRUE(get_ok(*s, b));
  EXPECT_TRUE(get_ok(*s, state));
  EXPECT_FALSE(s->contains(orphan_parent[1].info.key, BlockKind::kKvPage));
  // New writes continue after the restored ones and survive the next restart too.
  auto more = make_chain(3, kPayload, chain[9].info.key, 300000);
  for (const Block& b : more) put(*s, b);
  s.reset();
  s = open_store(dir.path(), 16 << 20, true);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->stats().restored_kv_blocks, 16);
  for (const Block& b : more) EXPECT_TRUE(get_ok(*s, b));
  for (const Block& b : chain) EXPECT_TRUE(get_ok(*s, b));
}

TEST(DiskPersist, ServeTierPrintsTheTakeBackLine) {
  TempDir dir;
  DiskTierConfig c;
  c.quota_bytes = 8 << 20;
  c.persistent = true;
  c.cache_dir = dir.path() + "/prefix-cache";
  c.temp_dir = dir.path();
  c.namespace_description = kNamespace;
  c.lock_wait = std::chrono::milliseconds(0);
  {
    auto t = open_disk_tier(c);
    ASSERT_TRUE(t.ok()) << t.error_message();
    ASSERT_EQ(t->lines.size(), 1u);
    EXPECT_NE(t->lines[0].find("took back 0 restore points over 0 KV blocks"), std::string::npos) << t->lines[0];
    for (const Block& b : make_chain(4, kPayload)) put(*t->store, b);
  }
  auto t = open_disk_tier(c);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->lines.size(), 1u);
  EXPECT_NE(t->lines[0].find("Persistent cache " + dir.path() + "/prefix-cache/"), std::string::npos) << t->lines[0];
  EXPECT_NE(t->lines[0].find("took back 1 restore points over 4 KV blocks (0.2 MiB); left 0 copies behind."),
            std::string::npos)
      << t->lines[0];
  c.quota_bytes = 0;
  auto off = open_disk_tier(c);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->store, nullptr);
  // A hybrid whose one restore state does not fit the quota: the tier is off, and the line says why.
  c.quota_bytes = 8 << 20;
  c.state_bytes = 9 << 20;
  auto small = open_disk_tier(c);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->store, nullptr);
  ASSERT_EQ(small->lines.size(), 1u);
  EXPECT_NE(small->lines[0].find("is smaller than one restore state"), std::string::npos) << small->lines[0];
  c.state_bytes = 1 << 20;
  auto fits = open_disk_tier(c);
  ASSERT_TRUE(fits.ok());
  EXPECT_NE(fits->store, nullptr);
  c.state_bytes = 0;
  EXPECT_EQ(default_cache_dir("/x/cache", "/home/u"), "/x/cache/splash/prefix-cache");
  EXPECT_EQ(default_cache_dir(nullptr, "/home/u"), "/home/u/.cache/splash/prefix-cache");
  EXPECT_EQ(default_cache_dir("relative", "/home/u"), "/home/u/.cache/splash/prefix-cache");
}

TEST(DiskPersist, SecondOwnerIsRefusedAndFallsBackToATemporaryFile) {
  TempDir dir;
  auto chain = make_chain(6, kPayload);
  auto first = open_store(dir.path(), 8 << 20, true);
  ASSERT_TRUE(first);
  for (const Block& b : chain) put(*first, b);
  first->flush();

  DiskStoreOptions o;
  o.quota_bytes = 8 << 20;
  o.namespace_description = kNamespace;
  o.persistent = true;
  o.dir = dir.path();
  DiskBlockStore::OpenFailure failure = DiskBlockStore::OpenFailure::kNone;
  auto second = DiskBlockStore::open(o, &failure);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(failure, DiskBlockStore::OpenFailure::kBusy);
  EXPECT_NE(second.error_message().find("in use by another Splash server"), std::string::npos);

  DiskTierConfig c;
  c.quota_bytes = 8 << 20;
  c.persistent = true;
  c.cache_dir = dir.path();
  c.temp_dir = dir.path();
  c.namespace_description = kNamespace;
  c.lock_wait = std::chrono::milliseconds(0);
  auto tier = open_disk_tier(c);
  ASSERT_TRUE(tier.ok()) << tier.error_message();
  ASSERT_TRUE(tier->store);
  EXPECT_FALSE(tier->store->persistent());
  const auto ring_before = fs::file_size(ring_path(*first));
  auto other = make_chain(6, kPayload, namespace_key(kNamespace), 5000);
  for (const Block& b : other) put(*tier->store, b);
  tier->store->flush();
  for (const Block& b : other) EXPECT_TRUE(get_ok(*tier->store, b));
  EXPECT_EQ(fs::file_size(ring_path(*first)), ring_before);
  for (const Block& b : chain) EXPECT_TRUE(get_ok(*first, b));
  first.reset();
  tier->store.reset();
  auto again = open_store(dir.path(), 8 << 20, true);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->stats().restored_kv_blocks, 6);
  for (const Block& b : chain) EXPECT_TRUE(get_ok(*again, b));
}

TEST(DiskPersist, BitFlipIsAMissNotGarbage) {
  TempDir dir;
  auto chain = make_chain(8, kPayload);
  auto s = open_store(dir.path(), 8 << 20, true);
  ASSERT_TRUE(s);
  for (const Block& b : chain) put(*s, b);
  s->flush();
  const uint64_t rec = disk::record_bytes(32, kPayload);
  // Flip one payload byte of record 3 behind the store's back.
  const uint8_t junk[1] = {0x5a};
  poke(ring_path(*s), 3 * rec + 20000, junk);
  auto r = s->get(chain[3].info.key, BlockKind::kKvPage, chain[3].tokens);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error_message().find("checksum"), std::string::npos) << r.error_message();
  EXPECT_EQ(s->stats().read_failures, 1);
  // A bad record leaves the index, with what hangs off it (unreachable from the root without it).
  for (size_t i = 3; i < chain.size(); ++i) EXPECT_FALSE(s->contains(chain[i].info.key, BlockKind::kKvPage)) << i;
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(get_ok(*s, chain[i]));
  // Flip a header byte of record 1, then restart: it is not taken back, nor record 2 (its child).
  poke(ring_path(*s), 1 * rec + 30, junk);
  s.reset();
  s = open_store(dir.path(), 8 << 20, true);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->stats().restored_kv_blocks, 1);
  EXPECT_EQ(s->stats().left_behind, 1);
  EXPECT_TRUE(get_ok(*s, chain[0]));
  for (size_t i = 1; i < chain.size(); ++i) EXPECT_FALSE(s->contains(chain[i].info.key, BlockKind::kKvPage)) << i;
}

TEST(DiskPersist, TruncatedFileIsDetected) {
  TempDir dir;
  auto chain = make_chain(8, kPayload);
  const uint64_t rec = disk::record_bytes(32, kPayload);
  auto s = open_store(dir.path(), 8 << 20, true);
  ASSERT_TRUE(s);
  for (const Block& b : chain) put(*s, b);
  s->flush();
  // Cut the file in the middle of record 6 while the store is open: reads of 6 and 7 fail.
  ASSERT_EQ(::truncate(ring_path(*s).c_str(), static_cast<off_t>(6 * rec + rec / 2)), 0);
  for (size_t i = 6; i < 8; ++i) {
    auto r = s->get(chain[i].info.key, BlockKind::kKvPage, chain[i].tokens);
    EXPECT_FALSE(r.ok()) << i;
  }
  EXPECT_EQ(s->stats().read_failures, 1) << "7 left with 6, its parent: a plain miss";
  for (size_t i = 0; i < 6; ++i) EXPECT_TRUE(get_ok(*s, chain[i]));
  const std::string ring = ring_path(*s);
  s.reset();
  // And at the next start, a record cut in the middle is not taken back.
  ASSERT_EQ(::truncate(ring.c_str(), static_cast<off_t>(5 * rec + 9000)), 0);
  s = open_store(dir.path(), 8 << 20, true);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->stats().restored_kv_blocks, 5);
  EXPECT_EQ(s->stats().read_failures, 1) << "the partial record counts as a miss";
  for (size_t i = 0; i < 5; ++i) EXPECT_TRUE(get_ok(*s, chain[i]));
  EXPECT_FALSE(s->contains(chain[5].info.key, BlockKind::kKvPage));
}

// Damage that leaves no valid header is counted too, record by record where the headers can still
// be told from payload, and reported in the start-up line (it was silent: read_failures stayed 0).
TEST(DiskPersist, DamagedHeadersAreCountedAndReported) {
  const uint64_t rec = disk::record_bytes(32, kPayload);
  struct Damage {
    const char* what;
    int64_t n_records;
    std::function<void(const std::string& ring)> apply;
    int64_t min_skipped, max_skipped;
  };
  const uint8_t flip[1] = {0xff};
  const uint8_t no_magic[4] = {'J', 'U', 'N', 'K'};
  std::vector<uint8_t> garbage(1 << 20);
  uint32_t x = 12345;
  for (uint8_t& b : garbage) b = static_cast<uint8_t>((x = x * 1664525u + 1013904223u) >> 24);
  const std::vector<Damage> cases = {
      {"a byte flipped in each header", 8,
       [&](const std::string& ring) {
         for (uint64_t i = 0; i < 8; ++i) poke(ring, i * rec + 8 + 9 * i, flip);  // a different field each time
       },
       8, 8},
      {"the magic destroyed", 8,
       [&](const std::string& ring) {
         for (uint64_t i = 0; i < 8; ++i) poke(ring, i * rec, no_magic);
       },
       8, 8},
      // ~20 records under the first MiB: one unreadable region (which records it held cannot be told).
      {"the first MiB overwritten", 30, [&](const std::string& ring) { poke(ring, 0, garbage); }, 1, 30},
  };
  for (const Damage& c : cases) {
    SCOPED_TRACE(c.what);
    TempDir dir;
    auto chain = make_chain(c.n_records, kPayload);
    std::string ring;
    {
      auto s = open_store(dir.path(), 8 << 20, true);
      ASSERT_TRUE(s);
      for (const Block& b : chain) put(*s, b);
      s->flush();
      ring = ring_path(*s);
    }
    c.apply(ring);
    ::testing::internal::CaptureStderr();
    auto s = open_store(dir.path(), 8 << 20, true);
    const std::string log = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(s);
    const BlockStoreStats st = s->stats();
    EXPECT_EQ(st.restored_kv_blocks, 0);  // every chain starts at a damaged record
    EXPECT_GE(st.read_failures, c.min_skipped);
    EXPECT_LE(st.read_failures, c.max_skipped);
    EXPECT_NE(log.find(str_cat("SSD cache: ", st.read_failures, " damaged or partial records")), std::string::npos)
        << log;
  }
}

TEST(DiskPersist, TornTailAfterACrashIsSkipped) {
  TempDir dir;
  auto chain = make_chain(6, kPayload);
  const uint64_t rec = disk::record_bytes(32, kPayload);
  std::string ring;
  {
    auto s = open_store(dir.path(), 8 << 20, true);
    ASSERT_TRUE(s);
    for (const Block& b : chain) put(*s, b);
    ring = ring_path(*s);
  }
  // The last record's second half never reached the file (as when the writer dies mid-write).
  std::vector<uint8_t> zeros(rec / 2, 0);
  poke(ring, 5 * rec + rec / 2, zeros);
  auto s = open_store(dir.path(), 8 << 20, true);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->stats().restored_kv_blocks, 5);
  EXPECT_EQ(s->stats().read_failures, 1);
  EXPECT_FALSE(s->contains(chain[5].info.key, BlockKind::kKvPage));
  for (size_t i = 0; i < 5; ++i) EXPECT_TRUE(get_ok(*s, chain[i]));
  // The store writes on over the torn space.
  put(*s, chain[5]);
  s->flush();
  EXPECT_TRUE(get_ok(*s, chain[5]));
}

// A child process writes blocks as fast as it can and is killed with SIGKILL mid-stream; the next
// open serves every record it takes back with the exact bytes, and nothing else.
TEST(DiskPersist, KillNineInTheMiddleOfWrites) {
  TempDir dir;
  const int64_t quota = 6 << 20;  // the child writes past it: the ring turns over while it is killed
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    DiskStoreOptions o;
    o.quota_bytes = quota;
    o.namespace_description = kNamespace;
    o.persistent = true;
    o.dir = dir.path();
    auto s = DiskBlockStore::open(o);
    if (!s.ok()) ::_exit(3);
    // Conversations of 16 blocks, one after another, until killed.
    for (int conv = 0;; ++conv) {
      for (const Block& b : make_chain(16, 20000, namespace_key(kNamespace), conv * 1000)) {
        while (!put(**s, b)) std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }
  // Wait until the ring has turned over at least once, then kill.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::string ring;
  while (std::chrono::steady_clock::now() < deadline) {
    for (const auto& e : fs::directory_iterator(dir.path()))
      if (fs::exists(e.path() / "blocks.ring")) ring = (e.path() / "blocks.ring").string();
    if (!ring.empty() && fs::file_size(ring) >= static_cast<uintmax_t>(2 * quota - (1 << 20))) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited early with " << WEXITSTATUS(status);
  ASSERT_FALSE(ring.empty());

  auto s = open_store(dir.path(), quota, true);
  ASSERT_TRUE(s) << "the directory's lock died with the child";
  const BlockStoreStats st = s->stats();
  EXPECT_GT(st.restored_kv_blocks, 50);
  EXPECT_LE(st.bytes_used, quota);
  // Every block the store claims is served with its exact bytes, or is a miss.
  int64_t hits = 0, claimed = 0;
  for (int conv = 0; conv < 4000 && claimed < st.restored_kv_blocks; ++conv) {
    for (const Block& b : make_chain(16, 20000, namespace_key(kNamespace), conv * 1000)) {
      if (!s->contains(b.info.key, BlockKind::kKvPage)) continue;
      ++claimed;
      auto r = s->get(b.info.key, BlockKind::kKvPage, b.tokens);
      if (r.ok()) {
        ASSERT_EQ(*r, b.payload) << "wrong bytes served after kill -9";
        ++hits;
      }
    }
  }
  EXPECT_EQ(claimed, st.restored_kv_blocks);
  EXPECT_GE(hits, st.restored_kv_blocks - s->stats().read_failures);
  // And it writes on.
  auto fresh = make_chain(20, 20000, namespace_key(kNamespace), 90000000);
  for (const Block& b : fresh) put(*s, b);
  s->flush();
  for (const Block& b : fresh) EXPECT_TRUE(get_ok(*s, b));
}

// Spec 5.6: after an unclean exit the next start serves on probation; when that process dies again
// within it, the start after it empties the cache; a probation served to its end (or a clean stop)
// makes the folder trusted again.
TEST(DiskPersist, ProbationAfterAnUncleanExit) {
  TempDir dir;
  const int64_t quota = 8 << 20;
  auto options = [&](std::chrono::milliseconds probation) {
    DiskStoreOptions o;
    o.quota_bytes = quota;
    o.namespace_description = kNamespace;
    o.persistent = true;
    o.dir = dir.path();
    o.probation = probation;
    return o;
  };
  // A child opens the folder (with `probation`), writes a chain, says so, and is killed.
  auto killed_child = [&](std::chrono::milliseconds probation) {
    const std::string ready = dir.path() + "/ready";
    fs::remove(ready);
    const pid_t child = ::fork();
    if (child == 0) {
      auto s = DiskBlockStore::open(options(probation));
      if (!s.ok()) ::_exit(3);
      for (const Block& b : make_chain(4, 20000)) put(**s, b);
      (*s)->flush();
      std::ofstream(ready) << "ok";
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!fs::exists(ready) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    return fs::exists(ready);
  };
  auto open_with = [&](std::chrono::milliseconds probation) {
    auto s = DiskBlockStore::open(options(probation));
    EXPECT_TRUE(s.ok()) << s.error_message();
    return s.ok() ? std::move(*s) : nullptr;
  };
  // 1. Killed once: the next start serves on probation, with everything taken back.
  ASSERT_TRUE(killed_child(std::chrono::seconds(60)));
  {
    auto s = open_with(std::chrono::milliseconds(300));
    ASSERT_TRUE(s);
    EXPECT_TRUE(s->housekeeping().unclean_exit);
    EXPECT_FALSE(s->housekeeping().emptied);
    EXPECT_TRUE(s->on_probation());
    EXPECT_TRUE(fs::exists(s->directory() + "/probation"));
    EXPECT_EQ(s->stats().restored_kv_blocks, 4);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (s->on_probation() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_FALSE(s->on_probation()) << "served its probation";
    EXPECT_FALSE(fs::exists(s->directory() + "/probation"));
  }
  // A clean stop: trusted.
  {
    auto s = open_with(std::chrono::seconds(60));
    ASSERT_TRUE(s);
    EXPECT_FALSE(s->housekeeping().unclean_exit);
    EXPECT_FALSE(s->on_probation());
  }
  // 2. Killed, then killed again within the probation that followed: the next start empties it.
  ASSERT_TRUE(killed_child(std::chrono::seconds(60)));
  ASSERT_TRUE(killed_child(std::chrono::seconds(60)));  // on probation when killed
  auto s = open_with(std::chrono::seconds(60));
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->housekeeping().emptied);
  EXPECT_FALSE(s->on_probation());
  EXPECT_EQ(s->stats().restored_kv_blocks, 0);
  EXPECT_EQ(s->stats().records, 0);
  for (const Block& b : make_chain(4, 20000)) EXPECT_FALSE(s->contains(b.info.key, BlockKind::kKvPage));
}

// Spec 5.6: namespace folders of the cache root unused for 14 days are deleted at open, unless
// another process holds one; anything else in the root is left alone.
TEST(DiskPersist, NamespacesUnusedForTwoWeeksAreRemoved) {
  TempDir dir;
  const auto now = fs::file_time_type::clock::now();
  auto make_ns = [&](const std::string& name, std::chrono::hours age) {
    const fs::path p = fs::path(dir.path()) / name;
    fs::create_directories(p);
    std::ofstream(p / "blocks.ring") << std::string(10000, 'x');
    std::ofstream(p / "last_used") << "x";
    fs::last_write_time(p / "last_used", now - age);
    return p;
  };
  const fs::path old_ns = make_ns("0123456789abcdef0123456789abcdef", std::chrono::hours(24 * 15));
  const fs::path recent = make_ns("fedcba9876543210fedcba9876543210", std::chrono::hours(24 * 13));
  const fs::path held = make_ns("00000000000000000000000000000001", std::chrono::hours(24 * 30));
  const fs::path other = make_ns("not-a-namespace", std::chrono::hours(24 * 30));
  disk::DirLock lock;  // another server's
  std::string error;
  ASSERT_EQ(disk::DirLock::try_lock((held / "lock").string(), std::chrono::milliseconds(0), lock, error),
            disk::DirLock::Outcome::kLocked);
  auto s = open_store(dir.path(), 1 << 20, true);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->housekeeping().removed_namespaces, 1);
  EXPECT_GT(s->housekeeping().removed_bytes, 0);
  EXPECT_FALSE(fs::exists(old_ns));
  EXPECT_TRUE(fs::exists(recent));
  EXPECT_TRUE(fs::exists(held));
  EXPECT_TRUE(fs::exists(other));
  EXPECT_TRUE(fs::exists(s->directory())) << "its own folder";
}

}  // namespace
}  // namespace splash
