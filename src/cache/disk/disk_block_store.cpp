// DiskBlockStore: queue, writer thread, ring placement and reads. Opening a persistent directory,
// the rescan and open_disk_tier are in disk_open.cpp.
#include "cache/disk/disk_block_store.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <optional>

#include "cache/disk/record.h"
#include "core/log.h"

namespace splash {

namespace {

constexpr size_t kBatchRecords = 64;
constexpr uint64_t kBatchBytes = uint64_t{8} << 20;

// [a, a+n) minus the union of `holes` (sorted, disjoint), appended to out.
void subtract_ranges(uint64_t a, uint64_t n, const std::vector<std::pair<uint64_t, uint64_t>>& holes,
                     std::vector<std::pair<uint64_t, uint64_t>>& out) {
  uint64_t cur = a;
  const uint64_t end = a + n;
  for (const auto& [ho, hn] : holes) {
    if (ho + hn <= cur || ho >= end) continue;
    if (ho > cur) out.emplace_back(cur, ho - cur);
    cur = std::max(cur, ho + hn);
    if (cur >= end) return;
  }
  if (cur < end) out.emplace_back(cur, end - cur);
}

}  // namespace

DiskBlockStore::DiskBlockStore(const DiskStoreOptions& options)
    : options_(options), root_(namespace_key(options.namespace_description)) {
  const uint64_t quota = static_cast<uint64_t>(options.quota_bytes);
  queue_limit_ = options.queue_bytes > 0 ? static_cast<uint64_t>(options.queue_bytes)
                                         : std::clamp<uint64_t>(quota / 4, uint64_t{8} << 20, uint64_t{64} << 20);
  stats_.quota_bytes = options.quota_bytes;
  stats_.persistent = options.persistent;
}

DiskBlockStore::~DiskBlockStore() {
  {
    std::lock_guard lock(read_mu_);
    read_stop_ = true;
    read_paused_ = false;
  }
  read_cv_.notify_all();
  if (reader_.joinable()) reader_.join();
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    paused_ = false;
  }
  work_cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  // A clean stop leaves a persistent cache durable (a crash of the process alone loses nothing
  // written; this is for the machine's).
  if (options_.persistent && fd_.valid() && !disabled_) ::fdatasync(fd_.get());
  if (options_.persistent && lock_.held() && fd_.valid()) {
    // A clean stop of the folder's owner: the next start trusts it (no probation); it was used now.
    std::error_code ec;
    std::filesystem::remove(ns_dir_ + "/running", ec);
    std::filesystem::remove(ns_dir_ + "/probation", ec);
    std::ofstream(ns_dir_ + "/last_used", std::ios::trunc) << "clean stop\n";
  }
}

Result<std::unique_ptr<DiskBlockStore>> DiskBlockStore::open(const DiskStoreOptions& options, OpenFailure* failure) {
  if (failure) *failure = OpenFailure::kError;
  if (options.quota_bytes <= 0) return make_error("the disk cache quota must be positive");
  if (options.dir.empty()) return make_error("the disk cache needs a directory");
  std::unique_ptr<DiskBlockStore> s(new DiskBlockStore(options));
  if (options.persistent) {
    SPLASH_TRY_STATUS(s->open_persistent(failure));
  } else {
    SPLASH_TRY(s->fd_, disk::open_unlinked_file(options.dir));
    s->punch_ = disk::punch_hole_supported(options.dir);
    s->file_name_ = options.dir + "/splash-cache (unlinked)";
    const uint64_t quota = static_cast<uint64_t>(options.quota_bytes);
    s->ring_bytes_ = (s->punch_ ? 2 * quota : quota) / disk::kRecordAlign * disk::kRecordAlign;
  }
  s->writer_ = std::thread([p = s.get()] { p->writer_loop(); });
  s->reader_ = std::thread([p = s.get()] { p->reader_loop(); });
  if (failure) *failure = OpenFailure::kNone;
  return s;
}

// --- put / contains / get ------------------------------------------------------------------------

bool DiskBlockStore::put(const BlockInfo& info, std::span<const int32_t> tokens, std::span<const uint8_t> payload) {
  return enqueue(info, tokens, payload, /*refresh_only=*/false) != Enqueue::kRefused;
}

bool DiskBlockStore::refresh(const BlockInfo& info, std::span<const int32_t> tokens, std::span<const uint8_t> payload) {
  return enqueue(info, tokens, payload, /*refresh_only=*/true) == Enqueue::kQueued;
}

