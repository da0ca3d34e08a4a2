// DiskBlockStore: the persistent directory (namespace folder, lock, rescan and take-back) and the
// disk tier `splash serve` builds from its flags.
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <unordered_map>
#include <unordered_set>

#include "cache/disk/disk_block_store.h"
#include "cache/disk/record.h"
#include "core/log.h"

namespace splash {

namespace {

std::string key_hex(const BlockKey& k) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016" PRIx64 "%016" PRIx64, k.hi, k.lo);
  return buf;
}

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

constexpr size_t kKvPageTokensForState = 32;  // a state record carries its block's 32 token ids

struct Found {
  uint64_t offset = 0;
  disk::RecordHeader h;
};

}  // namespace

Status DiskBlockStore::open_persistent(OpenFailure* failure) {
  ns_dir_ = options_.dir + "/" + key_hex(root_);
  SPLASH_TRY_STATUS(disk::make_directories(ns_dir_, 0700));
  std::string error;
  switch (disk::DirLock::try_lock(ns_dir_ + "/lock", options_.lock_wait, lock_, error)) {
    case disk::DirLock::Outcome::kLocked:
      break;
    case disk::DirLock::Outcome::kBusy:
      if (failure) *failure = OpenFailure::kBusy;
      return make_error("the persistent cache ", ns_dir_, " is in use by another Splash server");
    case disk::DirLock::Outcome::kError:
      return make_error(error);
  }
  {
    // What the folder holds, for people: the namespace's description (model layout, KV geometry).
    std::ofstream f(ns_dir_ + "/namespace.txt", std::ios::trunc);
    f << "Splash prefix cache (record format " << disk::kRecordFormat << ")\nnamespace " << key_hex(root_) << "\n"
      << options_.namespace_description << "\n";
    if (!f) return make_error("cannot write ", ns_dir_, "/namespace.txt");
  }
  file_name_ = ns_dir_ + "/blocks.ring";
  SPLASH_TRY_STATUS(start_housekeeping());
  SPLASH_TRY(fd_, disk::open_file(file_name_));
  punch_ = disk::punch_hole_supported(ns_dir_);
  const uint64_t quota = static_cast<uint64_t>(options_.quota_bytes);
  ring_bytes_ = (punch_ ? 2 * quota : quota) / disk::kRecordAlign * disk::kRecordAlign;
  return rescan();
}

