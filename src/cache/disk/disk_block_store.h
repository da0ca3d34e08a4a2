// The prefix cache's SSD tier (spec 5.4, 5.6): a BlockStore over one ring file on disk.
//
// File: records (cache/disk/record.h: header, token ids, payload, XXH3 checksums, 4 KiB aligned)
// are appended at the ring's head; the ring's address space is twice the quota, and the records
// that leave it (the oldest first) have their blocks returned to the file system with
// fallocate(PUNCH_HOLE | KEEP_SIZE), so the file's allocated size stays within the quota while its
// logical size reaches 2x the quota. Where punching holes is not supported the ring is the quota
// itself and records are overwritten in place. KV pages and states share the file and the quota.
// Eviction follows the ring (oldest written first) and takes whole chains: a KV block that leaves
// takes the records hanging off it (descendants, states), which no lookup from the root could
// reach any more. A put() or refresh() of a block stored more than half a quota of writes ago
// writes a fresh copy at the head (the old copy then leaves alone, nothing hangs off it), so
// prefixes the RAM tier keeps dropping and reading back (shared system prompts) stay, and the
// chains under them.
//
// Residency (BlockStore::set_resident): records of blocks the RAM tier holds are redundant, and old
// copies a fresher one superseded are garbage. The quota takes garbage first, then the least
// recently used sole record (used: written, dropped by RAM again, put again), then redundant
// records (oldest written first): dropping a redundant copy loses nothing now, but RAM would have
// to write the block again when it lets it go, so with a quota smaller than the working set
// keeping them saves most writes (spec 5.4 takes redundant copies first; measured in
// docs/PERFORMANCE.md). A record is rewritten (put, refresh) only when the ring's head is about to
// reach it (written more than 3/4 of the ring ago). A redundant record leaves without the chain
// under it (RAM reaches it). A write of a block RAM holds (a copy: write-behind) may only displace
// garbage and redundant records, in the ring's way or for the quota: when it would have to take a
// sole copy it is refused (`copies_yielded`). Copies also pause while more than
// copy_limit_per_hour bytes were written in the last hour (spec 5.6: 128 GiB).
//
// Threads: put() copies the block into a bounded queue and returns (false when the queue is full
// or the store is disabled); one writer thread drains the queue in batches (one pwrite per run of
// consecutive records), evicting the oldest records for room first. read_async() hands a batch of
// reads to one reader thread. get() serves queued blocks from memory and others with one pread, verified (checksums, key, kind, token ids): a corrupt,
// truncated or overwritten record is a miss (counted in read_failures) and leaves the index. A
// failed write disables the store with one warning; reads of what is on disk go on.
//
// Temporary mode: one unlinked file (O_TMPFILE) in `dir` (the caller passes $TMPDIR or /tmp), gone
// when the process ends however it ends. Persistent mode: `dir/<namespace hex>/` (mode 0700) holds
// `namespace.txt` (the description, readable), `lock` (flock: one owner process at a time) and
// `blocks.ring`; open() rescans the ring, verifies every record, and takes back every chain that
// reaches the namespace root; sync() and the destructor fdatasync it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cache/block_store.h"
#include "cache/disk/disk_file.h"

namespace splash {

struct DiskStoreOptions {
  int64_t quota_bytes = 0;            // > 0: the file's allocated size never exceeds it
  std::string namespace_description;  // the RAM tier's; namespace_key() of it is the chain root
  bool persistent = false;
  // Persistent: the cache root (the namespace folder is made inside it). Temporary: the folder of
  // the unlinked file.
  std::string dir;
  int64_t queue_bytes = 0;            // queued bytes before put() refuses; 0: quota/4 in [8, 64] MiB
  std::chrono::milliseconds lock_wait{0};  // persistent: wait for another owner this long
  int64_t copy_limit_per_hour = int64_t{128} << 30;  // copies pause above this many bytes written/hour
  // Persistent (spec 5.6): after an unclean exit the store serves on probation this long; when the
  // process dies again within it, the next start empties the cache (it may be what kills it).
  std::chrono::milliseconds probation{60000};
  // Persistent: other namespace folders of the cache root unused this long are deleted at open
  // (a folder another process holds is left alone); 0 = never.
  std::chrono::hours unused_namespace_age{24 * 14};
};

class DiskBlockStore final : public BlockStore {
 public:
  enum class OpenFailure { kNone, kBusy, kError };
  // Opens (persistent: rescans) the store and starts its writer. On a persistent directory owned by
  // another process (after lock_wait) the error says so and *failure is kBusy.
  static Result<std::unique_ptr<DiskBlockStore>> open(const DiskStoreOptions& options,
                                                      OpenFailure* failure = nullptr);
  ~DiskBlockStore() override;  // flushes, stops the writer

