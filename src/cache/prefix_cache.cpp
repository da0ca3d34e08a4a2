#include "cache/prefix_cache.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "core/check.h"
#include "core/result.h"
#include "core/version.h"

namespace splash {

namespace {
// Bumped when the meaning of cached bytes or keys changes (never reused).
constexpr int kCacheFormatVersion = 1;
}  // namespace

std::string make_cache_namespace(std::string_view architecture, std::string_view dims, std::string_view weights_identity,
                                 const KvCacheConfig& kv) {
  return str_cat("splash-prefix-cache/v", kCacheFormatVersion, "|arch=", architecture, "|dims=", dims,
                 "|weights=", weights_identity, "|kv=", kv_format_name(kv.format), ",layers=", kv.n_layer,
                 ",heads=", kv.n_kv_head, ",head_dim=", kv.head_dim, ",page=", kKvPageTokens, "|build=", kVersion);
}

PrefixCache::PrefixCache(KvPagePool& pool, PrefixCacheOptions options)
    : pool_(pool), options_(std::move(options)), root_(namespace_key(options_.namespace_description)) {
  SPLASH_CHECK(options_.checkpoint_interval > 0 && options_.checkpoint_interval % kKvPageTokens == 0);
  SPLASH_CHECK(options_.recurrent_floats >= 0 && options_.checkpoint_spacing >= 0);
}

PrefixCache::~PrefixCache() {
  release_prefetch();
  if (prefetch_.ticket != 0 && options_.disk != nullptr) {
    while (!options_.disk->take_reads(prefetch_.ticket)) std::this_thread::yield();  // its buffers
  }
  for (auto& [key, e] : index_) pool_.release_page(e.page);
  if (options_.disk != nullptr) options_.disk->clear_resident();
}

bool PrefixCache::same_tokens(const Entry& e, std::span<const int32_t> block) {
  return block.size() == e.tokens.size() && std::equal(block.begin(), block.end(), e.tokens.begin());
}

std::vector<BlockKey>& PrefixCache::children_of(const BlockKey& parent) {
  if (parent == root_) return root_children_;
  auto it = index_.find(parent);
  SPLASH_CHECK_MSG(it != index_.end(), "prefix cache: a block's parent is not indexed");
  return it->second.children;
}

void PrefixCache::extend_chain(std::span<const int32_t> tokens, int64_t n_blocks, BlockChain& chain) {
  SPLASH_CHECK(n_blocks * kKvPageTokens <= static_cast<int64_t>(tokens.size()));
  while (static_cast<int64_t>(chain.keys.size()) < n_blocks) {
    const size_t i = chain.keys.size();
    const BlockKey parent = i == 0 ? root_ : chain.keys[i - 1];
    chain.keys.push_back(chain_block_key(parent, tokens.subspan(i * kKvPageTokens, kKvPageTokens)));
    ++stats_.probe_hashed_blocks;
  }
}

PrefixCache::Entry& PrefixCache::insert(const BlockKey& key, const BlockKey& parent, int64_t depth, int32_t page,
                                        std::span<const int32_t> block) {
  children_of(parent).push_back(key);
  Entry& e = index_[key];
  e.parent = parent;
  e.page = page;
  e.depth = depth;
  e.last_use = ++clock_;
  std::copy(block.begin(), block.end(), e.tokens.begin());
  ++stats_.kv_pages;
  if (options_.disk != nullptr) options_.disk->set_resident(key, BlockKind::kKvPage, true);
  return e;
}

void PrefixCache::drop_entry(Index::iterator it) {
  const BlockKey key = it->first;
  Entry& e = it->second;
  SPLASH_CHECK(e.children.empty());
  // From here the disk copy (if any) is the only one: it is no longer redundant.
  if (options_.disk != nullptr) options_.disk->set_resident(key, BlockKind::kKvPage, false);
  if (options_.disk != nullptr && !options_.disk->contains(key, BlockKind::kKvPage)) {
    const BlockInfo info{key, e.parent, BlockKind::kKvPage, e.depth * kKvPageTokens};
    const bool ok = options_.disk->put(info, e.tokens,
                                       {pool_.page_data(e.page), static_cast<size_t>(pool_.page_bytes())});
    ++(ok ? stats_.disk_offloads : stats_.offload_failures);
  } else {
    refresh_on_disk(key, e);  // stored long ago: a fresh copy, or it leaves the disk soon after RAM
  }
  // A checkpoint at this block is unreachable without its page: it goes too (to disk first).
  if (checkpoints_.contains(key)) drop_checkpoint(key, true);
  std::vector<BlockKey>& siblings = children_of(e.parent);
  siblings.erase(std::find(siblings.begin(), siblings.end(), key));
  pool_.release_page(e.page);
  index_.erase(it);
  --stats_.kv_pages;
}

int64_t PrefixCache::evict(int64_t n_pages) {
  if (n_pages <= 0) return 0;
  // Min-heap on last use over the evictable leaves; a parent joins when its last child leaves.
  using Item = std::pair<uint64_t, BlockKey>;
  auto later = [](const Item& a, const Item& b) { return a.first > b.first; };
  std::vector<Item> heap;
  for (const auto& [key, e] : index_)
    if (e.children.empty() && pool_.refcount(e.page) == 1) heap.emplace_back(e.last_use, key);
  std::make_heap(heap.begin(), heap.end(), later);
  int64_t freed = 0;
  while (freed < n_pages && !heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const BlockKey key = heap.back().second;
    heap.pop_back();
    auto it = index_.find(key);
    SPLASH_CHECK(it != index_.end());
    const BlockKey parent = it->second.parent;
    drop_entry(it);
    ++freed;
    ++stats_.kv_evictions;
    if (parent == root_) continue;
    auto p = index_.find(parent);
    if (p != index_.end() && p->second.children.empty() && pool_.refcount(p->second.page) == 1) {
      heap.emplace_back(p->second.last_use, parent);
      std::push_heap(heap.begin(), heap.end(), later);
    }
  }
  return freed;
}

bool PrefixCache::tamper_tokens_for_test(const BlockKey& key, int index, int32_t value) {
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  it->second.tokens.at(static_cast<size_t>(index)) = value;
  return true;
}

int64_t PrefixCache::pages_exclusive() const {
  int64_t n = 0;
  for (const auto& [key, e] : index_) n += pool_.refcount(e.page) == 1;
  return n;
}

void PrefixCache::refresh_on_disk(const BlockKey& key, const Entry& e) {
  if (options_.disk == nullptr) return;
  const BlockInfo info{key, e.parent, BlockKind::kKvPage, e.depth * kKvPageTokens};
  if (options_.disk->refresh(info, e.tokens, {pool_.page_data(e.page), static_cast<size_t>(pool_.page_bytes())}))
    ++stats_.disk_refreshes;
}

void PrefixCache::refresh_state_on_disk(const BlockKey& key, std::span<const float> state) {
  if (options_.disk == nullptr) return;
  auto e = index_.find(key);
  if (e == index_.end()) return;
  const BlockInfo info{key, e->second.parent, BlockKind::kState, e->second.depth * kKvPageTokens};
  if (options_.disk->refresh(info, e->second.tokens,
                             {reinterpret_cast<const uint8_t*>(state.data()), state.size_bytes()}))
    ++stats_.disk_refreshes;
}

int32_t PrefixCache::take_page() {
  int32_t page = pool_.allocate_page();
  if (page < 0 && evict(1) == 1) page = pool_.allocate_page();
  return page;
}

bool PrefixCache::promote_from_disk(const BlockKey& key, const BlockKey& parent, int64_t depth,
                                    std::span<const int32_t> block) {
  if (options_.disk == nullptr || !options_.disk->contains(key, BlockKind::kKvPage)) return false;
  auto bytes = options_.disk->get(key, BlockKind::kKvPage, block);
  if (!bytes.ok() || static_cast<int64_t>(bytes->size()) != pool_.page_bytes()) return false;
  const int32_t page = take_page();
  if (page < 0) return false;
  std::memcpy(pool_.page_data_mut(page), bytes->data(), bytes->size());
  insert(key, parent, depth, page, block);
  ++stats_.disk_hits;
  return true;
}

PrefixMatch PrefixCache::lookup(std::span<const int32_t> tokens, int64_t limit, bool read_disk) {
  SPLASH_CHECK(limit >= 0 && limit <= static_cast<int64_t>(tokens.size()));
  ++stats_.lookups;
  PrefixMatch m;
  std::vector<BlockKey> keys;
  BlockKey parent = root_;
  // --- whole blocks: index first, then the disk tier
  for (int64_t i = 0; (i + 1) * kKvPageTokens <= limit; ++i) {
    const auto block = tokens.subspan(static_cast<size_t>(i * kKvPageTokens), kKvPageTokens);
    const BlockKey key = chain_block_key(parent, block);
    ++stats_.probe_hashed_blocks;
    auto it = index_.find(key);
    bool from_disk = false;
    if (it == index_.end()) {
      if (!read_disk || !promote_from_disk(key, parent, i + 1, block)) break;
      it = index_.find(key);
      from_disk = true;
    } else if (!same_tokens(it->second, block)) {
      ++stats_.collisions;
      break;
    }
    if (it->second.prefetched) {  // read back by prefetch() for this lookup
      it->second.prefetched = false;
      from_disk = true;
    }
    it->second.last_use = ++clock_;
    pool_.retain_page(it->second.page);
    m.kv.pages.push_back(it->second.page);
    m.kv.n_tokens += kKvPageTokens;
    if (from_disk) m.disk_tokens += kKvPageTokens;
    keys.push_back(key);
    parent = key;
  }
  if (has_checkpoint_group()) {
    // Recurrent state exists only at checkpoints: resume from the deepest one at or below the match.
    const int64_t depth = find_checkpoint(keys, static_cast<int64_t>(keys.size()), m.recurrent, read_disk);
    m.disk_tokens = std::min(m.disk_tokens, depth * kKvPageTokens);
    if (depth == 0 && !keys.empty()) ++stats_.lost_state_misses;
    if (depth > 0) ++stats_.checkpoint_hits;
    pool_.truncate(m.kv, depth * kKvPageTokens);
  } else {
    // --- the partial next page: the cached child sharing the longest run of tokens, copied
    const int64_t base = m.kv.n_tokens;
    const int64_t room = std::min<int64_t>(limit - base, kKvPageTokens - 1);
    if (room > 0) {
      const std::vector<BlockKey>& children = parent == root_ ? root_children_ : index_.at(parent).children;
      const int32_t* want = tokens.data() + base;
      int64_t best_len = 0;
      BlockKey best_key;
      int32_t src = -1;
      for (const BlockKey& c : children) {
        const Entry& e = index_.at(c);
        int64_t n = 0;
        while (n < room && e.tokens[static_cast<size_t>(n)] == want[n]) ++n;
        if (n > best_len) best_len = n, best_key = c, src = e.page;
      }
      if (src >= 0) {
        pool_.retain_page(src);  // the copy's source must survive take_page's eviction
        const int32_t page = take_page();
        if (page >= 0) {
          pool_.copy_page(page, src);
          m.kv.pages.push_back(page);
          m.kv.n_tokens += best_len;
          ++stats_.partial_page_copies;
          auto it = index_.find(best_key);
          if (it != index_.end()) it->second.last_use = ++clock_;
        }
        pool_.release_page(src);
      }
    }
  }
  m.n_tokens = m.kv.n_tokens;
  release_prefetch();  // the match holds its own references now
  if (m.n_tokens > 0) {
    ++stats_.hits;
    stats_.reused_tokens += m.n_tokens;
    stats_.kv_disk_hit_tokens += m.disk_tokens;
    stats_.kv_hit_tokens += m.n_tokens - m.disk_tokens;
  } else {
    ++stats_.cold_misses;
  }
  return m;
}

void PrefixCache::publish(std::span<const int32_t> tokens, const KvPageTable& table, BlockChain& chain) {
  SPLASH_CHECK(table.n_tokens <= static_cast<int64_t>(tokens.size()));
  const int64_t n_blocks = table.n_tokens / kKvPageTokens;
  extend_chain(tokens, n_blocks, chain);
  for (int64_t i = 0; i < n_blocks; ++i) {
    const BlockKey& key = chain.keys[static_cast<size_t>(i)];
    const auto block = tokens.subspan(static_cast<size_t>(i * kKvPageTokens), kKvPageTokens);
    auto it = index_.find(key);
    if (it != index_.end()) {
      if (!same_tokens(it->second, block)) {
        // Another prefix owns this key: nothing deeper may chain off it.
        ++stats_.collisions;
        return;
      }
      it->second.last_use = ++clock_;
      // A lane that recomputed a cached block (a hybrid resumes from a checkpoint below its KV match)
      // holds a second copy of it: the index takes the lane's page and frees its own, unless someone
      // else reads it. Otherwise the duplicates pin the cached chain (its children are the lane's
      // pages) and a long second conversation can run out of pages.
      const int32_t page = table.pages[static_cast<size_t>(i)];
      if (page != it->second.page && pool_.refcount(it->second.page) == 1) {
        pool_.retain_page(page);
        pool_.release_page(it->second.page);
        it->second.page = page;
        ++stats_.kv_page_swaps;
      }
      continue;
    }
    const int32_t page = table.pages[static_cast<size_t>(i)];
    pool_.retain_page(page);
    insert(key, i == 0 ? root_ : chain.keys[static_cast<size_t>(i - 1)], i + 1, page, block);
    ++stats_.kv_publications;
  }
}

// --- checkpoints -------------------------------------------------------------------------------------

int64_t PrefixCache::next_checkpoint(int64_t resumed_at, int64_t kv_len, int64_t n_prompt) const {
  if (!has_checkpoint_group()) return 0;
  const int64_t replay = (n_prompt - 1) / kKvPageTokens * kKvPageTokens;  // last whole page before the end
  const int64_t step = options_.checkpoint_interval;
  for (int64_t b = (kv_len / step + 1) * step; b < replay; b += step)
    if (b - resumed_at >= options_.checkpoint_spacing && replay - b >= options_.checkpoint_spacing) return b;
  return replay > kv_len ? replay : 0;
}

void PrefixCache::publish_checkpoint(std::span<const int32_t> tokens, int64_t n_tokens, std::span<const float> state,
                                     BlockChain& chain, bool rolling) {
  SPLASH_CHECK(has_checkpoint_group());
  SPLASH_CHECK(n_tokens > 0 && n_tokens % kKvPageTokens == 0 && n_tokens <= static_cast<int64_t>(tokens.size()));
  SPLASH_CHECK_MSG(static_cast<int64_t>(state.size()) == options_.recurrent_floats,
                   "prefix cache: checkpoint of the wrong size");
  const int64_t depth = n_tokens / kKvPageTokens;
  extend_chain(tokens, depth, chain);
  const BlockKey key = chain.keys[static_cast<size_t>(depth - 1)];
  if (!index_.contains(key)) return;  // its page is not cached (collision or not published): useless
  if (rolling && chain.has_rolling && !(chain.last_rolling == key)) {
    auto old = checkpoints_.find(chain.last_rolling);
    if (old != checkpoints_.end() && old->second.rolling) drop_checkpoint(chain.last_rolling, false);
  }
  auto [it, added] = checkpoints_.try_emplace(key);
  Checkpoint& c = it->second;
  if (added) {
    if (options_.disk != nullptr) options_.disk->set_resident(key, BlockKind::kState, true);
    c.state.assign(state.begin(), state.end());
    c.rolling = rolling;
    stats_.checkpoint_bytes += static_cast<int64_t>(c.state.size() * sizeof(float));
    ++stats_.checkpoints;
    ++(rolling ? stats_.checkpoint_publications : stats_.replay_publications);
  } else if (!rolling) {
    c.rolling = false;  // a replay point is never retired as someone's rolling checkpoint
  }
  c.last_use = ++clock_;
  if (rolling) {
    chain.last_rolling = key;
    chain.has_rolling = true;
  }
  enforce_checkpoint_budget();
}

void PrefixCache::drop_checkpoint(const BlockKey& key, bool to_disk) {
  auto it = checkpoints_.find(key);
  if (it == checkpoints_.end()) return;
  const std::vector<float>& s = it->second.state;
  if (options_.disk != nullptr) options_.disk->set_resident(key, BlockKind::kState, false);
  if (to_disk && options_.disk != nullptr && !options_.disk->contains(key, BlockKind::kState)) {
    auto e = index_.find(key);
    if (e != index_.end()) {
      const BlockInfo info{key, e->second.parent, BlockKind::kState, e->second.depth * kKvPageTokens};
      const bool ok = options_.disk->put(
          info, e->second.tokens, {reinterpret_cast<const uint8_t*>(s.data()), s.size() * sizeof(float)});
      ++(ok ? stats_.disk_offloads : stats_.offload_failures);
    }
  } else if (to_disk) {
    refresh_state_on_disk(key, s);
  }
  stats_.checkpoint_bytes -= static_cast<int64_t>(s.size() * sizeof(float));
  --stats_.checkpoints;
  checkpoints_.erase(it);
}

void PrefixCache::enforce_checkpoint_budget() {
  while (stats_.checkpoint_bytes > options_.max_checkpoint_bytes && !checkpoints_.empty()) {
    auto victim = std::min_element(checkpoints_.begin(), checkpoints_.end(),
                                   [](const auto& a, const auto& b) { return a.second.last_use < b.second.last_use; });
    drop_checkpoint(victim->first, true);
    ++stats_.checkpoint_evictions;
  }
}

int64_t PrefixCache::find_checkpoint(const std::vector<BlockKey>& keys, int64_t max_depth, std::vector<float>& out,
                                     bool read_disk) {
  out.clear();
  for (int64_t d = max_depth; d > 0; --d) {
    const BlockKey& key = keys[static_cast<size_t>(d - 1)];
    if (auto it = checkpoints_.find(key); it != checkpoints_.end()) {
      it->second.last_use = ++clock_;
      out = it->second.state;
      return d;
    }
    if (auto it = prefetch_.states.find(key); it != prefetch_.states.end()) {
      out = std::move(it->second);
      prefetch_.states.erase(it);
      ++stats_.disk_hits;
      return d;
    }
    if (read_disk && options_.disk != nullptr && options_.disk->contains(key, BlockKind::kState)) {
      const Entry& e = index_.at(key);
      auto bytes = options_.disk->get(key, BlockKind::kState, e.tokens);
      if (bytes.ok() && static_cast<int64_t>(bytes->size()) == options_.recurrent_floats * int64_t{sizeof(float)}) {
        out.resize(static_cast<size_t>(options_.recurrent_floats));
        std::memcpy(out.data(), bytes->data(), bytes->size());
        ++stats_.disk_hits;
        return d;
      }
    }
  }
  return 0;
}

}  // namespace splash
