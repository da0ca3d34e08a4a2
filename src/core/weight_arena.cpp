#include "core/weight_arena.h"

#include <sys/mman.h>

#include <mutex>
#include <new>

namespace splash {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kChunkBytes = size_t{64} << 20;
constexpr size_t kOwnMappingFrom = size_t{8} << 20;  // buffers this large get their own mapping
constexpr size_t kAlign = 64;

size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }
}  // namespace

struct ArenaBuffer::Chunk {
  uint8_t* base = nullptr;
  size_t bytes = 0;
  size_t used = 0;
  bool huge = false;

  explicit Chunk(size_t size) : bytes(round_up(size, 4096)) {
    // Over-map by one huge page and trim, so the chunk starts on a 2 MiB boundary (THP backs only
    // whole aligned 2 MiB ranges).
    const size_t span = bytes + kHugePage;
    void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    auto* p = static_cast<uint8_t*>(raw);
    uint8_t* aligned = reinterpret_cast<uint8_t*>(round_up(reinterpret_cast<uintptr_t>(p), kHugePage));
    if (aligned > p) munmap(p, static_cast<size_t>(aligned - p));
    const size_t tail = static_cast<size_t>(p + span - (aligned + bytes));
    if (tail > 0) munmap(aligned + bytes, tail);
    base = aligned;
#ifdef MADV_HUGEPAGE
    huge = madvise(base, bytes, MADV_HUGEPAGE) == 0;
#endif
  }
  ~Chunk() { munmap(base, bytes); }
  Chunk(const Chunk&) = delete;
  Chunk& operator=(const Chunk&) = delete;
};

ArenaBuffer ArenaBuffer::allocate(size_t bytes) {
  ArenaBuffer b;
  if (bytes == 0) return b;
  if (bytes >= kOwnMappingFrom) {
    b.chunk_ = std::make_shared<Chunk>(bytes);
    b.chunk_->used = bytes;
    b.data_ = b.chunk_->base;
    b.size_ = bytes;
    return b;
  }
  static std::mutex mu;
  static std::weak_ptr<Chunk> current;  // the chunk small buffers are carved from
  std::lock_guard<std::mutex> lock(mu);
  std::shared_ptr<Chunk> c = current.lock();
  const size_t need = round_up(bytes, kAlign);
  if (!c || c->bytes - c->used < need) {
    c = std::make_shared<Chunk>(kChunkBytes);
    current = c;
  }
  b.data_ = c->base + c->used;
  b.size_ = bytes;
  c->used += need;
  b.chunk_ = std::move(c);
  return b;
}

bool ArenaBuffer::huge_pages_requested() const { return chunk_ && chunk_->huge; }

}  // namespace splash
