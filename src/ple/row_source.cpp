// The factory, and the two placements that need no cache: resident and mmap.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "core/mapped_file.h"
#include "ple/sources.h"

namespace splash::ple {

std::string_view placement_name(Placement p) {
  switch (p) {
    case Placement::kResident:
      return "resident";
    case Placement::kMmap:
      return "mmap";
    case Placement::kSsd:
      return "ssd";
  }
  return "?";
}

Result<std::unique_ptr<RowSource>> open_row_source(const TableLayout& layout, const RowSourceOptions& options) {
  if (layout.segments.empty() || layout.row_bytes == 0 || layout.width == 0)
    return make_error("PLE table: empty layout");
  switch (options.placement) {
    case Placement::kResident:
      return open_resident_source(layout);
    case Placement::kMmap:
      return open_mmap_source(layout);
    case Placement::kSsd:
      return open_ssd_source(layout, options);
  }
  return make_error("PLE table: unknown placement");
}

Result<uint64_t> pread_upto(int fd, void* dst, uint64_t n, uint64_t offset, const std::string& path) {
  auto* p = static_cast<uint8_t*>(dst);
  uint64_t done = 0;
  while (done < n) {
    ssize_t got = ::pread(fd, p + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0)
      return make_error(path, ": read of ", n, " bytes at offset ", offset, " failed: ", std::strerror(errno));
    if (got == 0) break;
    done += static_cast<uint64_t>(got);
  }
  return done;
}

Status check_rows(const TableLayout& layout, std::span<const uint64_t> rows, std::span<float> out) {
  if (out.size() != rows.size() * layout.width)
    return make_error("PLE gather: output holds ", out.size(), " floats, ", rows.size(), " rows need ",
                      rows.size() * layout.width);
  for (uint64_t r : rows)
    if (r >= layout.n_rows) return make_error("PLE gather: row ", r, " is past the table's ", layout.n_rows, " rows");
  return {};
}

namespace {

// ---------------------------------------------------------------------------------------------
// resident

class ResidentSource final : public RowSource {
 public:
  explicit ResidentSource(TableLayout layout) : RowSource(std::move(layout)) {}

  Status load() {
    rows_.reset(new (std::nothrow) uint8_t[layout_.table_bytes()]);  // not zeroed: every byte is read below
    if (!rows_)
      return make_error("PLE table: cannot allocate ", layout_.table_bytes(), " bytes for resident placement");
    constexpr uint64_t kChunk = 64ull << 20;
    std::map<std::string, int> fds;
    Status st;
    for (const auto& s : layout_.segments) {
      auto [it, fresh] = fds.try_emplace(s.path, -1);
      if (fresh) it->second = ::open(s.path.c_str(), O_RDONLY | O_CLOEXEC);
      const int fd = it->second;
      if (fd < 0) {
        st = make_error(s.path, ": cannot open: ", std::strerror(errno));
        break;
      }
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
      const uint64_t n = s.n_rows * layout_.row_bytes;
      for (uint64_t done = 0; done < n && st.ok(); done += kChunk) {
        const uint64_t len = std::min(kChunk, n - done);
        auto t0 = std::chrono::steady_clock::now();
        auto got =
            pread_upto(fd, rows_.get() + s.first_row * layout_.row_bytes + done, len, s.file_offset + done, s.path);
        stats_.read_seconds += seconds_since(t0);
        ++stats_.reads;
        if (!got.ok()) st = got.error();
        else if (*got != len)
          st = make_error(s.path, ": ends inside the PLE table (offset ", s.file_offset + done + *got, ")");
        else stats_.bytes_read += len;
      }
      if (!st.ok()) break;
    }
    for (auto& [path, fd] : fds)
      if (fd >= 0) ::close(fd);
    return st;
  }

  Status gather(std::span<const uint64_t> rows, std::span<float> out) override {
    SPLASH_TRY_STATUS(check_rows(layout_, rows, out));
    for (size_t i = 0; i < rows.size(); ++i)
      decode_row(layout_, rows_.get() + rows[i] * layout_.row_bytes, out.data() + i * layout_.width);
    gathered_ += rows.size();
    return {};
  }

  void prefetch(std::span<const uint64_t>) override {}
  void wait_prefetch() override {}

  PleStats stats() const override {
    PleStats s = stats_;
    s.placement = Placement::kResident;
    s.format = row_format_name(layout_);
    s.table_bytes = s.resident_bytes = layout_.table_bytes();
    s.rows_gathered = gathered_.load();
    return s;
  }

