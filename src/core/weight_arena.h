// Long-lived, write-once byte buffers for repacked weights, backed by transparent huge pages.
//
// Decode streams every weight once per token. With 4 KiB pages the hardware prefetchers stop at each
// page boundary and every 4 KiB costs a TLB walk; with 2 MiB pages one thread's Q4_0 decode pass
// (bench_matmul decode/Q4_0) went from 17.5 to 23.3 GB/s (docs/PERFORMANCE.md, "Decode against the
// memory bandwidth"). Allocations are carved out of 2 MiB-aligned anonymous mappings marked MADV_HUGEPAGE
// (which takes effect when /sys/kernel/mm/transparent_hugepage/enabled is `always` or `madvise`,
// the default of most distributions; with `never` they are plain pages and nothing else changes).
// Small buffers share 64 MiB chunks, so a model's many 1-4 MiB matrices lie back to back on huge
// pages instead of each being rounded to its own; a buffer of 8 MiB or more gets a mapping of its
// own, rounded to 4 KiB (its last partial 2 MiB stays on small pages, never inflated).
// Memory comes zero-filled and is never reused: a chunk is unmapped when the last buffer in it is
// destroyed (a model's weights are freed together), and space left at a chunk's end is never touched,
// so it costs address space, not memory.
//
// Thread-safety: allocate() may be called from any thread; a buffer is owned by one object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace splash {

class ArenaBuffer {
 public:
  ArenaBuffer() = default;
  // `bytes` zero-filled bytes, 64-byte aligned; bytes == 0 gives an empty buffer. Throws
  // std::bad_alloc when the system refuses the mapping (as std::vector would).
  static ArenaBuffer allocate(size_t bytes);

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Whether the chunk behind this buffer was marked for huge pages (false on kernels without THP).
  bool huge_pages_requested() const;

 private:
  struct Chunk;
  std::shared_ptr<Chunk> chunk_;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace splash