void DiskBlockStore::set_resident(const BlockKey& key, BlockKind kind, bool resident) {
  const IndexKey id{key, kind};
  std::lock_guard lock(mu_);
  if (resident) resident_.insert(id);
  else resident_.erase(id);
  if (!resident) touch_locked(id);  // RAM used it until now
  if (auto it = index_.find(id); it != index_.end()) classify_locked(it->second);
}

void DiskBlockStore::clear_resident() {
  std::lock_guard lock(mu_);
  std::vector<uint64_t> offsets;
  for (const IndexKey& id : resident_)
    if (auto it = index_.find(id); it != index_.end()) offsets.push_back(it->second);
  resident_.clear();
  for (uint64_t off : offsets) classify_locked(off);
}

bool DiskBlockStore::redundant_locked(uint64_t offset, const Entry& e) const {
  auto ix = index_.find(e.id);
  return ix == index_.end() || ix->second != offset || resident_.count(e.id) != 0;
}

void DiskBlockStore::unfile_locked(uint64_t offset, const Entry& e) {
  if (redundant_.erase(offset) + garbage_.erase(offset) != 0) redundant_bytes_ -= e.bytes;
  sole_lru_.erase({e.last_use, offset});
}

void DiskBlockStore::classify_locked(uint64_t offset) {
  const Entry& e = ring_.at(offset);
  unfile_locked(offset, e);
  auto ix = index_.find(e.id);
  if (ix == index_.end() || ix->second != offset) {
    garbage_.insert(offset);
    redundant_bytes_ += e.bytes;
  } else if (resident_.count(e.id) != 0) {
    redundant_.insert(offset);
    redundant_bytes_ += e.bytes;
  } else {
    sole_lru_.emplace(e.last_use, offset);
  }
}

void DiskBlockStore::touch_locked(const IndexKey& id) {
  auto it = index_.find(id);
  if (it == index_.end()) return;
  Entry& e = ring_.at(it->second);
  unfile_locked(it->second, e);
  e.last_use = ++use_bytes_;  // the byte clock (+1: after everything written so far)
  classify_locked(it->second);
}

int64_t DiskBlockStore::minute_now() const {
  return std::chrono::duration_cast<std::chrono::minutes>(std::chrono::steady_clock::now() - started_).count();
}

void DiskBlockStore::note_written_locked(int64_t bytes) {
  const int64_t minute = minute_now();
  while (!written_minutes_.empty() && written_minutes_.front().first <= minute - 60) written_minutes_.pop_front();
  if (!written_minutes_.empty() && written_minutes_.back().first == minute) written_minutes_.back().second += bytes;
  else written_minutes_.emplace_back(minute, bytes);
}

int64_t DiskBlockStore::written_last_hour_locked() const {
  const int64_t minute = minute_now();
  int64_t sum = 0;
  for (const auto& [m, b] : written_minutes_)
    if (m > minute - 60) sum += b;
  return sum;
}

DiskBlockStore::Enqueue DiskBlockStore::enqueue(const BlockInfo& info, std::span<const int32_t> tokens,
                                                std::span<const uint8_t> payload, bool refresh_only) {
  const IndexKey id{info.key, info.kind};
  const bool fits_format = tokens.size() <= disk::kMaxRecordTokens && payload.size() < disk::kMaxRecordPayload;
  const uint64_t bytes = fits_format ? disk::record_bytes(tokens.size(), payload.size()) : 0;
  // Under mu_: what to do before (and again after) copying the payload outside the lock.
  auto decide = [&]() -> std::optional<Enqueue> {
    if (refresh_only && (!index_.count(id) || disabled_)) return Enqueue::kUnneeded;  // not ours to write
    if (!fits_format || disabled_ || bytes > static_cast<uint64_t>(options_.quota_bytes) ||
        (queued_bytes_ + bytes > queue_limit_ && !queue_.empty())) {
      ++stats_.writes_dropped;
      return Enqueue::kRefused;
    }
    if (!needs_write_locked(id)) {
      if (!refresh_only) ++stats_.unneeded;
      touch_locked(id);
      return Enqueue::kUnneeded;
    }
    if (resident_.count(id) != 0) {
      // A copy of a block RAM holds: cheap early answers (placement decides exactly).
      if (written_last_hour_locked() > options_.copy_limit_per_hour) {
        ++stats_.copies_paused;
        return Enqueue::kRefused;
      }
      if (!copy_fits_locked(bytes)) {
        ++stats_.copies_yielded;
        return Enqueue::kRefused;
      }
    }
    return std::nullopt;
  };
  {
    // Cheap answers before copying the payload.
    std::lock_guard lock(mu_);
    if (auto d = decide()) return *d;
  }
  auto p = std::make_shared<Pending>();
  p->info = info;
  p->tokens.assign(tokens.begin(), tokens.end());
  p->payload.assign(payload.begin(), payload.end());
  p->bytes = bytes;
  {
    std::lock_guard lock(mu_);
    if (auto d = decide()) return *d;
    if (refresh_only) ++stats_.refreshed;
    pending_.emplace(id, p);
    queue_.push_back(std::move(p));
    queued_bytes_ += bytes;
    ++queued_puts_;
  }
  work_cv_.notify_one();
  return Enqueue::kQueued;
}

