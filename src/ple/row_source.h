// Rows of the PLE n-gram table, wherever the table is placed. One interface, three placements:
//   resident  every stored row copied into RAM at open (pread of the segments);
//   mmap      the checkpoint files mapped read-only, MADV_RANDOM on the table's pages, rows gathered
//             from the page cache (the kernel decides what stays);
//   ssd       pread of exactly the needed rows (O_DIRECT where the file system takes it, else
//             buffered with POSIX_FADV_RANDOM) into a bounded row cache (CLOCK, size in bytes):
//             rows repeated in a request are read once, adjacent rows are coalesced into one read.
// Rows come back decoded to f32 (times the FP8 scale), byte-identical across placements.
//
// Prefetch: row ids depend only on token ids, so the engine hands over the rows of the next prefill
// chunk, or of the just-sampled token and its drafts, as soon as it knows them. The ssd placement
// reads them on its background thread; a later gather waits only for rows still in flight. mmap
// issues MADV_WILLNEED on their pages; resident has nothing to do.
//
// Thread-safety: gather, prefetch and stats may be called from any thread concurrently.
// Ownership: a RowSource owns its file descriptors, mappings, cache and thread.
//
// Usage:
//   auto layout = locate_hf_table(dir, prefix);            // table_layout.h
//   auto src = open_row_source(*layout, {.placement = Placement::kSsd, .cache_bytes = 1 << 30});
//   hash.rows(ctx, next_tokens, ids);  (*src)->prefetch(ids);  ...  (*src)->gather(ids, out);
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/result.h"
#include "ple/table_layout.h"

namespace splash::ple {

enum class Placement : uint8_t { kResident, kMmap, kSsd };
std::string_view placement_name(Placement p);  // "resident", "mmap", "ssd"

struct RowSourceOptions {
  Placement placement = Placement::kResident;
  uint64_t cache_bytes = 64ull << 20;  // ssd only: the row cache bound (stored bytes of cached rows)
  bool direct_io = true;               // ssd only: try O_DIRECT first
  uint32_t io_depth = 16;              // ssd only: reads of one request in flight at once (AIO for
                                       // O_DIRECT files, reader threads for buffered ones)
};

// What the server's /status reports as `ple.*` (field names in docs/FLASH_NEXT.md "Placement").
struct PleStats {
  Placement placement = Placement::kResident;
  std::string format;            // ple.format: "bf16", "fp8", ...
  uint64_t table_bytes = 0;      // ple.table_bytes: stored size of the whole table
  uint64_t resident_bytes = 0;   // ple.resident_bytes: table bytes held in RAM by this process
                                 // (resident: the copy; ssd: the cached rows; mmap: the table's
                                 // pages found in the page cache, mincore)
  uint64_t cache_bytes = 0;      // ple.cache_bytes: the ssd row cache bound (0 otherwise)
  uint64_t cache_hits = 0;       // ple.cache_hits: rows served from the cache (ssd)
  uint64_t cache_misses = 0;     // ple.cache_misses: rows read from the file (ssd)
  uint64_t rows_gathered = 0;    // ple.rows_gathered: rows handed out by gather
  uint64_t rows_prefetched = 0;  // ple.rows_prefetched: rows read ahead by prefetch (ssd)
  uint64_t reads = 0;            // ple.reads: read calls issued (ssd, and resident at open)
  uint64_t bytes_read = 0;       // ple.bytes_read: bytes those calls read
  double read_seconds = 0;       // ple.read_seconds: wall time spent waiting for them
  bool direct_io = false;        // ple.direct_io: O_DIRECT in use (ssd)
};

class RowSource {
 public:
  virtual ~RowSource() = default;

  // Decodes rows[i] into out[i * width, (i+1) * width). Rows may repeat and come in any order.
  // An Error for a row id past the table or a failed read (naming the file).
  virtual Status gather(std::span<const uint64_t> rows, std::span<float> out) = 0;

  // Starts fetching rows that a later gather will ask for; returns at once. Ids past the table are
  // ignored here (gather reports them).
  virtual void prefetch(std::span<const uint64_t> rows) = 0;

  // Waits until every prefetch issued so far has finished (tests and benchmarks).
  virtual void wait_prefetch() = 0;

  virtual PleStats stats() const = 0;

  const TableLayout& layout() const { return layout_; }

 protected:
  explicit RowSource(TableLayout layout) : layout_(std::move(layout)) {}
  TableLayout layout_;
};

Result<std::unique_ptr<RowSource>> open_row_source(const TableLayout& layout, const RowSourceOptions& options);

}  // namespace splash::ple
