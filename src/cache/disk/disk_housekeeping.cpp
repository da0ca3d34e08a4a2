// DiskBlockStore housekeeping of a persistent cache (spec 5.6): the probation after an unclean exit
// and the removal of namespace folders nobody used for two weeks.
//
// Markers in the namespace folder, both written under its lock: `running` exists while a process
// uses the folder and goes at a clean stop (the destructor); `probation` exists while a process that
// found `running` left behind (an unclean exit: kill -9, a crash, a power cut) has served less than
// options.probation. A start that finds both empties the ring: the last start after an unclean exit
// died again within its probation, and the cache's content may be what kills it. `last_used` is
// rewritten at every open and clean stop; its age decides the removal of folders.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cache/disk/disk_block_store.h"
#include "core/log.h"

namespace splash {

namespace {

namespace fs = std::filesystem;

bool write_marker(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text << "\n";
  return static_cast<bool>(f);
}

bool is_namespace_name(const std::string& name) {
  if (name.size() != 32) return false;
  for (char c : name)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

Status DiskBlockStore::start_housekeeping() {
  const std::string running = ns_dir_ + "/running", probation = ns_dir_ + "/probation";
  std::error_code ec;
  housekeeping_.unclean_exit = fs::exists(running, ec);
  if (housekeeping_.unclean_exit && fs::exists(probation, ec)) {
    // Died again within its probation: start empty (the ring goes before it is opened).
    housekeeping_.emptied = true;
    if (::unlink(file_name_.c_str()) != 0 && errno != ENOENT)
      return make_error("cannot empty the persistent cache ", file_name_, ": ", std::strerror(errno));
    fs::remove(probation, ec);
  }
  if (!write_marker(running, str_cat("pid ", ::getpid())))
    return make_error("cannot write ", running);
  if (housekeeping_.unclean_exit && !housekeeping_.emptied && options_.probation.count() > 0) {
    if (!write_marker(probation, str_cat("pid ", ::getpid())))
      return make_error("cannot write ", probation);
    probation_ = true;
    probation_until_ = std::chrono::steady_clock::now() + options_.probation;
  }
  write_marker(ns_dir_ + "/last_used", str_cat("pid ", ::getpid()));
  remove_old_namespaces();
  return {};
}

void DiskBlockStore::remove_old_namespaces() {
  if (options_.unused_namespace_age.count() <= 0) return;
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (const fs::directory_entry& d : fs::directory_iterator(options_.dir, ec)) {
    const std::string name = d.path().filename().string();
    if (!d.is_directory(ec) || !is_namespace_name(name) || d.path().string() == ns_dir_) continue;
    // Its last use: last_used, else the folder itself.
    auto used = fs::last_write_time(d.path() / "last_used", ec);
    if (ec) used = fs::last_write_time(d.path(), ec);
    if (ec || now - used < options_.unused_namespace_age) continue;
    // Another process may own it (a server of another model that started long ago): leave it.
    disk::DirLock lock;
    std::string error;
    if (disk::DirLock::try_lock((d.path() / "lock").string(), std::chrono::milliseconds(0), lock, error) !=
        disk::DirLock::Outcome::kLocked)
      continue;
    int64_t bytes = 0;
    for (const fs::directory_entry& f : fs::directory_iterator(d.path(), ec)) {
      struct stat st {};
      if (::stat(f.path().c_str(), &st) == 0) bytes += static_cast<int64_t>(st.st_blocks) * 512;
    }
    fs::remove_all(d.path(), ec);
    if (ec) {
      log_warn("SSD cache: cannot remove the unused namespace folder ", d.path().string(), ": ", ec.message());
      continue;
    }
    ++housekeeping_.removed_namespaces;
    housekeeping_.removed_bytes += bytes;
  }
}

void DiskBlockStore::end_probation_locked() {
  probation_ = false;
  std::error_code ec;
  fs::remove(ns_dir_ + "/probation", ec);
  log_info("Persistent cache ", ns_dir_, ": probation over, the cache is trusted again");
}

bool DiskBlockStore::on_probation() const {
  std::lock_guard lock(mu_);
  return probation_;
}

}  // namespace splash
