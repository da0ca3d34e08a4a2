// The paged KV cache: a pool of fixed-size pages (kKvPageTokens = 32 positions of one sequence, all
// layers, K and V; layout in backend/cpu/attention_kv.h) allocated once at start, and per-sequence
// page tables. Position p of a sequence lives in page table.pages[p / 32], slot p % 32.
//
// Pages are reference-counted so the prefix cache can hand whole pages of one sequence to another
// (share_prefix). A shared page is read-only: appending into a shared, partially filled last page
// first copies it (copy-on-write, make_last_page_private); full shared pages are never written.
//
// Thread-safety: none inside. The engine thread owns the pool and every page table; attention
// kernels may read pages (through view()) from pool threads while no append/write/truncate/release
// runs. Ownership: the pool owns the page memory; a KvPageTable only holds page ids and must be
// released to the pool that filled it (release / truncate) before it is dropped, or its pages leak.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cpu/attention_kv.h"
#include "core/result.h"
#include "core/weight_arena.h"

namespace splash {

struct KvCacheConfig {
  int n_layer = 0;
  int n_kv_head = 0;
  int head_dim = 0;
  int64_t n_pages = 0;  // pool size, fixed for the pool's lifetime
  KvFormat format = KvFormat::kInt8;
};

// One sequence's view of the pool. Plain data owned by the engine's per-sequence state.
struct KvPageTable {
  std::vector<int32_t> pages;  // [ceil(n_tokens / 32)] page ids
  int64_t n_tokens = 0;        // positions [0, n_tokens) are reserved (and written, once the
                               // caller's forward has stored them)
};

class KvPagePool {
 public:
  KvPagePool() = default;
  KvPagePool(KvPagePool&&) noexcept = default;
  KvPagePool& operator=(KvPagePool&&) noexcept = default;
  KvPagePool(const KvPagePool&) = delete;
  KvPagePool& operator=(const KvPagePool&) = delete;

  // Bytes one page takes for this model shape and format (for the memory plan, before allocating).
  static int64_t page_bytes(const KvCacheConfig& config);

  // Allocates n_pages pages. Errors: bad shape fields, or the allocation failing.
  static Result<KvPagePool> create(const KvCacheConfig& config);

  const KvCacheConfig& config() const { return config_; }
  const KvPageGeometry& geometry() const { return geo_; }
  int64_t page_bytes() const { return geo_.page_bytes(); }
  int64_t kv_pages_total() const { return config_.n_pages; }
  int64_t kv_pages_free() const { return static_cast<int64_t>(free_.size()); }
  int64_t kv_pages_used() const { return kv_pages_total() - kv_pages_free(); }
  int64_t kv_bytes_total() const { return kv_pages_total() * page_bytes(); }
  int32_t refcount(int32_t page) const;

  // Reserves positions [n_tokens, n_tokens + n_new): allocates the pages needed and makes a shared,
  // partially filled last page private first. On error (pool exhausted) the table is unchanged.
  Status append(KvPageTable& table, int64_t n_new);

  // Stores K and V of positions [pos0, pos0 + n) for layer il. k, v: [n, n_kv_head, head_dim] f32.
  // The positions must be reserved and their pages private (append guarantees it): CHECK.
  void write(const KvPageTable& table, int il, int64_t pos0, int64_t n, const float* k, const float* v);

  // Drops positions >= n_tokens (speculative rollback, prefix reuse); pages no longer needed lose a
  // reference. A no-op when n_tokens >= table.n_tokens.
  void truncate(KvPageTable& table, int64_t n_tokens);

  // Releases every page of the table and empties it.
  void release(KvPageTable& table) { truncate(table, 0); }

  // A new table holding the first n_tokens positions of src, sharing its pages (refcount + 1 each,
  // nothing copied). n_tokens <= src.n_tokens (CHECK).
  KvPageTable share_prefix(const KvPageTable& src, int64_t n_tokens);

  // If the table's last page is shared, replaces it by a private copy. Errors: pool exhausted.
  Status make_last_page_private(KvPageTable& table);

  // --- single pages, for the prefix cache (prefix_cache.h): it holds one reference per cached page.
  // A free page with refcount 1, or -1 when the pool is exhausted.
  int32_t allocate_page() { return free_.empty() ? -1 : take_page(); }
  // One more reference to a page in use (CHECK: refcount > 0).
  void retain_page(int32_t page);
  // Drops one reference; the page is free again at zero.
  void release_page(int32_t page);
  // Copies every byte (all layers, K and V, scales) of page src into page dst (dst private: CHECK).
  void copy_page(int32_t dst, int32_t src);
  // A page's bytes (page_bytes() of them), to hand to the disk tier or fill from it. Writing through
  // page_data_mut needs the page private (CHECK).
  const uint8_t* page_data(int32_t page) const;
  uint8_t* page_data_mut(int32_t page);

  // What attention reads for layer il of this table.
  PagedKvView view(const KvPageTable& table, int il) const;

 private:
  uint8_t* raw_page(int32_t page) { return memory_.data() + page * geo_.page_bytes(); }
  int32_t take_page();
  void drop_page(int32_t page);

  KvCacheConfig config_;
  KvPageGeometry geo_;
  // [n_pages, page_bytes] on transparent huge pages (core/weight_arena.h): decode attention reads one
  // KV head's 4 KiB of every page of every layer, 1.9 MB apart for Qwen3-0.6B; on 4 KiB pages each
  // of them was a TLB miss.
  ArenaBuffer memory_;
  std::vector<int32_t> refcount_;  // [n_pages]
  std::vector<int32_t> free_;      // stack of free page ids
};

}  // namespace splash
