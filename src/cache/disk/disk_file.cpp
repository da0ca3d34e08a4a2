#include "cache/disk/disk_file.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace splash::disk {

namespace {
std::string sys_error() { return std::strerror(errno); }
}  // namespace

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

Result<Fd> open_unlinked_file(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) return Fd(fd);
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
    return make_error("cannot create a temporary file in ", dir, ": ", sys_error());
  // File systems without O_TMPFILE: a named file unlinked before anything is written to it.
  std::string name = dir + "/splash-cache-XXXXXX";
  std::vector<char> buf(name.begin(), name.end());
  buf.push_back('\0');
  fd = ::mkostemp(buf.data(), O_CLOEXEC);
  if (fd < 0) return make_error("cannot create a temporary file in ", dir, ": ", sys_error());
  ::unlink(buf.data());
  return Fd(fd);
}

Result<Fd> open_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return make_error("cannot open ", path, ": ", sys_error());
  return Fd(fd);
}

Status make_directories(const std::string& path, unsigned mode) {
  if (path.empty()) return make_error("empty directory path");
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i < path.size() && path[i] != '/') continue;
    const std::string part = path.substr(0, i);
    if (::mkdir(part.c_str(), mode) != 0 && errno != EEXIST)
      return make_error("cannot create directory ", part, ": ", sys_error());
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return make_error(path, " is not a directory");
  return {};
}

Status write_at(int fd, std::span<const uint8_t> data, uint64_t offset, const std::string& what) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_error("cannot write ", what, ": ", sys_error());
    }
    if (n == 0) return make_error("cannot write ", what, ": no progress");
    done += static_cast<size_t>(n);
  }
  return {};
}

Result<size_t> read_some_at(int fd, std::span<uint8_t> data, uint64_t offset, const std::string& what) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::pread(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_error("cannot read ", what, ": ", sys_error());
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

Status read_at(int fd, std::span<uint8_t> data, uint64_t offset, const std::string& what) {
  SPLASH_TRY(size_t n, read_some_at(fd, data, offset, what));
  if (n != data.size()) return make_error("truncated ", what, " (", n, " of ", data.size(), " bytes at ", offset, ")");
  return {};
}

Status punch_hole(int fd, uint64_t offset, uint64_t length, const std::string& what) {
  if (length == 0) return {};
  if (::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                  static_cast<off_t>(length)) != 0)
    return make_error("cannot punch a hole in ", what, ": ", sys_error());
  return {};
}

bool punch_hole_supported(const std::string& dir) {
  auto f = open_unlinked_file(dir);
  if (!f.ok()) return false;
  std::vector<uint8_t> block(8192, 0xa5);
  if (!write_at(f->get(), block, 0, "probe").ok()) return false;
  return ::fallocate(f->get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096) == 0;
}

int64_t file_allocated_bytes(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return 0;
  return static_cast<int64_t>(st.st_blocks) * 512;
}

int64_t file_size(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return 0;
  return static_cast<int64_t>(st.st_size);
}

int64_t next_data(int fd, uint64_t offset) {
  const off_t r = ::lseek(fd, static_cast<off_t>(offset), SEEK_DATA);
  if (r < 0) return errno == ENXIO ? -1 : static_cast<int64_t>(offset);  // no SEEK_DATA: treat as data
  return static_cast<int64_t>(r);
}

DirLock::Outcome DirLock::try_lock(const std::string& path, std::chrono::milliseconds wait, DirLock& out,
                                   std::string& error) {
  auto f = open_file(path);
  if (!f.ok()) {
    error = f.error_message();
    return Outcome::kError;
  }
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (true) {
    if (::flock(f->get(), LOCK_EX | LOCK_NB) == 0) {
      out.fd_ = std::move(*f);
      return Outcome::kLocked;
    }
    if (errno != EWOULDBLOCK && errno != EINTR) {
      error = str_cat("cannot lock ", path, ": ", sys_error());
      return Outcome::kError;
    }
    if (std::chrono::steady_clock::now() >= deadline) return Outcome::kBusy;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace splash::disk
