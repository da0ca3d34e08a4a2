// PrefixCache writes to the disk tier other than eviction (spec 5.6): write-behind, with a
// persistent disk tier, hands each conversation's newest restore point (its published chain; on
// hybrids the checkpoint there with it) to the store a delay after publication, so that a restart
// after kill -9 takes back what was published before; the clean stop's flush, newest first.
#include <algorithm>
#include <unordered_set>
#include <vector>

#include "cache/prefix_cache.h"
#include "core/check.h"

namespace splash {

void PrefixCache::note_restore_point(const BlockChain& chain, int64_t n_tokens, Clock::time_point now) {
  if (!writes_behind() || n_tokens < std::max<int64_t>(options_.write_behind_min_tokens, kKvPageTokens)) return;
  const int64_t depth = n_tokens / kKvPageTokens;
  SPLASH_CHECK(static_cast<int64_t>(chain.keys.size()) >= depth);
  const BlockKey& key = chain.keys[static_cast<size_t>(depth - 1)];
  if (!index_.contains(key)) return;  // not published (a collision): nothing to restore from
  // A shorter prefix of this chain waiting to be written is the same conversation's older point.
  Clock::time_point first = now;
  for (int64_t d = 0; d + 1 < depth && !points_.empty(); ++d) {
    auto it = points_.find(chain.keys[static_cast<size_t>(d)]);
    if (it == points_.end() || it->second.flushing) continue;
    first = std::min(first, it->second.first);
    points_.erase(it);
    ++stats_.write_behind_superseded;
    --stats_.write_behind_waiting;
  }
  auto [it, added] = points_.try_emplace(key);
  if (!added) return;
  // Due the delay after its publication; but a conversation that keeps superseding its point (a
  // long generation publishes every 32 tokens) is written at the latest 3 delays after its first
  // unwritten point, so it is not left out until it ends.
  it->second.first = first;
  it->second.due = std::min(now + options_.write_behind_delay, first + 3 * options_.write_behind_delay);
  next_due_ = std::min(next_due_, it->second.due);
  ++stats_.write_behind_waiting;
}

bool PrefixCache::offer_point(const BlockKey& key, RestorePoint& p, int64_t& budget) {
  BlockStore& disk = *options_.disk;
  // The chain from the root: blocks evicted meanwhile went to disk then; the walk stops there.
  std::vector<BlockKey> path;
  for (BlockKey k = key; !(k == root_);) {
    auto it = index_.find(k);
    if (it == index_.end()) break;
    path.push_back(k);
    k = it->second.parent;
  }
  std::reverse(path.begin(), path.end());
  const int64_t page_bytes = pool_.page_bytes();
  for (int64_t i = p.offered; i < static_cast<int64_t>(path.size()); ++i) {
    // The store's queue is bounded: never more than one step of write-behind waits in it.
    const uint64_t backlog = disk.queued_puts() - disk.finished_puts();
    if (budget <= 0 || static_cast<int64_t>(backlog) * page_bytes >= options_.write_behind_step_bytes) return false;
    const BlockKey& k = path[static_cast<size_t>(i)];
    const Entry& e = index_.at(k);
    const BlockInfo info{k, e.parent, BlockKind::kKvPage, e.depth * kKvPageTokens};
    const std::span<const uint8_t> bytes(pool_.page_data(e.page), static_cast<size_t>(page_bytes));
    // Absent, or stored long ago (the store rewrites old copies): queued. A copy of a block RAM holds
    // yields when the quota holds only sole copies, and pauses above the store's hourly write limit.
    const uint64_t queued = disk.queued_puts();
    if (!disk.put(info, e.tokens, bytes)) {
      if (backlog > 0) return false;  // the queue is full of other blocks: later
      p.refused = true;               // disabled, too large, yielded: this point does not get whole now
      return true;
    }
    if (disk.queued_puts() != queued) {
      ++stats_.write_behind_blocks;
      budget -= page_bytes;
    }
    p.offered = i + 1;
  }
  if (!p.state_offered) {
    auto c = checkpoints_.find(key);
    auto e = index_.find(key);
    if (c != checkpoints_.end() && e != index_.end()) {
      const std::vector<float>& s = c->second.state;
      const BlockInfo info{key, e->second.parent, BlockKind::kState, e->second.depth * kKvPageTokens};
      const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(s.data()), s.size() * sizeof(float));
      const uint64_t queued = disk.queued_puts();
      if (disk.put(info, e->second.tokens, bytes) && disk.queued_puts() != queued) ++stats_.write_behind_blocks;
    }
    p.state_offered = true;
  }
  return true;
}