bool DiskBlockStore::needs_write_locked(const IndexKey& id) const {
  if (pending_.count(id)) return false;
  auto it = index_.find(id);
  if (it == index_.end()) return true;
  // Stored: a fresh copy only when the ring's head is about to reach it (more than 3/4 of the ring
  // written after it); the quota itself takes the least recently used, not the oldest written.
  const uint64_t off = it->second;
  const uint64_t written_since = head_ >= off ? head_ - off : head_ + ring_bytes_ - off;
  return written_since > ring_bytes_ / 4 * 3;
}

bool DiskBlockStore::contains(const BlockKey& key, BlockKind kind) const {
  const IndexKey id{key, kind};
  std::lock_guard lock(mu_);
  return pending_.count(id) != 0 || index_.count(id) != 0;
}

Result<std::vector<uint8_t>> DiskBlockStore::get(const BlockKey& key, BlockKind kind, std::span<const int32_t> tokens) {
  const IndexKey id{key, kind};
  uint64_t offset = 0, bytes = 0, seq = 0;
  {
    std::unique_lock lock(mu_);
    if (auto pit = pending_.find(id); pit != pending_.end()) {
      std::shared_ptr<Pending> p = pit->second;  // immutable once queued
      lock.unlock();
      if (!std::equal(p->tokens.begin(), p->tokens.end(), tokens.begin(), tokens.end()))
        return make_error("disk cache: the block holds other token ids (hash collision)");
      lock.lock();
      ++stats_.records_read;
      if (kind == BlockKind::kState) ++stats_.states_read;
      lock.unlock();
      return p->payload;
    }
    auto it = index_.find(id);
    if (it == index_.end()) return make_error("disk cache: no such block");
    const Entry& e = ring_.at(it->second);
    SPLASH_CHECK(e.durable);
    offset = it->second;
    bytes = e.bytes;
    seq = e.seq;
  }
  std::vector<uint8_t> buf(bytes);
  Status st = disk::read_at(fd_.get(), buf, offset, file_name_);
  std::string why;
  std::optional<disk::RecordHeader> header;
  if (!st.ok()) {
    why = st.error_message();
  } else {
    auto h = disk::verify_record_self(buf);
    if (!h.ok()) why = h.error_message();
    else if (!(h->info.key == key) || h->info.kind != kind || h->seq != seq) why = "the record was overwritten";
    else header = *h;
  }
  if (!header) {
    std::lock_guard lock(mu_);
    auto it = index_.find(id);
    if (it != index_.end() && it->second == offset && ring_.at(offset).seq == seq) {
      // Still indexed, so the bytes on disk are bad (not evicted meanwhile): drop the record (and
      // what hangs off it); the writer punches them out once nothing else has been placed there.
      evict_locked(offset, to_punch_, /*bad=*/true);
      log_debug("disk cache: dropped a bad record at ", offset, " of ", file_name_, ": ", why);
      work_cv_.notify_one();
    }
    return make_error("disk cache: ", why);
  }
  if (header->n_block_tokens != tokens.size() ||
      std::memcmp(buf.data() + disk::kRecordHeaderBytes, tokens.data(), tokens.size_bytes()) != 0)
    return make_error("disk cache: the block holds other token ids (hash collision)");
  const uint8_t* payload = buf.data() + disk::kRecordHeaderBytes + tokens.size_bytes();
  std::vector<uint8_t> out(payload, payload + header->payload_bytes);
  std::lock_guard lock(mu_);
  ++stats_.records_read;
  if (kind == BlockKind::kState) ++stats_.states_read;
  stats_.bytes_read += static_cast<int64_t>(bytes);
  return out;
}

