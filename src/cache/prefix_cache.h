// The prefix cache's RAM tier (spec 5.1, 5.2): an index of whole 32-token KV pages keyed by chained
// block hashes (block_store.h), shared by every lane and conversation, over the engine's KvPagePool.
//
//   PrefixCache cache(pool, {.namespace_description = ..., .disk = store_or_null});
//   PrefixMatch m = cache.lookup(prompt, prompt.size() - 1);   // m.kv: pages the caller now holds
//   ... prefill prompt[m.n_tokens, ...) on top of m.kv ...
//   cache.publish(tokens, seq.kv, chain);                       // after each chunk and at the end
//   cache.evict(n);                                             // when the pool needs pages
//
// Ownership: the index holds one pool reference per cached page; a sequence that reuses a page holds
// another (its lease: a page with refcount > 1 is in use and never evicted, and the lease does not
// touch its recency). Whole pages are immutable once published; the partial last page of a match is
// always a private copy, so no sequence ever writes into a page another one reads. LRU eviction takes
// leaves of the prefix tree only (a block whose longer prefixes are still cached stays), so every
// cached block stays reachable from the root.
//
// Checkpoint group (recurrent layers, SequenceState::recurrent): recurrent state cannot be truncated,
// so the cache keeps exact snapshots at block boundaries; a match is cut back to the deepest block
// with a snapshot and returns a copy of it. Models without recurrent state (recurrent_floats == 0)
// declare no group and matches end wherever the KV does.
//
// Disk tier: with a BlockStore, an evicted page (and checkpoint) is handed to it before it is dropped,
// and a block missing from the index is asked from it before the match stops. The store is told
// which blocks the index holds (BlockStore::set_resident): its copies of them are redundant, the
// first to go when its quota needs room, and writes of them (write-behind) yield to sole copies. A
// block the store already holds is refreshed (BlockStore::refresh) when the index drops it again, so
// a prefix read back for every conversation keeps a recent disk copy and the chains under it.
//
// Thread-safety: none; the engine thread owns the cache and the pool. The pool must outlive the cache.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/block_store.h"
#include "cache/kv_pages.h"