PrefixCache::Clock::time_point PrefixCache::write_behind(Clock::time_point now) {
  if (points_.empty() || !writes_behind()) return Clock::time_point::max();
  if (now < next_due_) return next_due_;
  BlockStore& disk = *options_.disk;
  // Due points, oldest first.
  std::vector<std::pair<Clock::time_point, BlockKey>> due;
  for (const auto& [key, p] : points_)
    if (p.due <= now) due.emplace_back(p.due, key);
  std::sort(due.begin(), due.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  int64_t budget = options_.write_behind_step_bytes;
  bool blocked = false;
  for (const auto& [when, key] : due) {
    RestorePoint& p = points_.at(key);
    if (p.flushing) continue;
    if (!index_.contains(key)) {
      // Evicted from RAM meanwhile: its blocks went to the disk tier (or were refused) by eviction.
      points_.erase(key);
      ++stats_.write_behind_refused;
      --stats_.write_behind_waiting;
      continue;
    }
    if (!offer_point(key, p, budget)) {
      blocked = true;
      break;
    }
    p.flushing = true;
    p.ticket = disk.queued_puts();
  }
  // Points offered whole are durable once the writer has finished everything queued before them.
  const uint64_t finished = disk.finished_puts();
  next_due_ = Clock::time_point::max();
  for (auto it = points_.begin(); it != points_.end();) {
    RestorePoint& p = it->second;
    if (p.flushing && finished >= p.ticket) {
      const bool ok = !p.refused && disk.contains(it->first, BlockKind::kKvPage);
      ++(ok ? stats_.write_behind_durable : stats_.write_behind_refused);
      --stats_.write_behind_waiting;
      it = points_.erase(it);
      continue;
    }
    // Offered or blocked: look again soon (the writer drains the queue); else at its due time.
    const Clock::time_point next = p.flushing || (blocked && p.due <= now) ? now + std::chrono::milliseconds(20) : p.due;
    next_due_ = std::min(next_due_, next);
    ++it;
  }
  return next_due_;
}

// --- clean stop -------------------------------------------------------------------------------------

int64_t PrefixCache::flush_to_disk(Clock::time_point deadline, int64_t max_records) {
  if (options_.disk == nullptr) return 0;
  BlockStore& disk = *options_.disk;
  // RAM is going away: its blocks' disk copies are no longer second copies, and what it writes now
  // may displace old sole copies like any eviction would.
  disk.clear_resident();
  // Conversations, newest first: the leaves of the prefix tree by their last use.
  std::vector<std::pair<uint64_t, BlockKey>> leaves;
  for (const auto& [key, e] : index_)
    if (e.children.empty()) leaves.emplace_back(e.last_use, key);
  std::sort(leaves.begin(), leaves.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  int64_t queued = 0, step = 0;
  bool refused = false;
  // One record: absent or stored long ago -> queued (the bounded queue full: wait for the writer, once).
  auto offer = [&](const BlockInfo& info, std::span<const int32_t> tokens, std::span<const uint8_t> bytes) {
    const uint64_t before = disk.queued_puts();
    bool ok = disk.put(info, tokens, bytes);
    if (!ok) {
      disk.flush();
      ok = disk.put(info, tokens, bytes);
    }
    refused = !ok;  // disabled or too large: nothing more is worth trying
    if (!ok || disk.queued_puts() == before) return;
    ++queued;
    step += static_cast<int64_t>(bytes.size());
    if (step >= options_.write_behind_step_bytes) {
      disk.flush();
      step = 0;
    }
  };
  std::unordered_set<BlockKey, BlockKeyHash> done;  // blocks handled (with everything above them)
  std::vector<BlockKey> path;
  for (const auto& [use, leaf] : leaves) {
    path.clear();
    for (BlockKey k = leaf; !(k == root_) && !done.contains(k); k = index_.at(k).parent) path.push_back(k);
    for (auto k = path.rbegin(); k != path.rend(); ++k) {
      if (refused || queued >= max_records || Clock::now() >= deadline) return queued;
      const Entry& e = index_.at(*k);
      offer(BlockInfo{*k, e.parent, BlockKind::kKvPage, e.depth * kKvPageTokens}, e.tokens,
            {pool_.page_data(e.page), static_cast<size_t>(pool_.page_bytes())});
      if (auto c = checkpoints_.find(*k); c != checkpoints_.end() && !refused && queued < max_records) {
        const std::vector<float>& s = c->second.state;
        offer(BlockInfo{*k, e.parent, BlockKind::kState, e.depth * kKvPageTokens}, e.tokens,
              {reinterpret_cast<const uint8_t*>(s.data()), s.size() * sizeof(float)});
      }
      done.insert(*k);
    }
  }
  return queued;
}

}  // namespace splash