// Takes back the newest copy of every verified record, the oldest out while over the quota (it may
// have been lowered), then keeps those whose chain reaches the namespace root; punches the rest.
Status DiskBlockStore::rescan() {
  const int fd = fd_.get();
  const uint64_t size = static_cast<uint64_t>(disk::file_size(fd));
  const uint64_t limit = std::min(size, ring_bytes_);
  std::vector<Found> found;
  std::vector<std::pair<uint64_t, uint64_t>> drop;  // ranges to punch
  std::vector<uint8_t> buf;
  // Every record skipped is counted, whatever is wrong with it: a header that fails its checks but
  // still looks like one (a flipped byte, a destroyed magic), a record cut short or failing its
  // checksum, and data where a record should start (after a record or a hole) that is no record.
  // That last one only where holes are punched: overwriting in place leaves stale tails of evicted
  // records behind the head, which are not damage. Zero blocks never count (unwritten space).
  int64_t bad = 0;
  uint64_t bad_bytes = 0;  // non-zero blocks skipped, for the log line
  bool at_record_start = true;
  uint64_t p = 0;
  while (p + disk::kRecordAlign <= limit) {
    const int64_t d = disk::next_data(fd, p);
    if (d < 0 || static_cast<uint64_t>(d) >= limit) break;
    const uint64_t q = static_cast<uint64_t>(d) / disk::kRecordAlign * disk::kRecordAlign;
    if (q > p) at_record_start = true;  // a hole: whatever follows was written as a record start
    p = q;
    buf.resize(disk::kRecordAlign);
    SPLASH_TRY(size_t n, disk::read_some_at(fd, buf, p, file_name_));
    const std::span<const uint8_t> block = std::span<const uint8_t>(buf).first(n);
    auto h = disk::parse_record_header(block);
    if (!h || p + h->record_bytes > limit) {
      const bool zero = std::all_of(block.begin(), block.end(), [](uint8_t b) { return b == 0; });
      if (!zero) {
        if (h || disk::looks_like_record_header(block) || (at_record_start && punch_)) ++bad;
        bad_bytes += n;
        at_record_start = false;  // the blocks after it are that record's, until a header or a hole
      }
      p += disk::kRecordAlign;
      continue;
    }
    buf.resize(h->record_bytes);
    SPLASH_TRY(size_t m, disk::read_some_at(fd, std::span<uint8_t>(buf).subspan(n), p + n, file_name_));
    auto v = disk::verify_record_self(std::span<const uint8_t>(buf).first(n + m));
    if (!v.ok()) {
      // A torn or damaged record (kill -9 in the middle of a write): skip its first block only,
      // records written after it may follow inside its extent.
      ++bad;
      bad_bytes += disk::kRecordAlign;
      at_record_start = false;
      drop.emplace_back(p, disk::kRecordAlign);
      p += disk::kRecordAlign;
      continue;
    }
    found.push_back({p, *h});
    p += h->record_bytes;
    at_record_start = true;
  }

  // Newest copy of each (key, kind).
  std::unordered_map<IndexKey, size_t, IndexKeyHash> newest;
  std::vector<bool> keep(found.size(), true);
  for (size_t i = 0; i < found.size(); ++i) {
    const IndexKey id{found[i].h.info.key, found[i].h.info.kind};
    auto [it, fresh] = newest.emplace(id, i);
    if (!fresh) {
      size_t& cur = it->second;
      if (found[cur].h.seq < found[i].h.seq) {
        keep[cur] = false;
        cur = i;
      } else {
        keep[i] = false;
      }
    }
  }
  // Oldest first out until the quota holds (the quota may have been lowered since).
  std::vector<size_t> by_age;
  uint64_t used = 0;
  for (size_t i = 0; i < found.size(); ++i) {
    if (!keep[i]) continue;
    by_age.push_back(i);
    used += found[i].h.record_bytes;
  }
  std::sort(by_age.begin(), by_age.end(), [&](size_t a, size_t b) { return found[a].h.seq < found[b].h.seq; });
  for (size_t j = 0; j < by_age.size() && used > static_cast<uint64_t>(options_.quota_bytes); ++j) {
    keep[by_age[j]] = false;
    used -= found[by_age[j]].h.record_bytes;
    ++stats_.evictions;
  }

  // Chains: a KV block is reachable when its parent is the root or a reachable KV block; a state
  // when the KV block of its own key is.
  std::unordered_map<BlockKey, BlockKey, BlockKeyHash> parent_of;
  for (size_t i = 0; i < found.size(); ++i)
    if (keep[i] && found[i].h.info.kind == BlockKind::kKvPage) parent_of[found[i].h.info.key] = found[i].h.info.parent;
  std::unordered_map<BlockKey, bool, BlockKeyHash> reachable;
  reachable[root_] = true;
  auto is_reachable = [&](const BlockKey& start) {
    std::vector<BlockKey> path;
    BlockKey k = start;
    bool result = false;
    while (true) {
      if (auto r = reachable.find(k); r != reachable.end()) {
        result = r->second;
        break;
      }
      auto par = parent_of.find(k);
      if (par == parent_of.end() || path.size() > parent_of.size()) break;  // missing link (or a cycle)
      path.push_back(k);
      k = par->second;
    }
    for (const BlockKey& q : path) reachable[q] = result;
    return result;
  };
  int64_t left_behind = 0;
  for (size_t i = 0; i < found.size(); ++i) {
    if (!keep[i]) continue;
    if (!is_reachable(found[i].h.info.key)) {
      keep[i] = false;
      ++left_behind;
    }
  }
  std::unordered_set<BlockKey, BlockKeyHash> has_child;
  uint64_t max_seq = 0;
  for (size_t i = 0; i < found.size(); ++i) {
    const Found& f = found[i];
    if (!keep[i]) {
      drop.emplace_back(f.offset, f.h.record_bytes);
      continue;
    }
    const IndexKey id{f.h.info.key, f.h.info.kind};
    insert_locked(f.offset, Entry{id, f.h.info.parent, f.h.seq, f.h.record_bytes, true});
    if (id.kind == BlockKind::kKvPage) {
      ++stats_.restored_kv_blocks;
      has_child.insert(f.h.info.parent);
    } else {
      ++stats_.restored_states;
    }
    if (f.h.seq >= max_seq) {
      max_seq = f.h.seq;
      head_ = f.offset + f.h.record_bytes;
    }
  }
  for (const auto& [off, e] : ring_)
    if (e.id.kind == BlockKind::kKvPage && !has_child.count(e.id.key)) ++stats_.restored_points;
  // The use clock in write order (what the previous process knew of later uses is gone).
  std::vector<std::pair<uint64_t, uint64_t>> by_seq;
  for (const auto& [off, e] : ring_) by_seq.emplace_back(e.seq, off);
  std::sort(by_seq.begin(), by_seq.end());
  for (const auto& [seq, off] : by_seq) {
    Entry& e = ring_.at(off);
    unfile_locked(off, e);
    use_bytes_ += e.bytes;
    e.last_use = use_bytes_;
    classify_locked(off);
  }
  stats_.restored_records = stats_.records;
  stats_.restored_bytes = stats_.bytes_used;
  stats_.left_behind = left_behind;
  stats_.read_failures += bad;  // damaged records found at start count as misses
  next_seq_ = max_seq + 1;
  if (head_ >= ring_bytes_) head_ = 0;

  if (punch_) {
    for (const auto& [o, n] : drop) {
      if (Status st = disk::punch_hole(fd, o, n, file_name_); !st.ok()) {
        punch_ = false;
        break;
      }
    }
  }
  if (size > ring_bytes_ && ::ftruncate(fd, static_cast<off_t>(ring_bytes_)) != 0)
    return make_error("cannot truncate ", file_name_, " to the quota's ring");
  if (bad > 0)
    log_info("SSD cache: ", bad, " damaged or partial records (", (bad_bytes + 1023) / 1024, " KiB unreadable) in ",
             file_name_, " skipped");
  return {};
}