uint64_t DiskBlockStore::read_async(std::vector<ReadRequest> requests) {
  auto job = std::make_shared<ReadJob>();
  job->requests = std::move(requests);
  {
    std::lock_guard lock(read_mu_);
    job->ticket = ++next_read_ticket_;
    read_jobs_.emplace(job->ticket, job);
    read_queue_.push_back(job);
  }
  read_cv_.notify_one();
  return job->ticket;
}

std::optional<BlockStore::ReadResults> DiskBlockStore::take_reads(uint64_t ticket) {
  std::lock_guard lock(read_mu_);
  auto it = read_jobs_.find(ticket);
  if (it == read_jobs_.end()) return ReadResults{};
  if (!it->second->done) return std::nullopt;
  ReadResults out = std::move(it->second->results);
  read_jobs_.erase(it);
  return out;
}

void DiskBlockStore::pause_reader_for_test(bool paused) {
  {
    std::lock_guard lock(read_mu_);
    read_paused_ = paused;
  }
  read_cv_.notify_all();
}

void DiskBlockStore::reader_loop() {
  std::unique_lock lock(read_mu_);
  while (true) {
    read_cv_.wait(lock, [&] { return read_stop_ || (!read_paused_ && !read_queue_.empty()); });
    if (read_stop_) break;
    std::shared_ptr<ReadJob> job = std::move(read_queue_.front());
    read_queue_.pop_front();
    lock.unlock();
    ReadResults results;
    results.reserve(job->requests.size());
    for (const ReadRequest& r : job->requests) results.push_back(get(r.key, r.kind, r.tokens));
    lock.lock();
    job->results = std::move(results);
    job->done = true;
  }
}

void DiskBlockStore::flush() {
  {
    std::unique_lock lock(mu_);
    done_cv_.wait(lock, [&] { return (queue_.empty() || disabled_) && in_flight_ == 0; });
  }
}

void DiskBlockStore::sync() {
  flush();
  bool disabled = false;
  {
    std::lock_guard lock(mu_);
    disabled = disabled_;
  }
  if (!disabled) ::fdatasync(fd_.get());
}

BlockStoreStats DiskBlockStore::stats() const {
  std::lock_guard lock(mu_);
  BlockStoreStats s = stats_;
  s.pending_records = static_cast<int64_t>(pending_.size());
  s.redundant_records = static_cast<int64_t>(redundant_.size() + garbage_.size());
  s.redundant_bytes = static_cast<int64_t>(redundant_bytes_);
  s.written_last_hour = written_last_hour_locked();
  s.probation = probation_;
  s.file_bytes = disk::file_allocated_bytes(fd_.get());
  return s;
}

uint64_t DiskBlockStore::queued_puts() const {
  std::lock_guard lock(mu_);
  return queued_puts_;
}

uint64_t DiskBlockStore::finished_puts() const {
  std::lock_guard lock(mu_);
  return finished_puts_;
}

void DiskBlockStore::pause_writer_for_test(bool paused) {
  {
    std::lock_guard lock(mu_);
    paused_ = paused;
  }
  work_cv_.notify_all();
}

// --- writer --------------------------------------------------------------------------------------

