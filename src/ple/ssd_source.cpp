// The ssd placement: exact-row reads into a bounded CLOCK row cache, with a prefetch thread.
//
// Reads: the missing rows of a request are deduplicated and sorted; rows whose (aligned) byte ranges
// touch in one file become one pread, so nothing between two needed rows is read unless O_DIRECT's
// 4 KiB alignment forces it (that block is read either way). The preads of one request run on the
// calling thread and up to io_depth - 1 pool threads, so the SSD sees a queue of requests instead
// of one at a time (threads started per request cost more than they saved in decode). With
// O_DIRECT the reads go through Linux native AIO instead (io_submit from the calling thread: no
// thread hand-offs); the threads serve buffered files. O_DIRECT keeps the table out of the
// page cache; where a file system refuses it (tmpfs, some overlays) the file is read buffered with
// POSIX_FADV_RANDOM, so no readahead.
// The cache holds stored rows (fp8 rows take half the room of bf16 ones): cache_bytes / row_bytes
// slots, CLOCK replacement, a row enters with its reference bit set so a prefetched row survives
// until the gather that asked for it unless the cache is smaller than the rows in flight.
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <new>
#include <numeric>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "core/log.h"
#include "ple/sources.h"

namespace splash::ple {

namespace {

constexpr uint64_t kAlign = 4096;              // O_DIRECT offset, length and buffer alignment
constexpr uint64_t kMaxRunBytes = 4ull << 20;  // one pread reads at most this much
constexpr uint64_t kNoRow = UINT64_MAX;

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};

struct File {
  std::string path;
  int fd = -1;
  bool direct = false;
};

struct IoCount {
  uint64_t reads = 0, bytes = 0, rows = 0;
  double seconds = 0;
};

// Some file systems accept O_DIRECT at open and refuse the read (EINVAL): probe one aligned block.
bool direct_read_works(int fd, uint64_t offset) {
  std::unique_ptr<uint8_t, AlignedFree> b(static_cast<uint8_t*>(std::aligned_alloc(kAlign, kAlign)));
  SPLASH_CHECK(b != nullptr);
  ssize_t got = ::pread(fd, b.get(), kAlign, static_cast<off_t>(offset / kAlign * kAlign));
  return got >= 0;
}

class SsdSource final : public RowSource {
 public:
  SsdSource(TableLayout layout, const RowSourceOptions& o) : RowSource(std::move(layout)), options_(o) {}

  ~SsdSource() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    if (worker_.joinable()) worker_.join();
    {
      std::lock_guard<std::mutex> lock(pool_mu_);
      pool_stop_ = true;
    }
    pool_cv_.notify_all();
    for (auto& t : pool_) t.join();
    for (aio_context_t ctx : aio_free_) ::syscall(SYS_io_destroy, ctx);
    for (auto& f : files_)
      if (f.fd >= 0) ::close(f.fd);
  }