namespace splash {

struct PrefixCacheOptions {
  // What makes KV bytes comparable (see make_cache_namespace); hashed into the chain's root key.
  std::string namespace_description;
  // Floats of one sequence's recurrent state (Model::recurrent_state_floats()); 0 = no checkpoint group.
  int64_t recurrent_floats = 0;
  int64_t checkpoint_interval = 4096;  // rolling checkpoints during prefill (a multiple of 32)
  int64_t checkpoint_spacing = 2048;   // no rolling checkpoint this close to the resume or replay point
  int64_t max_checkpoint_bytes = int64_t{1} << 30;  // RAM for snapshots; LRU ones leave beyond it
  BlockStore* disk = nullptr;          // optional second tier; not owned, outlives the cache
  // Write-behind (spec 5.6, only when disk->persistent()): a conversation's newest restore point at
  // least write_behind_min_tokens deep goes to disk write_behind_delay after its publication, unless
  // a newer point of the same conversation supersedes it first.
  std::chrono::milliseconds write_behind_delay{10000};
  int64_t write_behind_min_tokens = 2048;
  int64_t write_behind_step_bytes = int64_t{8} << 20;  // offered to the disk per write_behind() call
  int64_t prefetch_batch_bytes = int64_t{64} << 20;    // disk reads in flight per prefetch() batch
};

struct PrefixCacheStats {
  // lookups
  int64_t lookups = 0;
  int64_t hits = 0;                // lookups that reused at least one token
  int64_t cold_misses = 0;         // lookups that reused nothing
  int64_t lost_state_misses = 0;   // KV matched but no checkpoint at or below it (checkpoint group)
  int64_t reused_tokens = 0;       // tokens handed to sequences (RAM and disk)
  int64_t kv_hit_tokens = 0;       // of which from pages in RAM
  int64_t kv_disk_hit_tokens = 0;  // of which read back from the disk tier
  int64_t partial_page_copies = 0; // matches that ended inside a page (copied)
  int64_t probe_hashed_blocks = 0; // block keys computed
  int64_t collisions = 0;          // equal keys, different tokens (treated as misses)
  // KV pages in the index
  int64_t kv_pages = 0;            // entries (each holds one page)
  int64_t kv_publications = 0;     // pages added
  int64_t kv_evictions = 0;        // pages dropped by LRU
  int64_t kv_page_swaps = 0;       // cached pages replaced by a lane's recomputed copy (one freed)
  // checkpoints
  int64_t checkpoints = 0;
  int64_t checkpoint_bytes = 0;
  int64_t checkpoint_publications = 0;  // rolling
  int64_t replay_publications = 0;      // replay points
  int64_t checkpoint_evictions = 0;
  int64_t checkpoint_hits = 0;          // matches resumed from a checkpoint
  // disk tier
  int64_t disk_hits = 0;           // pages and states read back
  int64_t disk_offloads = 0;       // puts accepted
  int64_t offload_failures = 0;    // puts refused (queue full, quota, disabled)
  int64_t disk_refreshes = 0;      // fresh copies of old disk records of blocks dropped again
  int64_t disk_read_batches = 0;   // prefetch() batches read off the engine thread
  // write-behind (restore points)
  int64_t write_behind_waiting = 0;     // points noted, not yet written (or still being written)
  int64_t write_behind_durable = 0;     // points whose blocks (and state) the store has written
  int64_t write_behind_superseded = 0;  // points dropped for a newer point of the same conversation
  int64_t write_behind_refused = 0;     // points the store refused (disabled, failed) or evicted meanwhile
  int64_t write_behind_blocks = 0;      // records queued by write-behind (absent or old on disk)
};

// What lookup() hands over: the caller owns kv (release it to the pool) and resumes at n_tokens.
struct PrefixMatch {
  KvPageTable kv;                // positions [0, n_tokens): shared whole pages + a private partial last page
  std::vector<float> recurrent;  // checkpoint group: the state after n_tokens tokens; empty otherwise
  int64_t n_tokens = 0;
  int64_t disk_tokens = 0;       // of n_tokens, read back from the disk tier
};

// The chained keys of one token sequence's whole blocks, computed once (a lane keeps one).
struct BlockChain {
  std::vector<BlockKey> keys;  // keys[i]: the prefix of (i + 1) blocks
  BlockKey last_rolling;       // the sequence's newest rolling checkpoint (retired by the next one)
  bool has_rolling = false;
};

// The namespace description (format version, architecture and dims, weight identity, KV geometry and
// format, build). `weights_identity`: e.g. "size:mtime" of the model file.
std::string make_cache_namespace(std::string_view architecture, std::string_view dims, std::string_view weights_identity,
                                 const KvCacheConfig& kv);

class PrefixCache {
 public:
  PrefixCache(KvPagePool& pool, PrefixCacheOptions options);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The longest cached prefix of tokens[0, limit) (limit <= tokens.size()): whole blocks from the
  // index (then the disk tier), then, without a checkpoint group, the longest common prefix with a
  // cached page of the next block (copied into a private page). With a group the match is cut back to
  // the deepest checkpoint. Pages come from the pool; when none is free for a copy the match stops.
  // read_disk = false: only what the index (and a finished prefetch) holds, no disk I/O.
  PrefixMatch lookup(std::span<const int32_t> tokens, int64_t limit, bool read_disk = true);