void DiskBlockStore::writer_loop() {
  std::unique_lock lock(mu_);
  while (true) {
    auto has_work = [&] { return stop_ || (!paused_ && (!queue_.empty() || !to_punch_.empty())); };
    if (probation_ && std::chrono::steady_clock::now() >= probation_until_) end_probation_locked();
    if (!probation_) {
      work_cv_.wait(lock, has_work);
    } else if (!work_cv_.wait_until(lock, probation_until_, has_work)) {
      continue;  // the probation's end
    }
    if (stop_ && queue_.empty() && to_punch_.empty()) break;
    // A batch: consecutive records up to kBatchRecords / kBatchBytes, and never more than half the
    // quota, so placing a record never evicts another of the same batch.
    std::vector<std::shared_ptr<Pending>> batch;
    uint64_t batch_bytes = 0;
    const uint64_t cap = std::min(kBatchBytes, static_cast<uint64_t>(options_.quota_bytes) / 2);
    while (!queue_.empty() && batch.size() < kBatchRecords &&
           (batch.empty() || batch_bytes + queue_.front()->bytes <= cap)) {
      batch_bytes += queue_.front()->bytes;
      queued_bytes_ -= queue_.front()->bytes;
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    in_flight_ = 1;
    lock.unlock();
    write_batch(batch);
    lock.lock();
    in_flight_ = 0;
    finished_puts_ += batch.size();
    done_cv_.notify_all();
  }
  done_cv_.notify_all();
}

void DiskBlockStore::write_batch(std::vector<std::shared_ptr<Pending>>& batch) {
  struct Placed {
    Pending* p;
    uint64_t offset, seq;
  };
  std::vector<Placed> placed;
  std::vector<std::pair<uint64_t, uint64_t>> freed;
  {
    std::lock_guard lock(mu_);
    // Bad records get() found: punched unless the ring has placed something over them since.
    for (const auto& [o, n] : to_punch_) {
      auto it = ring_.lower_bound(o);
      bool covered = it != ring_.end() && it->first < o + n;
      if (it != ring_.begin()) {
        auto prev = std::prev(it);
        covered = covered || prev->first + prev->second.bytes > o;
      }
      if (!covered) freed.emplace_back(o, n);
    }
    to_punch_.clear();
    for (auto& p : batch) {
      const IndexKey id{p->info.key, p->info.kind};
      uint64_t offset = 0;
      const uint64_t seq = next_seq_++;
      const int64_t yields = stats_.copies_yielded + stats_.copies_paused;
      if (disabled_ || !place_locked(p->info, seq, p->bytes, offset, freed)) {
        if (stats_.copies_yielded + stats_.copies_paused == yields) ++stats_.writes_dropped;
        pending_.erase(id);
        continue;
      }
      placed.push_back({p.get(), offset, seq});
    }
  }
  // Runs of consecutive records, each encoded into one buffer and written with one pwrite.
  std::vector<std::pair<uint64_t, std::vector<uint8_t>>> runs;
  for (const Placed& pl : placed) {
    if (runs.empty() || runs.back().first + runs.back().second.size() != pl.offset) runs.emplace_back(pl.offset, std::vector<uint8_t>{});
    std::vector<uint8_t>& buf = runs.back().second;
    const size_t at = buf.size();
    buf.resize(at + pl.p->bytes);
    disk::encode_record(pl.p->info, pl.seq, pl.p->tokens, pl.p->payload, std::span<uint8_t>(buf).subspan(at, pl.p->bytes));
  }
  // Return the blocks of evicted records, except where this batch writes anyway.
  std::vector<std::pair<uint64_t, uint64_t>> writes;
  for (const auto& [o, b] : runs) writes.emplace_back(o, b.size());
  std::sort(writes.begin(), writes.end());
  std::vector<std::pair<uint64_t, uint64_t>> holes;
  for (const auto& [o, n] : freed) subtract_ranges(o, n, writes, holes);
  if (punch_) {
    for (const auto& [o, n] : holes) {
      if (Status st = disk::punch_hole(fd_.get(), o, n, file_name_); !st.ok()) {
        log_warn("SSD cache: ", st.error_message(), "; records are overwritten in place from now on");
        std::lock_guard lock(mu_);
        punch_ = false;
        break;
      }
    }
  }
  Status st;
  for (const auto& [o, b] : runs) {
    st = disk::write_at(fd_.get(), b, o, file_name_);
    if (!st.ok()) break;
  }
  if (!st.ok()) disable(st.error_message());
  std::lock_guard lock(mu_);
  for (const Placed& pl : placed) {
    pending_.erase(IndexKey{pl.p->info.key, pl.p->info.kind});
    auto it = ring_.find(pl.offset);
    SPLASH_CHECK(it != ring_.end() && it->second.seq == pl.seq);
    it->second.durable = true;
    if (st.ok()) {
      ++stats_.records_written;
      if (pl.p->info.kind == BlockKind::kState) ++stats_.states_written;
      stats_.bytes_written += static_cast<int64_t>(pl.p->bytes);
      note_written_locked(static_cast<int64_t>(pl.p->bytes));
    }
  }
  if (!st.ok()) {
    // Not written: out of the index again (dropped writes, not evictions).
    stats_.writes_dropped += static_cast<int64_t>(placed.size());
    const int64_t evictions = stats_.evictions;
    std::vector<std::pair<uint64_t, uint64_t>> unused;
    for (const Placed& pl : placed) evict_locked(pl.offset, unused);
    stats_.evictions = evictions;
  }
}

bool DiskBlockStore::copy_fits_locked(uint64_t bytes) const {
  // The records in the way (from the head to the ring's end when the record does not fit before
  // it, then from the start) must all be written and redundant; they free what they hold.
  uint64_t in_way = 0;
  auto way_ok = [&](uint64_t from, uint64_t to) {
    auto it = ring_.lower_bound(from);
    if (it != ring_.begin() && std::prev(it)->first + std::prev(it)->second.bytes > from) it = std::prev(it);
    for (; it != ring_.end() && it->first < to; ++it) {
      if (!it->second.durable || !redundant_locked(it->first, it->second)) return false;
      in_way += it->second.bytes;
    }
    return true;
  };
  uint64_t head = head_;
  std::vector<std::pair<uint64_t, uint64_t>> way;
  if (head + bytes > ring_bytes_) {
    if (!way_ok(head, ring_bytes_)) return false;
    way.emplace_back(head, ring_bytes_);
    head = 0;
  }
  if (!way_ok(head, head + bytes)) return false;
  way.emplace_back(head, head + bytes);
  const uint64_t quota = static_cast<uint64_t>(options_.quota_bytes);
  const uint64_t used = static_cast<uint64_t>(stats_.bytes_used) - in_way;
  if (used + bytes <= quota) return true;
  // The quota: written redundant records elsewhere must free the rest.
  const uint64_t need = used + bytes - quota;
  uint64_t avail = 0;
  for (const std::set<uint64_t>* set : {&garbage_, &redundant_}) {
    for (uint64_t off : *set) {
      const bool ahead = std::any_of(way.begin(), way.end(), [&](const auto& w) { return off >= w.first && off < w.second; });
      const Entry& e = ring_.at(off);
      if (ahead || !e.durable) continue;
      avail += e.bytes;
      if (avail >= need) return true;
    }
  }
  return false;
}

bool DiskBlockStore::place_locked(const BlockInfo& info, uint64_t seq, uint64_t bytes, uint64_t& offset,
                                  std::vector<std::pair<uint64_t, uint64_t>>& freed) {
  const uint64_t quota = static_cast<uint64_t>(options_.quota_bytes);
  if (bytes > quota || bytes > ring_bytes_) return false;
  const bool copy = resident_.count(IndexKey{info.key, info.kind}) != 0;
  if (copy) {
    // A second copy of what RAM holds: never at the price of a sole copy, and not above the hourly limit.
    if (written_last_hour_locked() > options_.copy_limit_per_hour) {
      ++stats_.copies_paused;
      return false;
    }
    if (!copy_fits_locked(bytes)) {
      ++stats_.copies_yielded;
      return false;
    }
  }
  // Evictions may cascade along chains, so every step looks the ring up again.
  if (head_ + bytes > ring_bytes_) {
    // The ring's end is too short: the records there are the oldest, and go.
    for (auto it = ring_.lower_bound(head_); it != ring_.end(); it = ring_.lower_bound(head_))
      evict_locked(it->first, freed);
    head_ = 0;
  }
  if (auto it = ring_.lower_bound(head_); it != ring_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second.bytes > head_) evict_locked(prev->first, freed);
  }
  for (auto it = ring_.lower_bound(head_); it != ring_.end() && it->first < head_ + bytes; it = ring_.lower_bound(head_))
    evict_locked(it->first, freed);
  // The quota: superseded copies first, then the least recently used sole record, then copies of
  // blocks RAM holds (oldest written first), which would have to be written again when RAM lets
  // the block go. A copy never takes a sole record. Records of the current batch are not written
  // yet and never go.
  while (static_cast<uint64_t>(stats_.bytes_used) + bytes > quota) {
    std::optional<uint64_t> victim;
    auto pick = [&](std::set<uint64_t>::const_iterator it, std::set<uint64_t>::const_iterator end) {
      for (; it != end && !victim; ++it)
        if (ring_.at(*it).durable) victim = *it;
    };
    pick(garbage_.cbegin(), garbage_.cend());
    if (!copy)
      for (auto it = sole_lru_.begin(); it != sole_lru_.end() && !victim; ++it)
        if (ring_.at(it->second).durable) victim = it->second;
    const auto from = redundant_.lower_bound(head_ + bytes);
    pick(from, redundant_.cend());
    pick(redundant_.cbegin(), from);
    if (!victim) {
      auto it = ring_.lower_bound(head_ + bytes);
      if (it == ring_.end()) it = ring_.begin();
      SPLASH_CHECK(it != ring_.end());
      victim = it->first;
    }
    evict_locked(*victim, freed);
  }
  offset = head_;
  use_bytes_ += bytes;
  insert_locked(offset, Entry{IndexKey{info.key, info.kind}, info.parent, seq, bytes, false});
  head_ += bytes;
  return true;
}

