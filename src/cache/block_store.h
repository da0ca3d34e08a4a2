// The prefix cache's second tier (spec 5.4, 5.6): whole KV pages and recurrent-state checkpoints,
// keyed by chained block hashes, kept outside RAM. The RAM tier (prefix_cache.h) hands a block over
// when it evicts it, and asks for one when its own index misses; the disk store (cache/disk/)
// implements this interface. Keeping the RAM tier behind this interface lets it run, and be tested,
// without a disk tier (nullptr) and lets the disk store be tested without an engine.
//
// Keys: BlockKey of block i = hash(key of block i-1, the block's 32 token ids), the chain starting
// from a namespace key (model layout, KV geometry and format, build: see namespace_key), so one key
// names one exact token prefix of one model layout. Payloads are opaque bytes to the store.
//
// Thread-safety: every method may be called from any thread; put() never blocks on I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace splash {

struct BlockKey {
  uint64_t hi = 0, lo = 0;
  friend bool operator==(const BlockKey&, const BlockKey&) = default;
};

struct BlockKeyHash {
  size_t operator()(const BlockKey& k) const { return static_cast<size_t>(k.lo ^ (k.hi * 0x9e3779b97f4a7c15ull)); }
};

enum class BlockKind : uint8_t {
  kKvPage = 1,  // one 32-token KV page, all layers (KvPagePool page bytes)
  kState = 2,   // a recurrent-state checkpoint (SequenceState::recurrent) at the end of the block
};

struct BlockInfo {
  BlockKey key;     // the chained key of the prefix ending with this block
  BlockKey parent;  // the key of the prefix before it (the namespace key for the first block)
  BlockKind kind = BlockKind::kKvPage;
  int64_t n_tokens = 0;  // tokens from the start of the sequence to the end of this block
};

struct BlockStoreStats {
  int64_t records = 0;          // records present
  int64_t bytes_used = 0;       // bytes on disk (never above the quota)
  int64_t quota_bytes = 0;
  int64_t bytes_written = 0;    // since start
  int64_t bytes_read = 0;       // since start
  int64_t writes_dropped = 0;   // put() refused (queue full, quota, disabled file)
  int64_t read_failures = 0;    // get() errors (corrupt, truncated, I/O) counted as misses
  int64_t restored_records = 0; // taken back from a persistent directory at start
  // Added with the disk store (cache/disk/), for /status `disk` (spec 3).
  bool persistent = false;       // records survive a restart (--persistent-cache)
  int64_t file_bytes = 0;        // bytes the files occupy on disk (allocated blocks; holes excluded)
  int64_t kv_records = 0;        // records present, by kind
  int64_t state_records = 0;
  int64_t pending_records = 0;   // queued by put(), not yet on disk
  int64_t records_written = 0;   // since start (demotions)
  int64_t records_read = 0;      // get() hits (restores)
  int64_t evictions = 0;         // records dropped to stay within the quota
  int64_t unneeded = 0;          // put() of a block already stored or queued (nothing written)
  int64_t refreshed = 0;         // fresh copies written by refresh(): old records still in use
  int64_t restored_kv_blocks = 0;  // restored_records by kind, and their bytes
  int64_t restored_states = 0;
  int64_t restored_bytes = 0;
  int64_t restored_points = 0;   // chain ends among them: the prefixes a request can resume from
  int64_t left_behind = 0;       // valid records not taken back (their chain to the root is broken)
  // Added with the residency policy (set_resident): copies of blocks RAM holds are evicted first,
  // and writes of such blocks yield rather than push out sole copies.
  int64_t redundant_records = 0;   // stored blocks the RAM tier also holds (or superseded old copies)
  int64_t redundant_bytes = 0;
  int64_t copies_yielded = 0;      // writes of RAM-held blocks refused: only sole copies to displace
  int64_t copies_paused = 0;       // writes of RAM-held blocks refused: the hourly write limit
  int64_t written_last_hour = 0;   // bytes written in the last 60 minutes
  bool probation = false;          // persistent: serving on probation after an unclean exit (spec 5.6)
  // State records alone (records_written / records_read / bytes_used count both kinds).
  int64_t states_written = 0;
  int64_t states_read = 0;
  int64_t state_bytes = 0;         // bytes of state records present
};

class BlockStore {
 public:
  virtual ~BlockStore() = default;

  // Queues a copy of the block for writing off the caller's thread. tokens: the block's own token
  // ids (stored to check a hit against hash collisions). Returns false (and the block is simply
  // lost, as without a disk tier) when the bounded write queue is full or the store is disabled.
  virtual bool put(const BlockInfo& info, std::span<const int32_t> tokens, std::span<const uint8_t> payload) = 0;