  // Restores off the caller's thread (spec 5.4): reads the blocks of tokens[0, limit) that only the
  // disk tier holds (after the index's whole-block match), in batches of prefetch_batch_bytes
  // (BlockStore::read_async), indexing each batch when it has arrived; on hybrids then the deepest
  // checkpoint state along the match that only the disk holds. Returns true when lookup(tokens,
  // limit, false) finds everything the disk could give (nothing to read, all read, a read failed or
  // the pool had no page: the match ends there); false while a batch is in flight: call again later
  // (the engine: next tick) with the same tokens. What a prefetch indexed is held (a lease) until the
  // lookup, release_prefetch(), or a prefetch of other tokens; a batch in flight for other tokens is
  // waited for and indexed first.
  bool prefetch(std::span<const int32_t> tokens, int64_t limit);
  bool prefetching() const { return prefetch_.ticket != 0; }
  // Drops the lease of a prefetch nobody looked up (its request went away).
  void release_prefetch();

  // Indexes the whole pages of `table` (holding the KV of tokens[0, table.n_tokens)) that are not yet
  // cached; already cached ones are touched (LRU). `chain` caches the keys of `tokens`.
  void publish(std::span<const int32_t> tokens, const KvPageTable& table, BlockChain& chain);

  // A snapshot of the recurrent state after tokens[0, n_tokens) (a multiple of 32, its pages published
  // first). rolling: retires the chain's previous rolling checkpoint; else a replay point.
  void publish_checkpoint(std::span<const int32_t> tokens, int64_t n_tokens, std::span<const float> state,
                          BlockChain& chain, bool rolling);

  // The next prefill position after kv_len where the sequence should stop for a checkpoint (rolling
  // every checkpoint_interval, replay point = last whole page before the prompt's end), or 0 when
  // none is due or there is no checkpoint group. resumed_at: where this prefill started.
  int64_t next_checkpoint(int64_t resumed_at, int64_t kv_len, int64_t n_prompt) const;
  bool has_checkpoint_group() const { return options_.recurrent_floats > 0; }

  // --- write-behind (persistent disk tier only; no-ops otherwise)
  using Clock = std::chrono::steady_clock;
  // tokens[0, n_tokens) of chain (a multiple of 32, published; with a checkpoint group, where a
  // checkpoint was just published) is its conversation's newest restore point: due at now + delay.
  // Pending points of shorter prefixes of the chain are superseded (dropped unwritten); noting the
  // same point again keeps its due time. A chain superseded again and again is due at the latest 3
  // delays after its first unwritten point (a long generation).
  void note_restore_point(const BlockChain& chain, int64_t n_tokens, Clock::time_point now);
  // Offers the blocks of due points to the disk tier, root first, about write_behind_step_bytes per
  // call (the store's queue is bounded; the writer thread does the I/O), and counts points the
  // store has finished writing. Returns when to call it next: time_point::max() when nothing waits.
  Clock::time_point write_behind(Clock::time_point now);
  bool writes_behind() const { return options_.disk != nullptr && options_.disk->persistent(); }

  // Clean stop (spec 5.6: "flush newest first, <= 6 s"): hands the disk tier every cached block and
  // checkpoint it lacks (old copies refreshed), the most recently used conversations first, each
  // chain root first so that whatever the budget cuts off, what reached the disk is whole prefixes of
  // the newest conversations. Waits for the store between bounded steps; stops at `deadline` or once
  // max_records were queued. Nothing leaves RAM. Returns the records queued.
  int64_t flush_to_disk(Clock::time_point deadline, int64_t max_records = INT64_MAX);

  // Frees up to n pages by dropping least recently used cached pages that only the index holds
  // (leaves of the prefix tree first; each handed to the disk tier first). Returns pages freed.
  int64_t evict(int64_t n_pages);

  // Pages held by the index alone (reclaimable), O(entries).
  int64_t pages_exclusive() const;
  const PrefixCacheStats& stats() const { return stats_; }
  const BlockKey& root() const { return root_; }

  // Tests only: changes one stored token of a cached block, which is what a hash collision looks like
  // to a lookup (equal key, different tokens). False when the key is not cached.
  bool tamper_tokens_for_test(const BlockKey& key, int index, int32_t value);

  // The keys of tokens' first n_blocks whole blocks (extends chain.keys as needed).
  void extend_chain(std::span<const int32_t> tokens, int64_t n_blocks, BlockChain& chain);