void DiskBlockStore::insert_locked(uint64_t offset, const Entry& e) {
  auto [slot, placed] = ring_.emplace(offset, e);
  slot->second.last_use = use_bytes_;  // the write is its last use so far
  auto [ix, added] = index_.try_emplace(e.id, offset);
  const uint64_t old = ix->second;
  ix->second = offset;
  if (!added) classify_locked(old);  // a fresher copy: the old one is garbage now, the first to go
  classify_locked(offset);
  if (e.id.kind == BlockKind::kKvPage) children_[e.parent].insert(e.id.key);
  (e.id.kind == BlockKind::kKvPage ? stats_.kv_records : stats_.state_records) += 1;
  if (e.id.kind == BlockKind::kState) stats_.state_bytes += static_cast<int64_t>(e.bytes);
  ++stats_.records;
  stats_.bytes_used += static_cast<int64_t>(e.bytes);
}

void DiskBlockStore::evict_locked(uint64_t offset, std::vector<std::pair<uint64_t, uint64_t>>& freed, bool bad) {
  std::vector<uint64_t> todo{offset};
  bool first = true;
  while (!todo.empty()) {
    auto it = ring_.find(todo.back());
    todo.pop_back();
    if (it == ring_.end()) continue;
    // Placement only evicts records written before the current batch (a batch is at most half the
    // quota); cascades leave the batch's own records alone.
    SPLASH_CHECK(it->second.durable);
    const Entry e = it->second;
    (e.id.kind == BlockKind::kKvPage ? stats_.kv_records : stats_.state_records) -= 1;
    if (e.id.kind == BlockKind::kState) stats_.state_bytes -= static_cast<int64_t>(e.bytes);
    --stats_.records;
    stats_.bytes_used -= static_cast<int64_t>(e.bytes);
    if (bad && first) ++stats_.read_failures;
    else ++stats_.evictions;
    first = false;
    const uint64_t off = it->first;
    freed.emplace_back(off, e.bytes);
    unfile_locked(off, e);
    ring_.erase(it);
    auto ix = index_.find(e.id);
    if (ix == index_.end() || ix->second != off) continue;  // an older copy: nothing hangs off it
    index_.erase(ix);
    if (e.id.kind != BlockKind::kKvPage) continue;
    if (auto sib = children_.find(e.parent); sib != children_.end()) {
      sib->second.erase(e.id.key);
      if (sib->second.empty()) children_.erase(sib);
    }
    // RAM holds the block: lookups reach what is stored under it through RAM, and RAM writes the
    // block again when it lets it go (or write-behind / the clean stop does): the chain stays.
    if (resident_.count(e.id) != 0) continue;
    auto queue_child = [&](const IndexKey& id) {
      auto c = index_.find(id);
      if (c != index_.end() && ring_.at(c->second).durable) todo.push_back(c->second);
    };
    queue_child(IndexKey{e.id.key, BlockKind::kState});
    if (auto ch = children_.find(e.id.key); ch != children_.end()) {
      for (const BlockKey& k : ch->second) queue_child(IndexKey{k, BlockKind::kKvPage});
    }
  }
}

void DiskBlockStore::disable(const std::string& why) {
  std::lock_guard lock(mu_);
  if (disabled_) return;
  disabled_ = true;
  log_warn("SSD cache: ", why, "; the disk tier stops writing (blocks already on disk are still read)");
  for (const auto& p : queue_) {
    pending_.erase(IndexKey{p->info.key, p->info.kind});
    ++stats_.writes_dropped;
  }
  finished_puts_ += queue_.size();
  queue_.clear();
  queued_bytes_ = 0;
  done_cv_.notify_all();
}

}  // namespace splash