  Status open() {
    for (const auto& s : layout_.segments) {
      auto it = std::find_if(files_.begin(), files_.end(), [&](const File& f) { return f.path == s.path; });
      if (it == files_.end()) {
        File f{s.path, -1, false};
        if (options_.direct_io) {
          f.fd = ::open(s.path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
          f.direct = f.fd >= 0;
        }
        if (f.direct && !direct_read_works(f.fd, s.file_offset)) {
          ::close(f.fd);
          f.fd = -1;
          f.direct = false;
        }
        if (f.fd < 0) f.fd = ::open(s.path.c_str(), O_RDONLY | O_CLOEXEC);
        if (f.fd < 0) return make_error(s.path, ": cannot open: ", std::strerror(errno));
        if (!f.direct) ::posix_fadvise(f.fd, 0, 0, POSIX_FADV_RANDOM);
        files_.push_back(std::move(f));
        it = files_.end() - 1;
      }
      seg_file_.push_back(static_cast<uint32_t>(it - files_.begin()));
    }
    n_slots_ = std::min(options_.cache_bytes / layout_.row_bytes, layout_.n_rows);
    // Not zeroed: a slot's pages are touched only when a row lands there, so RSS grows with use.
    slots_.reset(new (std::nothrow) uint8_t[std::max<uint64_t>(n_slots_ * layout_.row_bytes, 1)]);
    if (!slots_)
      return make_error("PLE ssd placement: cannot allocate a row cache of ", n_slots_ * layout_.row_bytes, " bytes");
    slot_row_.assign(n_slots_, kNoRow);
    slot_ref_.assign(n_slots_, 0);
    where_.reserve(n_slots_);
    // Reader threads serve buffered files only: O_DIRECT files go through AIO (a kernel without AIO
    // then reads at depth 1).
    if (std::any_of(files_.begin(), files_.end(), [](const File& f) { return !f.direct; }))
      for (uint32_t t = 1; t < std::max<uint32_t>(options_.io_depth, 1); ++t)
        pool_.emplace_back([this] { pool_loop(); });
    worker_ = std::thread([this] { work(); });
    return {};
  }

  Status gather(std::span<const uint64_t> rows, std::span<float> out) override {
    SPLASH_TRY_STATUS(check_rows(layout_, rows, out));
    const uint64_t w = layout_.width;
    std::unordered_map<uint64_t, std::vector<size_t>> missing;  // row -> positions in `rows`
    {
      std::unique_lock<std::mutex> lock(mu_);
      std::unordered_set<uint64_t> seen;
      std::vector<size_t> waiting;  // positions whose row is being read by prefetch
      for (size_t i = 0; i < rows.size(); ++i) {
        const uint64_t r = rows[i];
        const bool first = seen.insert(r).second;
        if (auto it = where_.find(r); it != where_.end()) {
          decode_slot(it->second, out.data() + i * w);
          stats_.cache_hits += first;
        } else if (in_flight_.count(r)) {
          waiting.push_back(i);
        } else {
          missing[r].push_back(i);
        }
      }
      if (!waiting.empty()) {
        cv_.wait(lock, [&] {
          return std::none_of(waiting.begin(), waiting.end(), [&](size_t i) { return in_flight_.count(rows[i]) > 0; });
        });
        std::unordered_set<uint64_t> counted;
        for (size_t i : waiting) {
          const uint64_t r = rows[i];
          if (auto it = where_.find(r); it != where_.end()) {
            decode_slot(it->second, out.data() + i * w);
            stats_.cache_hits += counted.insert(r).second;
          } else {
            missing[r].push_back(i);  // evicted before we came, or the prefetch failed
          }
        }
      }
      for (const auto& [r, pos] : missing) in_flight_.insert(r);
    }
    std::vector<uint64_t> order;
    order.reserve(missing.size());
    for (const auto& [r, pos] : missing) order.push_back(r);
    std::sort(order.begin(), order.end());
    IoCount io;
    Status st = read_rows(order, io, [&](uint64_t r, const uint8_t* bytes) {
      const auto& pos = missing.at(r);
      decode_row(layout_, bytes, out.data() + pos[0] * w);
      for (size_t k = 1; k < pos.size(); ++k)
        std::memcpy(out.data() + pos[k] * w, out.data() + pos[0] * w, w * sizeof(float));
      std::lock_guard<std::mutex> lock(mu_);
      insert(r, bytes);
    });
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (uint64_t r : order) in_flight_.erase(r);
      add(io);
      stats_.rows_gathered += rows.size();
    }
    cv_.notify_all();
    return st;
  }

