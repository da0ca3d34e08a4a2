#include "cache/kv_pages.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

namespace splash {


int64_t KvPagePool::page_bytes(const KvCacheConfig& c) {
  return KvPageGeometry{c.format, c.n_layer, c.n_kv_head, c.head_dim}.page_bytes();
}

Result<KvPagePool> KvPagePool::create(const KvCacheConfig& c) {
  if (c.n_layer <= 0 || c.n_kv_head <= 0 || c.head_dim <= 0) {
    return make_error("kv cache: n_layer, n_kv_head and head_dim must be positive (got ", c.n_layer, ", ",
                      c.n_kv_head, ", ", c.head_dim, ")");
  }
  if (c.n_pages <= 0 || c.n_pages > std::numeric_limits<int32_t>::max()) {
    return make_error("kv cache: n_pages must be in [1, 2^31) (got ", c.n_pages, ")");
  }
  KvPagePool pool;
  pool.config_ = c;
  pool.geo_ = KvPageGeometry{c.format, c.n_layer, c.n_kv_head, c.head_dim};
  const int64_t pb = pool.geo_.page_bytes();
  if (pb > std::numeric_limits<int64_t>::max() / c.n_pages) return make_error("kv cache: size overflows");
  const int64_t total = pb * c.n_pages;
  // Pages start on 64-byte lines (page_bytes is a multiple of 64). Untouched memory stays virtual
  // until first written (on huge pages, 2 MiB at a time; pages fill the pool from the start). At least
  // 8 MiB, so the pool always gets a mapping of its own, unmapped with it, instead of a place in a
  // chunk shared with weights (whose touched pages would stay until the whole chunk goes).
  try {
    pool.memory_ = ArenaBuffer::allocate(std::max<size_t>(static_cast<size_t>(total), size_t{8} << 20));
  } catch (const std::bad_alloc&) {
    return make_error("kv cache: cannot allocate ", c.n_pages, " pages of ", pb, " bytes (", total, " bytes)");
  }
  pool.refcount_.assign(static_cast<size_t>(c.n_pages), 0);
  pool.free_.reserve(static_cast<size_t>(c.n_pages));
  // Lowest ids on top of the stack: pages fill the pool from the start.
  for (int64_t i = c.n_pages - 1; i >= 0; --i) pool.free_.push_back(static_cast<int32_t>(i));
  return pool;
}

int32_t KvPagePool::refcount(int32_t page) const {
  SPLASH_CHECK(page >= 0 && page < config_.n_pages);
  return refcount_[static_cast<size_t>(page)];
}

int32_t KvPagePool::take_page() {
  SPLASH_CHECK(!free_.empty());
  const int32_t page = free_.back();
  free_.pop_back();
  refcount_[static_cast<size_t>(page)] = 1;
  return page;
}

void KvPagePool::drop_page(int32_t page) {
  int32_t& rc = refcount_[static_cast<size_t>(page)];
  SPLASH_CHECK(rc > 0);
  if (--rc == 0) free_.push_back(page);
}

Status KvPagePool::make_last_page_private(KvPageTable& table) {
  if (table.pages.empty()) return {};
  const int32_t last = table.pages.back();
  if (refcount(last) <= 1) return {};
  if (free_.empty()) {
    return make_error("kv cache full: no free page to copy a shared page (", config_.n_pages, " pages in use)");
  }
  const int32_t copy = take_page();
  std::memcpy(raw_page(copy), raw_page(last), static_cast<size_t>(geo_.page_bytes()));
  drop_page(last);
  table.pages.back() = copy;
  return {};
}

Status KvPagePool::append(KvPageTable& table, int64_t n_new) {
  SPLASH_CHECK(n_new >= 0);
  SPLASH_CHECK(static_cast<int64_t>(table.pages.size()) == (table.n_tokens + kKvPageTokens - 1) / kKvPageTokens);
  if (n_new == 0) return {};
  const int64_t have = static_cast<int64_t>(table.pages.size());
  const int64_t need = (table.n_tokens + n_new + kKvPageTokens - 1) / kKvPageTokens;
  const bool cow = table.n_tokens % kKvPageTokens != 0 && refcount(table.pages.back()) > 1;
  const int64_t want = need - have + (cow ? 1 : 0);
  if (want > kv_pages_free()) {
    return make_error("kv cache full: ", n_new, " more tokens need ", want, " pages, ", kv_pages_free(),
                      " of ", config_.n_pages, " free");
  }
  if (cow) SPLASH_TRY_STATUS(make_last_page_private(table));
  for (int64_t i = have; i < need; ++i) table.pages.push_back(take_page());
  table.n_tokens += n_new;
  return {};
}

void KvPagePool::write(const KvPageTable& table, int il, int64_t pos0, int64_t n, const float* k, const float* v) {
  SPLASH_CHECK(il >= 0 && il < config_.n_layer);
  SPLASH_CHECK(pos0 >= 0 && n >= 0 && pos0 + n <= table.n_tokens);
  const int64_t row = int64_t{config_.n_kv_head} * config_.head_dim;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t pos = pos0 + i;
    const int32_t page = table.pages[static_cast<size_t>(pos / kKvPageTokens)];
    SPLASH_CHECK_MSG(refcount(page) == 1, "kv cache: write into a shared page (missing append / copy-on-write)");
    uint8_t* base = raw_page(page);
    const int slot = static_cast<int>(pos % kKvPageTokens);
    kv_store_row(geo_, base + geo_.k_offset(il), slot, k + i * row);
    kv_store_row(geo_, base + geo_.v_offset(il), slot, v + i * row);
  }
}