  bool put(const BlockInfo& info, std::span<const int32_t> tokens, std::span<const uint8_t> payload) override;
  bool refresh(const BlockInfo& info, std::span<const int32_t> tokens, std::span<const uint8_t> payload) override;
  void set_resident(const BlockKey& key, BlockKind kind, bool resident) override;
  void clear_resident() override;
  bool contains(const BlockKey& key, BlockKind kind) const override;
  Result<std::vector<uint8_t>> get(const BlockKey& key, BlockKind kind, std::span<const int32_t> tokens) override;
  // One reader thread runs the batches in order (get() each, so queued blocks come from memory).
  uint64_t read_async(std::vector<ReadRequest> requests) override;
  std::optional<ReadResults> take_reads(uint64_t ticket) override;
  // Test hook: the reader stops taking batches until resumed.
  void pause_reader_for_test(bool paused);
  // Waits until every queued block is written to the file (the page cache: it survives the process,
  // not a power cut). sync() also fdatasyncs; the destructor of a persistent store does.
  void flush() override;
  void sync();
  BlockStoreStats stats() const override;
  bool persistent() const override { return options_.persistent; }
  uint64_t queued_puts() const override;
  uint64_t finished_puts() const override;

  // Persistent: the namespace folder; temporary: empty.
  const std::string& directory() const { return ns_dir_; }
  // The ring's logical size (2x the quota, or the quota without hole punching).
  uint64_t ring_bytes() const { return ring_bytes_; }
  // Test hook: the writer stops taking batches (queued blocks stay queued) until resumed.
  void pause_writer_for_test(bool paused);

  // Persistent: what open() found and did (spec 5.6), for the start-up lines.
  struct Housekeeping {
    bool unclean_exit = false;       // the last process using the folder did not stop cleanly
    bool emptied = false;            // ...and it had started on probation: the cache was emptied
    int64_t removed_namespaces = 0;  // other namespace folders unused for unused_namespace_age
    int64_t removed_bytes = 0;
  };
  const Housekeeping& housekeeping() const { return housekeeping_; }
  // Whether the store is serving on probation now (after an unclean exit, for options.probation).
  bool on_probation() const;

 private:
  struct IndexKey {
    BlockKey key;
    BlockKind kind;
    friend bool operator==(const IndexKey&, const IndexKey&) = default;
  };
  struct IndexKeyHash {
    size_t operator()(const IndexKey& k) const { return BlockKeyHash{}(k.key) ^ static_cast<size_t>(k.kind); }
  };
  struct Entry {  // one record placed in the ring
    IndexKey id;
    BlockKey parent;
    uint64_t seq = 0;
    uint64_t bytes = 0;  // aligned size
    bool durable = false;  // written; before that get() serves the queued copy
    uint64_t last_use = 0;  // use_bytes_ at its write, or when RAM dropped (or put) the block since
  };
  struct Pending {  // one queued put()
    BlockInfo info;
    std::vector<int32_t> tokens;
    std::vector<uint8_t> payload;
    uint64_t bytes = 0;  // record size on disk
  };

  explicit DiskBlockStore(const DiskStoreOptions& options);
  Status open_persistent(OpenFailure* failure);
  // Persistent, under the folder's lock, before the rescan: the unclean-exit markers (`running`,
  // `probation`), emptying the ring after a failed probation, and the age of other namespaces.
  Status start_housekeeping();
  void remove_old_namespaces();
  // The writer thread, once probation_until_ has passed: the probation marker goes.
  void end_probation_locked();
  Status rescan();
  void writer_loop();
  void reader_loop();
  void write_batch(std::vector<std::shared_ptr<Pending>>& batch);
  // Under mu_: places a record of `bytes` at the head (evicting for room); false when it cannot fit,
  // or when it is a copy of a resident block and would have to evict a sole copy (or copies pause).
  bool place_locked(const BlockInfo& info, uint64_t seq, uint64_t bytes, uint64_t& offset,
                    std::vector<std::pair<uint64_t, uint64_t>>& freed);
  // Under mu_: whether a copy of `bytes` can be placed at the head by evicting redundant records only.
  bool copy_fits_locked(uint64_t bytes) const;
  // Under mu_: the record at `offset` is redundant (RAM holds its block, or a newer copy exists).
  bool redundant_locked(uint64_t offset, const Entry& e) const;
  // Under mu_: files the record at `offset` among the redundant or the sole records (after a change
  // of residency, index or use); unfile_locked takes it out of both (eviction).
  void classify_locked(uint64_t offset);
  void unfile_locked(uint64_t offset, const Entry& e);
  // Under mu_: the indexed record of `id` was used (RAM dropped it, or it was put again).
  void touch_locked(const IndexKey& id);
  // Under mu_: bytes written in the last hour (minute buckets); note_written_locked adds some now.
  int64_t written_last_hour_locked() const;
  void note_written_locked(int64_t bytes);
  int64_t minute_now() const;
  // Under mu_: removes the record at `offset` and, when it was the indexed copy, every record that
  // only it made reachable (its descendants and their states): a chain without its start is never
  // hit. `bad`: dropped because it failed verification (not an eviction).
  void evict_locked(uint64_t offset, std::vector<std::pair<uint64_t, uint64_t>>& freed, bool bad = false);
  void insert_locked(uint64_t offset, const Entry& e);
  // Under mu_: whether a put() of `id` has anything to write (not queued, not stored recently).
  bool needs_write_locked(const IndexKey& id) const;
  enum class Enqueue { kQueued, kUnneeded, kRefused };
  // put() and refresh(): queues a copy when needs_write_locked (refresh_only: and the block is stored).
  Enqueue enqueue(const BlockInfo& info, std::span<const int32_t> tokens, std::span<const uint8_t> payload,
                  bool refresh_only);
  void disable(const std::string& why);

