// PrefixCache::prefetch: restores from the disk tier off the engine thread (spec 5.4). The engine
// calls prefetch() for the lane whose prompt runs next until it returns true, then lookup() without
// disk reads; meanwhile other lanes decode. Each batch (BlockStore::read_async) is read by the
// store's reader thread and indexed here, on the engine thread, when it has arrived.
#include <algorithm>
#include <cstring>

#include "cache/prefix_cache.h"
#include "core/check.h"

namespace splash {

void PrefixCache::release_prefetch() {
  for (int32_t page : prefetch_.held) pool_.release_page(page);
  prefetch_.held.clear();
  prefetch_.states.clear();
}

void PrefixCache::apply_prefetch(BlockStore::ReadResults& results) {
  const size_t n = std::min(results.size(), prefetch_.asked.size());
  for (size_t i = 0; i < n; ++i) {
    const BlockInfo& info = prefetch_.asked[i];
    const std::span<const int32_t> block(prefetch_.asked_tokens[i]);
    auto fail = [&] {
      prefetch_.stop = info.key;  // the match ends before it; a later prefetch does not ask again
      prefetch_.has_stop = true;
    };
    if (!results[i].ok()) {
      fail();
      break;
    }
    const std::vector<uint8_t>& bytes = *results[i];
    if (info.kind == BlockKind::kState) {
      if (static_cast<int64_t>(bytes.size()) != options_.recurrent_floats * int64_t{sizeof(float)}) {
        fail();
        break;
      }
      std::vector<float>& state = prefetch_.states[info.key];
      state.resize(static_cast<size_t>(options_.recurrent_floats));
      std::memcpy(state.data(), bytes.data(), bytes.size());
      continue;
    }
    if (index_.contains(info.key)) continue;  // indexed meanwhile (published by a lane)
    // The chain grows from an indexed parent only (the previous one of this batch, or the match);
    // a page: the pool may be full of pages in use. Either way the match ends here.
    const int32_t page = (info.parent == root_ || index_.contains(info.parent)) &&
                                 static_cast<int64_t>(bytes.size()) == pool_.page_bytes()
                             ? take_page()
                             : -1;
    if (page < 0) {
      fail();
      break;
    }
    std::memcpy(pool_.page_data_mut(page), bytes.data(), bytes.size());
    Entry& e = insert(info.key, info.parent, info.n_tokens / kKvPageTokens, page, block);
    e.prefetched = true;
    pool_.retain_page(page);  // the lease: not evicted before the lookup
    prefetch_.held.push_back(page);
    ++stats_.disk_hits;
  }
}

bool PrefixCache::prefetch(std::span<const int32_t> tokens, int64_t limit) {
  SPLASH_CHECK(limit >= 0 && limit <= static_cast<int64_t>(tokens.size()));
  if (options_.disk == nullptr) return true;
  BlockStore& disk = *options_.disk;
  if (prefetch_.ticket != 0) {
    std::optional<BlockStore::ReadResults> results = disk.take_reads(prefetch_.ticket);
    if (!results) return false;  // in flight
    prefetch_.ticket = 0;
    apply_prefetch(*results);
    prefetch_.asked.clear();
    prefetch_.asked_tokens.clear();
  }
  // The chain of the tokens and how much of it the index holds.
  const int64_t n_blocks = limit / kKvPageTokens;
  std::vector<BlockKey> keys;
  keys.reserve(static_cast<size_t>(n_blocks));
  BlockKey parent = root_;
  for (int64_t i = 0; i < n_blocks; ++i) {
    parent = chain_block_key(parent, tokens.subspan(static_cast<size_t>(i * kKvPageTokens), kKvPageTokens));
    keys.push_back(parent);
  }
  const BlockKey tip = n_blocks > 0 ? keys.back() : root_;
  if (!(tip == prefetch_.tip)) {
    release_prefetch();  // another request's: its lookup is not coming
    prefetch_.tip = tip;
    prefetch_.has_stop = false;
  }
  int64_t depth = 0;
  for (; depth < n_blocks; ++depth) {
    auto it = index_.find(keys[static_cast<size_t>(depth)]);
    if (it == index_.end()) break;
    if (!same_tokens(it->second, tokens.subspan(static_cast<size_t>(depth * kKvPageTokens), kKvPageTokens)))
      return true;  // a collision: lookup stops here anyway
  }
  // The next batch of KV blocks only the disk holds, root first.
  std::vector<BlockStore::ReadRequest> requests;
  int64_t bytes = 0;
  for (int64_t i = depth; i < n_blocks && bytes < options_.prefetch_batch_bytes; ++i) {
    const BlockKey& key = keys[static_cast<size_t>(i)];
    if ((prefetch_.has_stop && key == prefetch_.stop) || !disk.contains(key, BlockKind::kKvPage)) break;
    const auto block = tokens.subspan(static_cast<size_t>(i * kKvPageTokens), kKvPageTokens);
    requests.push_back({key, BlockKind::kKvPage, std::vector<int32_t>(block.begin(), block.end())});
    prefetch_.asked.push_back({key, i == 0 ? root_ : keys[static_cast<size_t>(i - 1)], BlockKind::kKvPage,
                               (i + 1) * kKvPageTokens});
    std::copy(block.begin(), block.end(), prefetch_.asked_tokens.emplace_back().begin());
    bytes += pool_.page_bytes();
  }
  // Hybrids, once the KV is in: the deepest checkpoint along the match, when only the disk has it.
  if (requests.empty() && has_checkpoint_group()) {
    for (int64_t d = depth; d > 0; --d) {
      const BlockKey& key = keys[static_cast<size_t>(d - 1)];
      if (checkpoints_.contains(key) || prefetch_.states.contains(key)) break;
      if (prefetch_.has_stop && key == prefetch_.stop) break;
      if (!disk.contains(key, BlockKind::kState)) continue;
      const Entry& e = index_.at(key);
      requests.push_back({key, BlockKind::kState, std::vector<int32_t>(e.tokens.begin(), e.tokens.end())});
      prefetch_.asked.push_back({key, e.parent, BlockKind::kState, d * kKvPageTokens});
      prefetch_.asked_tokens.push_back(e.tokens);
      break;
    }
  }
  if (requests.empty()) return true;
  // The lease: the blocks matched so far stay while the batch is read (an eviction for the batch's
  // pages would otherwise take the least recently used leaf: the end of this very chain).
  for (int32_t page : prefetch_.held) pool_.release_page(page);
  prefetch_.held.clear();
  for (int64_t i = 0; i < depth; ++i) {
    const int32_t page = index_.at(keys[static_cast<size_t>(i)]).page;
    pool_.retain_page(page);
    prefetch_.held.push_back(page);
  }
  prefetch_.ticket = disk.read_async(std::move(requests));
  ++stats_.disk_read_batches;
  return false;
}

}  // namespace splash
