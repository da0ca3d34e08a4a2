// Helpers of the SSD tier tests (disk_store_test.cpp, disk_persist_test.cpp).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cache/disk/disk_block_store.h"

namespace splash::disk_test {

namespace fs = std::filesystem;
inline constexpr const char* kNamespace = "splash test namespace v1";

// A chain of blocks from the namespace root: block i holds tokens derived from i and a payload
// derived from (i, seed), so any byte read back can be checked.
struct Block {
  BlockInfo info;
  std::vector<int32_t> tokens;
  std::vector<uint8_t> payload;
};

inline std::vector<uint8_t> payload_of(int64_t i, size_t n, uint32_t seed = 1) {
  std::vector<uint8_t> p(n);
  uint64_t x = 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1) + seed;
  for (size_t j = 0; j < n; ++j) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[j] = static_cast<uint8_t>(x);
  }
  return p;
}

inline std::vector<Block> make_chain(int64_t n, size_t payload_bytes, BlockKey parent = namespace_key(kNamespace),
                              int32_t token_base = 0) {
  std::vector<Block> out;
  for (int64_t i = 0; i < n; ++i) {
    Block b;
    for (int t = 0; t < 32; ++t) b.tokens.push_back(token_base + static_cast<int32_t>(i * 32 + t));
    b.info.parent = parent;
    b.info.key = chain_block_key(parent, b.tokens);
    b.info.kind = BlockKind::kKvPage;
    b.info.n_tokens = (i + 1) * 32;
    b.payload = payload_of(i + token_base, payload_bytes);
    parent = b.info.key;
    out.push_back(std::move(b));
  }
  return out;
}

// n one-block conversations (independent records).
inline std::vector<Block> make_singles(int64_t n, size_t payload_bytes, int32_t token_base = 0) {
  std::vector<Block> out;
  for (int64_t i = 0; i < n; ++i)
    out.push_back(std::move(make_chain(1, payload_bytes, namespace_key(kNamespace), token_base + static_cast<int32_t>(i) * 1000)[0]));
  return out;
}

inline bool put(BlockStore& s, const Block& b) { return s.put(b.info, b.tokens, b.payload); }

inline bool get_ok(BlockStore& s, const Block& b) {
  auto r = s.get(b.info.key, b.info.kind, b.tokens);
  if (!r.ok()) return false;
  EXPECT_EQ(*r, b.payload) << "a hit must return the exact bytes";
  return *r == b.payload;
}

class TempDir {
 public:
  TempDir() {
    std::string t = (fs::temp_directory_path() / "splash-disk-test-XXXXXX").string();
    SPLASH_CHECK(::mkdtemp(t.data()) != nullptr);
    path_ = t;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::unique_ptr<DiskBlockStore> open_store(const std::string& dir, int64_t quota, bool persistent,
                                           int64_t queue_bytes = 0) {
  DiskStoreOptions o;
  o.quota_bytes = quota;
  o.namespace_description = kNamespace;
  o.persistent = persistent;
  o.dir = dir;
  o.queue_bytes = queue_bytes;
  auto s = DiskBlockStore::open(o);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return s.ok() ? std::move(*s) : nullptr;
}

inline std::string ring_path(const DiskBlockStore& s) { return s.directory() + "/blocks.ring"; }

inline void poke(const std::string& path, uint64_t offset, std::span<const uint8_t> bytes) {
  int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)), static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

}  // namespace splash::disk_test