void KvPagePool::truncate(KvPageTable& table, int64_t n_tokens) {
  SPLASH_CHECK(n_tokens >= 0);
  if (n_tokens >= table.n_tokens) return;
  const size_t keep = static_cast<size_t>((n_tokens + kKvPageTokens - 1) / kKvPageTokens);
  while (table.pages.size() > keep) {
    drop_page(table.pages.back());
    table.pages.pop_back();
  }
  table.n_tokens = n_tokens;
}

KvPageTable KvPagePool::share_prefix(const KvPageTable& src, int64_t n_tokens) {
  SPLASH_CHECK(n_tokens >= 0 && n_tokens <= src.n_tokens);
  KvPageTable t;
  const size_t n_pages = static_cast<size_t>((n_tokens + kKvPageTokens - 1) / kKvPageTokens);
  t.pages.assign(src.pages.begin(), src.pages.begin() + static_cast<std::ptrdiff_t>(n_pages));
  for (int32_t page : t.pages) ++refcount_[static_cast<size_t>(page)];
  t.n_tokens = n_tokens;
  return t;
}

void KvPagePool::retain_page(int32_t page) {
  SPLASH_CHECK(refcount(page) > 0);
  ++refcount_[static_cast<size_t>(page)];
}

void KvPagePool::release_page(int32_t page) {
  SPLASH_CHECK(page >= 0 && page < config_.n_pages);
  drop_page(page);
}

void KvPagePool::copy_page(int32_t dst, int32_t src) {
  SPLASH_CHECK(refcount(src) > 0);
  SPLASH_CHECK_MSG(refcount(dst) == 1, "kv cache: copy into a shared or free page");
  std::memcpy(raw_page(dst), raw_page(src), static_cast<size_t>(geo_.page_bytes()));
}

const uint8_t* KvPagePool::page_data(int32_t page) const {
  SPLASH_CHECK(page >= 0 && page < config_.n_pages);
  return memory_.data() + page * geo_.page_bytes();
}

uint8_t* KvPagePool::page_data_mut(int32_t page) {
  SPLASH_CHECK_MSG(refcount(page) == 1, "kv cache: write into a shared or free page");
  return raw_page(page);
}

PagedKvView KvPagePool::view(const KvPageTable& table, int il) const {
  SPLASH_CHECK(il >= 0 && il < config_.n_layer);
  PagedKvView v;
  v.geo = geo_;
  v.layer = il;
  v.n_tokens = table.n_tokens;
  v.pool = memory_.data();
  v.pages = table.pages.data();
  return v;
}

}  // namespace splash