// --- the serve tier ------------------------------------------------------------------------------

std::string default_cache_dir(const char* xdg_cache_home, const char* home) {
  if (xdg_cache_home && *xdg_cache_home == '/') return std::string(xdg_cache_home) + "/splash/prefix-cache";
  return std::string(home && *home ? home : "/tmp") + "/.cache/splash/prefix-cache";
}

Result<DiskTier> open_disk_tier(const DiskTierConfig& config) {
  DiskTier tier;
  if (config.quota_bytes <= 0) return tier;
  if (config.state_bytes > 0) {
    const uint64_t state_record = disk::record_bytes(kKvPageTokensForState, static_cast<size_t>(config.state_bytes));
    if (state_record > static_cast<uint64_t>(config.quota_bytes)) {
      tier.lines.push_back(str_cat("SSD cache: the quota (", mib(config.quota_bytes), ") is smaller than one restore state (",
                                   mib(static_cast<int64_t>(state_record)), "); the SSD tier is off."));
      return tier;
    }
  }
  DiskStoreOptions o;
  o.quota_bytes = config.quota_bytes;
  o.namespace_description = config.namespace_description;
  if (config.persistent) {
    o.persistent = true;
    o.dir = config.cache_dir;
    o.lock_wait = config.lock_wait;
    DiskBlockStore::OpenFailure failure = DiskBlockStore::OpenFailure::kNone;
    auto s = DiskBlockStore::open(o, &failure);
    if (s.ok()) {
      const BlockStoreStats st = (*s)->stats();
      const DiskBlockStore::Housekeeping& h = (*s)->housekeeping();
      if (h.removed_namespaces > 0)
        tier.lines.push_back(str_cat("Persistent cache ", config.cache_dir, ": removed ", h.removed_namespaces,
                                     " namespace folder(s) unused for ", o.unused_namespace_age.count() / 24,
                                     " days (", mib(h.removed_bytes), ")."));
      if (h.emptied)
        tier.lines.push_back(str_cat("Persistent cache ", (*s)->directory(),
                                     ": the previous start, after an unclean exit, did not survive its probation;"
                                     " the cache was emptied."));
      else if (h.unclean_exit)
        tier.lines.push_back(str_cat("Persistent cache ", (*s)->directory(),
                                     ": the last run did not stop cleanly; serving on probation for ",
                                     o.probation.count() / 1000.0,
                                     " s (if this process dies within it, the next start empties the cache)."));
      tier.lines.push_back(str_cat("Persistent cache ", (*s)->directory(), ": took back ", st.restored_points,
                                   " restore points over ", st.restored_kv_blocks, " KV blocks (",
                                   mib(st.restored_bytes), "); left ", st.left_behind, " copies behind."));
      tier.store = std::move(*s);
      return tier;
    }
    if (failure != DiskBlockStore::OpenFailure::kBusy) return s.error();
    log_warn(s.error_message(), " (waited ", config.lock_wait.count() / 1000.0,
             " s); this server uses a temporary disk cache instead and leaves that directory alone");
    o.persistent = false;
  }
  o.dir = config.temp_dir.empty() ? "/tmp" : config.temp_dir;
  SPLASH_TRY(tier.store, DiskBlockStore::open(o));
  return tier;
}

}  // namespace splash