 private:
  struct Entry {
    BlockKey parent;
    int32_t page = -1;
    int64_t depth = 0;  // blocks from the root, this one included
    uint64_t last_use = 0;
    std::array<int32_t, kKvPageTokens> tokens{};  // the block's ids: hash-collision guard
    std::vector<BlockKey> children;
    bool prefetched = false;  // read back by prefetch(), not yet handed out (counts as a disk hit)
  };
  struct Checkpoint {
    std::vector<float> state;
    uint64_t last_use = 0;
    bool rolling = false;
  };
  using Index = std::unordered_map<BlockKey, Entry, BlockKeyHash>;
  struct RestorePoint {
    Clock::time_point due;
    Clock::time_point first;     // when the oldest point it superseded (or itself) was noted
    int64_t offered = 0;         // blocks of its chain offered so far, root first
    bool state_offered = false;
    uint64_t ticket = 0;         // offered whole: durable once the store's finished_puts() reaches it
    bool flushing = false;
    bool refused = false;        // the store refused a block with its queue empty
  };
  struct Prefetch {
    BlockKey tip;                  // the last block key of the tokens being prefetched
    uint64_t ticket = 0;           // a read batch in flight (0: none)
    std::vector<BlockInfo> asked;  // its requests, in order (a state last, if any)
    std::vector<std::array<int32_t, kKvPageTokens>> asked_tokens;
    std::vector<int32_t> held;     // pages indexed by this prefetch, retained until the lookup
    std::unordered_map<BlockKey, std::vector<float>, BlockKeyHash> states;  // read, not yet used
    BlockKey stop;                 // a block that failed: the prefetch ends before it
    bool has_stop = false;
  };
  // Indexes a finished batch's blocks (until the first that failed or found no page).
  void apply_prefetch(BlockStore::ReadResults& results);
  // Offers one due point's next blocks; false when the store's queue is full (try later).
  bool offer_point(const BlockKey& key, RestorePoint& p, int64_t& budget);

  static bool same_tokens(const Entry& e, std::span<const int32_t> block);
  std::vector<BlockKey>& children_of(const BlockKey& parent);
  // A page for a copy or a disk read: a free one, else an evicted one (pages a match already holds
  // have refcount > 1 and are never taken); -1 when neither.
  int32_t take_page();
  Entry& insert(const BlockKey& key, const BlockKey& parent, int64_t depth, int32_t page,
                std::span<const int32_t> block);
  void drop_entry(Index::iterator it);
  // The index drops a block (its page; a checkpoint's state) the disk tier holds: the store rewrites
  // its record when the one it holds is old, so a prefix that keeps coming back keeps its disk copy
  // and the chains stored under it.
  void refresh_on_disk(const BlockKey& key, const Entry& e);
  void refresh_state_on_disk(const BlockKey& key, std::span<const float> state);
  void drop_checkpoint(const BlockKey& key, bool to_disk);
  void enforce_checkpoint_budget();
  // Reads block `key` from the disk tier into a fresh page and indexes it; false when absent or failed.
  bool promote_from_disk(const BlockKey& key, const BlockKey& parent, int64_t depth, std::span<const int32_t> block);
  // The deepest depth <= max_depth along chain keys with a checkpoint (RAM or disk), its state in `out`.
  int64_t find_checkpoint(const std::vector<BlockKey>& keys, int64_t max_depth, std::vector<float>& out, bool read_disk);

  KvPagePool& pool_;
  PrefixCacheOptions options_;
  BlockKey root_;
  Index index_;
  std::vector<BlockKey> root_children_;
  std::unordered_map<BlockKey, Checkpoint, BlockKeyHash> checkpoints_;
  uint64_t clock_ = 0;
  std::unordered_map<BlockKey, RestorePoint, BlockKeyHash> points_;  // write-behind, by deepest block
  Clock::time_point next_due_ = Clock::time_point::max();
  Prefetch prefetch_;
  PrefixCacheStats stats_;
};

}  // namespace splash