  // The RAM tier drops a block the store may hold: when the store's copy is old enough to be among
  // the next to leave (a ring, a quota), a fresh copy is queued, so a prefix that keeps coming back
  // (a shared system prompt read back for every conversation) and the chains under it stay. Nothing
  // happens for a block the store does not hold or holds a recent copy of. Returns whether a copy was
  // queued. Cheap when nothing is due (no payload copy).
  virtual bool refresh(const BlockInfo& info, std::span<const int32_t> tokens, std::span<const uint8_t> payload) {
    (void)info, (void)tokens, (void)payload;
    return false;
  }

  // Residency (spec 5.4 "full quota replaces oldest redundant copy, then oldest sole copy"): the RAM
  // tier says which blocks it holds. A stored copy of a block RAM holds is redundant: room is made by
  // dropping redundant copies first; dropping one does not take the chains stored under it (lookups
  // reach them through RAM, and RAM writes the block again before it lets it go); and a write of a
  // block RAM holds (write-behind, a clean-stop flush before clear_resident) only displaces redundant
  // copies: when the quota holds nothing but sole copies it is refused, so a quota smaller than the
  // working set is not churned by second copies of what RAM already has.
  virtual void set_resident(const BlockKey& key, BlockKind kind, bool resident) {
    (void)key, (void)kind, (void)resident;
  }
  // The RAM tier is going away (clean stop): nothing is resident any more.
  virtual void clear_resident() {}

  // Whether a record of that key and kind is present (index only, no I/O).
  virtual bool contains(const BlockKey& key, BlockKind kind) const = 0;

  // Reads and verifies a record (checksum, key, kind, tokens). An error is a miss (corrupt or
  // truncated record, I/O error, evicted meanwhile): the caller falls back to a shorter prefix.
  virtual Result<std::vector<uint8_t>> get(const BlockKey& key, BlockKind kind, std::span<const int32_t> tokens) = 0;

  // Reads off the caller's thread (spec 5.4: restores off the decode path): read_async() queues a
  // batch of get()s and returns a ticket; take_reads(ticket) returns the batch's results in request
  // order (an error is a miss, as from get()) once all are read, nullopt while they are not (an
  // unknown ticket gives an empty vector). This default reads synchronously inside read_async().
  struct ReadRequest {
    BlockKey key;
    BlockKind kind = BlockKind::kKvPage;
    std::vector<int32_t> tokens;
  };
  using ReadResults = std::vector<Result<std::vector<uint8_t>>>;
  virtual uint64_t read_async(std::vector<ReadRequest> requests) {
    ReadResults results;
    for (const ReadRequest& r : requests) results.push_back(get(r.key, r.kind, r.tokens));
    done_reads_.emplace(++last_read_ticket_, std::move(results));
    return last_read_ticket_;
  }
  virtual std::optional<ReadResults> take_reads(uint64_t ticket) {
    auto it = done_reads_.find(ticket);
    if (it == done_reads_.end()) return ReadResults{};
    ReadResults out = std::move(it->second);
    done_reads_.erase(it);
    return out;
  }

  // Blocks until every queued write is on disk (clean stop, tests).
  virtual void flush() = 0;

  virtual BlockStoreStats stats() const = 0;

  // Whether records survive a restart: the RAM tier then also writes its newest restore points
  // behind (not only what it evicts), so that they survive even an unclean exit.
  virtual bool persistent() const { return false; }

  // Write-behind bookkeeping: how many put()/refresh() copies were queued so far, and how many of
  // them the writer has finished (written, or dropped by a failure), in queue order. A caller that
  // saw queued_puts() == n after its last put knows its copies are written once finished_puts() >= n.
  // A store that writes synchronously reports 0 and 0.
  virtual uint64_t queued_puts() const { return 0; }
  virtual uint64_t finished_puts() const { return 0; }

 private:
  std::unordered_map<uint64_t, ReadResults> done_reads_;  // the synchronous default's results
  uint64_t last_read_ticket_ = 0;
};

// The chain's starting key for one cache namespace: a description of everything that makes KV bytes
// comparable (format version, model layout and weights identity, KV geometry and format, build).
BlockKey namespace_key(std::string_view description);
// The key of the prefix `parent` extended by one block of token ids.
BlockKey chain_block_key(const BlockKey& parent, std::span<const int32_t> tokens);

}  // namespace splash