  DiskStoreOptions options_;
  BlockKey root_;
  std::string ns_dir_, file_name_;
  disk::DirLock lock_;
  disk::Fd fd_;
  uint64_t ring_bytes_ = 0;
  bool punch_ = true;
  uint64_t queue_limit_ = 0;

  mutable std::mutex mu_;
  std::condition_variable work_cv_, done_cv_;
  std::map<uint64_t, Entry> ring_;  // offset -> record
  std::unordered_map<IndexKey, uint64_t, IndexKeyHash> index_;  // -> offset in ring_
  std::unordered_map<BlockKey, std::unordered_set<BlockKey, BlockKeyHash>, BlockKeyHash> children_;  // KV chains
  std::deque<std::shared_ptr<Pending>> queue_;
  std::unordered_map<IndexKey, std::shared_ptr<Pending>, IndexKeyHash> pending_;  // queued or being written
  std::vector<std::pair<uint64_t, uint64_t>> to_punch_;  // corrupt records found by get()
  std::unordered_set<IndexKey, IndexKeyHash> resident_;  // blocks the RAM tier holds (set_resident)
  std::set<uint64_t> garbage_;    // offsets of superseded copies: the quota's first victims
  std::set<uint64_t> redundant_;  // offsets of records of blocks RAM holds: its last victims
  uint64_t redundant_bytes_ = 0;  // garbage_ and redundant_
  std::set<std::pair<uint64_t, uint64_t>> sole_lru_;  // (last_use, offset) of the other records
  uint64_t use_bytes_ = 0;  // the use clock: bytes placed so far (+1 per use without a write)
  Housekeeping housekeeping_;
  std::chrono::steady_clock::time_point probation_until_{};  // epoch: not on probation
  bool probation_ = false;
  std::deque<std::pair<int64_t, int64_t>> written_minutes_;  // (minute since start, bytes written)
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  uint64_t queued_bytes_ = 0;
  uint64_t head_ = 0, next_seq_ = 1;
  uint64_t queued_puts_ = 0, finished_puts_ = 0;  // queue_ entries pushed / taken and finished
  int in_flight_ = 0;
  bool stop_ = false, disabled_ = false, paused_ = false;
  BlockStoreStats stats_;
  std::thread writer_;

  struct ReadJob {
    uint64_t ticket = 0;
    std::vector<ReadRequest> requests;
    ReadResults results;
    bool done = false;
  };
  std::mutex read_mu_;  // the read queue (never held with mu_ taken after it)
  std::condition_variable read_cv_;
  std::deque<std::shared_ptr<ReadJob>> read_queue_;
  std::unordered_map<uint64_t, std::shared_ptr<ReadJob>> read_jobs_;  // queued, running or done
  uint64_t next_read_ticket_ = 0;
  bool read_stop_ = false, read_paused_ = false;
  std::thread reader_;
};

// The disk tier `splash serve` builds from its flags (spec 1.2, 5.4, 5.6): nullptr store when
// quota_bytes is 0. Persistent with a directory owned by another server: one warning, then the
// temporary tier. `message` gets the start-up line to print (empty when there is none).
struct DiskTierConfig {
  int64_t quota_bytes = 0;
  bool persistent = false;
  std::string cache_dir;  // persistent: the cache root
  std::string temp_dir;   // temporary files ($TMPDIR, else /tmp)
  std::string namespace_description;
  std::chrono::milliseconds lock_wait{20000};
  // Bytes of one recurrent-state checkpoint (0: attention-only). A quota that cannot hold one state
  // record turns the tier off (spec 5.4): restore points of such a model could never be stored.
  int64_t state_bytes = 0;
};
struct DiskTier {
  std::unique_ptr<DiskBlockStore> store;
  std::vector<std::string> lines;     // console lines (take-back summary, fallback notes)
};
Result<DiskTier> open_disk_tier(const DiskTierConfig& config);
// `$XDG_CACHE_HOME/splash/prefix-cache`, else `$HOME/.cache/splash/prefix-cache`, from the values
// the caller read from the environment.
std::string default_cache_dir(const char* xdg_cache_home, const char* home);

}  // namespace splash