  void prefetch(std::span<const uint64_t> rows) override {
    std::vector<uint64_t> job;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (n_slots_ == 0) return;  // nowhere to keep the rows: the gather reads them
      for (uint64_t r : rows) {
        if (r >= layout_.n_rows || where_.count(r) || !in_flight_.insert(r).second) continue;
        job.push_back(r);
      }
      if (job.empty()) return;
      jobs_.push_back(std::move(job));
      ++jobs_pending_;
    }
    work_cv_.notify_one();
  }

  void wait_prefetch() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return jobs_pending_ == 0; });
  }

  PleStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    PleStats s = stats_;
    s.placement = Placement::kSsd;
    s.format = row_format_name(layout_);
    s.table_bytes = layout_.table_bytes();
    s.cache_bytes = n_slots_ * layout_.row_bytes;
    s.resident_bytes = where_.size() * layout_.row_bytes;
    s.direct_io = std::any_of(files_.begin(), files_.end(), [](const File& f) { return f.direct; });
    return s;
  }

 private:
  void work() {
    for (;;) {
      std::vector<uint64_t> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
        if (stop_) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      std::sort(job.begin(), job.end());
      IoCount io;
      Status st = read_rows(job, io, [&](uint64_t r, const uint8_t* bytes) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          insert(r, bytes);
          in_flight_.erase(r);
        }
        cv_.notify_all();
      });
      if (!st.ok()) log_warn("PLE prefetch: ", st.error_message(), " (the gather will read the rows itself)");
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (uint64_t r : job) in_flight_.erase(r);
        add(io);
        stats_.rows_prefetched += io.rows;
        --jobs_pending_;
      }
      cv_.notify_all();
    }
  }

  // A request's read loop, run by the caller and by the pool threads that pick it up.
  struct IoBatch {
    std::function<void()> fn;
    int running;  // pool threads inside fn (pool_mu_)
  };

  void pool_loop() {
    std::unique_lock<std::mutex> lock(pool_mu_);
    for (;;) {
      pool_cv_.wait(lock, [&] { return pool_stop_ || !pool_q_.empty(); });
      if (pool_stop_) return;
      IoBatch* b = pool_q_.front();
      pool_q_.pop_front();
      ++b->running;
      lock.unlock();
      b->fn();
      lock.lock();
      --b->running;
      pool_done_cv_.notify_all();
    }
  }

  // One pread: rows [first, last) of a sorted request, aligned byte range [lo, hi) of one file.
  struct ReadRun {
    uint32_t file = 0;
    size_t first = 0, last = 0;
    uint64_t lo = 0, hi = 0;
  };

  // Reads the sorted unique `rows`, coalescing touching ranges, and calls fn(row, stored bytes) for
  // each right after its read, from up to io_depth threads at once (fn must be thread-safe). No
  // lock is held while reading. io.seconds is the wall time of the whole read.
  Status read_rows(const std::vector<uint64_t>& rows, IoCount& io,
                   const std::function<void(uint64_t, const uint8_t*)>& fn) {
    if (rows.empty()) return {};
    const uint64_t rb = layout_.row_bytes;
    std::vector<uint64_t> offs(rows.size());  // file offset of every row
    std::vector<ReadRun> runs;
    for (size_t i = 0; i < rows.size(); ++i) {
      const TableSegment& s = layout_.segment_of(rows[i]);
      const uint32_t file = seg_file_[static_cast<size_t>(&s - layout_.segments.data())];
      const uint64_t a = files_[file].direct ? kAlign : 1;
      offs[i] = s.file_offset + (rows[i] - s.first_row) * rb;
      const uint64_t lo = offs[i] / a * a, hi = (offs[i] + rb + a - 1) / a * a;
      if (!runs.empty()) {
        ReadRun& r = runs.back();
        if (r.file == file && lo <= r.hi && hi - r.lo <= kMaxRunBytes) {
          r.hi = std::max(r.hi, hi);
          r.last = i + 1;
          continue;
        }
      }
      runs.push_back({file, i, i + 1, lo, hi});
    }
    auto t0 = std::chrono::steady_clock::now();
    if (options_.io_depth > 1 && runs.size() > 1 &&
        std::all_of(runs.begin(), runs.end(), [&](const ReadRun& r) { return files_[r.file].direct; })) {
      uint64_t reads = 0, bytes = 0;
      std::optional<Status> st = aio_read_runs(runs, offs, rows, fn, reads, bytes);
      if (st) {
        io.seconds += seconds_since(t0);
        io.reads += reads;
        io.bytes += bytes;
        if (!st->ok()) return *st;
        io.rows += rows.size();
        return {};
      }
    }
    std::atomic<size_t> next{0};
    std::mutex err_mu;
    Status err;
    std::atomic<uint64_t> n_reads{0}, n_bytes{0};
    auto worker = [&] {
      std::unique_ptr<uint8_t, AlignedFree> buf;
      uint64_t buf_size = 0;
      for (size_t k = next++; k < runs.size(); k = next++) {
        const ReadRun& r = runs[k];
        const File& f = files_[r.file];
        if (r.hi - r.lo > buf_size) {
          buf_size = std::max(r.hi - r.lo, uint64_t{1} << 16);
          buf.reset(static_cast<uint8_t*>(std::aligned_alloc(kAlign, (buf_size + kAlign - 1) / kAlign * kAlign)));
          SPLASH_CHECK(buf != nullptr);
        }
        auto got = pread_upto(f.fd, buf.get(), r.hi - r.lo, r.lo, f.path);
        Status st;
        if (!got.ok()) st = got.error();
        else if (r.lo + *got < offs[r.last - 1] + rb)
          st = make_error(f.path, ": ends inside the PLE table (", r.lo + *got, " bytes)");
        if (!st.ok()) {
          std::lock_guard<std::mutex> lock(err_mu);
          if (err.ok()) err = st;
          next = runs.size();
          return;
        }
        ++n_reads;
        n_bytes += *got;
        for (size_t i = r.first; i < r.last; ++i) fn(rows[i], buf.get() + (offs[i] - r.lo));
      }
    };
    // The calling thread reads too; idle pool threads join in. Helpers that have not started by the
    // time the runs are done are taken back off the queue.
    IoBatch batch{worker, 0};
    const size_t n_helpers = std::min<size_t>(pool_.size(), runs.size() - 1);
    if (n_helpers > 0) {
      {
        std::lock_guard<std::mutex> lock(pool_mu_);
        for (size_t t = 0; t < n_helpers; ++t) pool_q_.push_back(&batch);
      }
      pool_cv_.notify_all();
    }
    worker();
    if (n_helpers > 0) {
      std::unique_lock<std::mutex> lock(pool_mu_);
      pool_q_.erase(std::remove(pool_q_.begin(), pool_q_.end(), &batch), pool_q_.end());
      pool_done_cv_.wait(lock, [&] { return batch.running == 0; });
    }
    io.seconds += seconds_since(t0);
    io.reads += n_reads;
    io.bytes += n_bytes;
    if (!err.ok()) return err;
    io.rows += rows.size();
    return {};
  }

  // Linux native AIO for O_DIRECT files: one io_submit puts a window of io_depth reads in flight
  // from this thread, with no hand-off to other threads (on a busy machine a thread wake-up costs
  // more than the read). nullopt when the kernel refuses AIO: the caller uses the reader threads.
  std::optional<Status> aio_read_runs(const std::vector<ReadRun>& runs, const std::vector<uint64_t>& offs,
                                      const std::vector<uint64_t>& rows,
                                      const std::function<void(uint64_t, const uint8_t*)>& fn, uint64_t& n_reads,
                                      uint64_t& n_bytes) {
    const uint32_t depth = static_cast<uint32_t>(std::min<size_t>(options_.io_depth, runs.size()));
    aio_context_t ctx = 0;
    {
      std::lock_guard<std::mutex> lock(pool_mu_);
      if (!aio_free_.empty()) {
        ctx = aio_free_.back();
        aio_free_.pop_back();
      }
    }
    if (ctx == 0 && ::syscall(SYS_io_setup, options_.io_depth, &ctx) < 0) return std::nullopt;
    struct Release {  // contexts are kept: io_destroy waits for an RCU grace period (milliseconds)
      SsdSource* self;
      aio_context_t ctx;
      ~Release() {
        std::lock_guard<std::mutex> lock(self->pool_mu_);
        self->aio_free_.push_back(ctx);
      }
    };
    std::optional<Release> release;
    uint64_t slot_bytes = 0;
    for (const ReadRun& r : runs) slot_bytes = std::max(slot_bytes, r.hi - r.lo);
    std::unique_ptr<uint8_t, AlignedFree> buf(static_cast<uint8_t*>(std::aligned_alloc(kAlign, depth * slot_bytes)));
    SPLASH_CHECK(buf != nullptr);
    std::vector<uint32_t> free_slots(depth);
    std::iota(free_slots.begin(), free_slots.end(), 0u);
    std::vector<iocb> cbs(depth);
    std::vector<iocb*> batch;
    std::vector<io_event> events(depth);
    size_t next = 0, in_flight = 0;
    bool submitted_any = false;
    Status err;
    while ((next < runs.size() && err.ok()) || in_flight > 0) {
      batch.clear();
      while (err.ok() && next < runs.size() && !free_slots.empty()) {
        const uint32_t slot = free_slots.back();
        free_slots.pop_back();
        const ReadRun& r = runs[next];
        iocb& cb = cbs[slot];
        std::memset(&cb, 0, sizeof cb);
        cb.aio_fildes = static_cast<uint32_t>(files_[r.file].fd);
        cb.aio_lio_opcode = IOCB_CMD_PREAD;
        cb.aio_buf = reinterpret_cast<uint64_t>(buf.get() + uint64_t{slot} * slot_bytes);
        cb.aio_nbytes = r.hi - r.lo;
        cb.aio_offset = static_cast<int64_t>(r.lo);
        cb.aio_data = (uint64_t{slot} << 32) | next;
        batch.push_back(&cb);
        ++next;
      }
      if (!batch.empty()) {
        long got = ::syscall(SYS_io_submit, ctx, static_cast<long>(batch.size()), batch.data());
        if (got < 0 && errno == EAGAIN) got = 0;
        if (got < 0 && !submitted_any) {
          ::syscall(SYS_io_destroy, ctx);
          return std::nullopt;
        }
        if (!release) release.emplace(Release{this, ctx});
        if (got < 0) {
          err = make_error(files_[runs[next - 1].file].path, ": io_submit failed: ", std::strerror(errno));
          got = 0;
        }
        submitted_any = submitted_any || got > 0;
        for (size_t k = static_cast<size_t>(got); k < batch.size(); ++k) {  // not taken: give back
          free_slots.push_back(static_cast<uint32_t>(batch[k]->aio_data >> 32));
          --next;
        }
        in_flight += static_cast<size_t>(got);
      }
      if (in_flight == 0) continue;
      const long n = ::syscall(SYS_io_getevents, ctx, 1L, static_cast<long>(depth), events.data(), nullptr);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        err = make_error("PLE ssd placement: io_getevents failed: ", std::strerror(errno));
        release.reset();  // not reused: io_destroy waits for what is still in flight
        ::syscall(SYS_io_destroy, ctx);
        return err;
      }
      for (long e = 0; e < n; ++e) {
        const uint32_t slot = static_cast<uint32_t>(events[e].data >> 32);
        const ReadRun& r = runs[events[e].data & 0xffffffffu];
        const File& f = files_[r.file];
        --in_flight;
        free_slots.push_back(slot);
        const int64_t res = events[e].res;
        ++n_reads;
        if (res < 0) {
          if (err.ok())
            err = make_error(f.path, ": read of ", r.hi - r.lo, " bytes at offset ", r.lo,
                             " failed: ", std::strerror(static_cast<int>(-res)));
          continue;
        }
        n_bytes += static_cast<uint64_t>(res);
        if (r.lo + static_cast<uint64_t>(res) < offs[r.last - 1] + layout_.row_bytes) {
          if (err.ok())
            err = make_error(f.path, ": ends inside the PLE table (", r.lo + static_cast<uint64_t>(res), " bytes)");
          continue;
        }
        const uint8_t* base = buf.get() + uint64_t{slot} * slot_bytes;
        for (size_t i = r.first; i < r.last; ++i) fn(rows[i], base + (offs[i] - r.lo));
      }
    }
    if (!release) release.emplace(Release{this, ctx});
    return err;
  }

  // Caller holds mu_. Puts a row into the cache (CLOCK), unless present or the cache has no slots.
  void insert(uint64_t row, const uint8_t* bytes) {
    if (n_slots_ == 0 || where_.count(row)) return;
    for (;;) {
      const uint64_t s = hand_;
      hand_ = (hand_ + 1) % n_slots_;
      if (slot_row_[s] != kNoRow && slot_ref_[s]) {
        slot_ref_[s] = 0;
        continue;
      }
      if (slot_row_[s] != kNoRow) where_.erase(slot_row_[s]);
      slot_row_[s] = row;
      slot_ref_[s] = 1;
      where_[row] = static_cast<uint32_t>(s);
      std::memcpy(slots_.get() + s * layout_.row_bytes, bytes, layout_.row_bytes);
      return;
    }
  }

  void decode_slot(uint32_t s, float* dst) {  // caller holds mu_
    slot_ref_[s] = 1;
    decode_row(layout_, slots_.get() + uint64_t{s} * layout_.row_bytes, dst);
  }

  void add(const IoCount& io) {  // caller holds mu_
    stats_.reads += io.reads;
    stats_.bytes_read += io.bytes;
    stats_.read_seconds += io.seconds;
    stats_.cache_misses += io.rows;
  }

  RowSourceOptions options_;
  std::vector<File> files_;         // distinct files of the segments
  std::vector<uint32_t> seg_file_;  // segment -> files_ index

  mutable std::mutex mu_;            // guards everything below
  std::condition_variable cv_;       // rows left in_flight_, jobs finished
  std::condition_variable work_cv_;  // jobs queued, stop
  uint64_t n_slots_ = 0;
  std::unique_ptr<uint8_t[]> slots_;  // [n_slots, row_bytes] stored rows
  std::vector<uint64_t> slot_row_;    // [n_slots] row id or kNoRow
  std::vector<uint8_t> slot_ref_;     // [n_slots] CLOCK reference bits
  uint64_t hand_ = 0;
  std::unordered_map<uint64_t, uint32_t> where_;  // row -> slot
  std::unordered_set<uint64_t> in_flight_;        // rows some read has claimed
  std::deque<std::vector<uint64_t>> jobs_;
  uint64_t jobs_pending_ = 0;
  bool stop_ = false;
  PleStats stats_;
  std::thread worker_;

  std::mutex pool_mu_;  // guards pool_q_, pool_stop_, IoBatch::running
  std::condition_variable pool_cv_, pool_done_cv_;
  std::deque<IoBatch*> pool_q_;  // one entry per helper a request asks for
  bool pool_stop_ = false;
  std::vector<std::thread> pool_;        // io_depth - 1 reader threads
  std::vector<aio_context_t> aio_free_;  // AIO contexts not in use (pool_mu_)
};

}  // namespace

Result<std::unique_ptr<RowSource>> open_ssd_source(const TableLayout& layout, const RowSourceOptions& options) {
  auto src = std::make_unique<SsdSource>(layout, options);
  SPLASH_TRY_STATUS(src->open());
  return std::unique_ptr<RowSource>(std::move(src));
}

}  // namespace splash::ple