 private:
  std::unique_ptr<uint8_t[]> rows_;  // [n_rows, row_bytes] as stored
  PleStats stats_;                   // the load's reads; fixed after open
  std::atomic<uint64_t> gathered_{0};
};

// ---------------------------------------------------------------------------------------------
// mmap

class MmapSource final : public RowSource {
 public:
  explicit MmapSource(TableLayout layout) : RowSource(std::move(layout)) {}

  Status map() {
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    for (const auto& s : layout_.segments) {
      if (!files_.count(s.path)) {
        SPLASH_TRY(MappedFile f, MappedFile::open(s.path));
        files_.emplace(s.path, std::move(f));
      }
      const MappedFile& f = files_.at(s.path);
      const uint64_t end = s.file_offset + s.n_rows * layout_.row_bytes;
      if (end > f.size()) return make_error(s.path, ": ends inside the PLE table (", f.size(), " < ", end, " bytes)");
      const uint8_t* base = f.data() + s.file_offset;
      bases_.push_back(base);
      // Without MADV_RANDOM every 320-byte row pulls the kernel's readahead window from the disk.
      uintptr_t lo = reinterpret_cast<uintptr_t>(base) / page * page;
      uintptr_t hi = reinterpret_cast<uintptr_t>(f.data() + end);
      if (::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_RANDOM) != 0)
        return make_error(s.path, ": madvise(MADV_RANDOM) failed: ", std::strerror(errno));
    }
    page_ = page;
    return {};
  }

  Status gather(std::span<const uint64_t> rows, std::span<float> out) override {
    SPLASH_TRY_STATUS(check_rows(layout_, rows, out));
    for (size_t i = 0; i < rows.size(); ++i) decode_row(layout_, row_ptr(rows[i]), out.data() + i * layout_.width);
    gathered_ += rows.size();
    return {};
  }

  void prefetch(std::span<const uint64_t> rows) override {
    uintptr_t last = 0;
    for (uint64_t r : rows) {
      if (r >= layout_.n_rows) continue;
      uintptr_t p = reinterpret_cast<uintptr_t>(row_ptr(r));
      uintptr_t lo = p / page_ * page_, hi = p + layout_.row_bytes;
      if (lo == last && hi <= lo + page_) continue;  // same page as the previous row
      ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_WILLNEED);
      last = lo;
    }
  }
  void wait_prefetch() override {}

  PleStats stats() const override {
    PleStats s;
    s.placement = Placement::kMmap;
    s.format = row_format_name(layout_);
    s.table_bytes = layout_.table_bytes();
    s.rows_gathered = gathered_.load();
    s.resident_bytes = std::min(s.table_bytes, cached_bytes());
    return s;
  }

 private:
  const uint8_t* row_ptr(uint64_t row) const {
    const TableSegment& s = layout_.segment_of(row);
    const size_t i = static_cast<size_t>(&s - layout_.segments.data());
    return bases_[i] + (row - s.first_row) * layout_.row_bytes;
  }

  // The table's pages that sit in the page cache (mincore), in bytes.
  uint64_t cached_bytes() const {
    uint64_t total = 0;
    std::vector<unsigned char> vec;
    for (size_t i = 0; i < bases_.size(); ++i) {
      uintptr_t lo = reinterpret_cast<uintptr_t>(bases_[i]) / page_ * page_;
      uintptr_t hi = reinterpret_cast<uintptr_t>(bases_[i]) + layout_.segments[i].n_rows * layout_.row_bytes;
      vec.assign((hi - lo + page_ - 1) / page_, 0);
      if (::mincore(reinterpret_cast<void*>(lo), hi - lo, vec.data()) != 0) continue;
      for (unsigned char v : vec) total += (v & 1) ? page_ : 0;
    }
    return total;
  }

  std::map<std::string, MappedFile> files_;
  std::vector<const uint8_t*> bases_;  // per segment: its first row inside the mapping
  uint64_t page_ = 4096;
  std::atomic<uint64_t> gathered_{0};
};

}  // namespace

Result<std::unique_ptr<RowSource>> open_resident_source(const TableLayout& layout) {
  auto src = std::make_unique<ResidentSource>(layout);
  SPLASH_TRY_STATUS(src->load());
  return std::unique_ptr<RowSource>(std::move(src));
}

Result<std::unique_ptr<RowSource>> open_mmap_source(const TableLayout& layout) {
  auto src = std::make_unique<MmapSource>(layout);
  SPLASH_TRY_STATUS(src->map());
  return std::unique_ptr<RowSource>(std::move(src));
}

}  // namespace splash::ple
