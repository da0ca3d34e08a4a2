// The few file-system calls the SSD tier needs, each returning a Result whose message names the
// path and the system error: unlinked temporary files (O_TMPFILE), whole reads and writes at an
// offset, hole punching, allocated size, and an exclusive directory lock (flock).
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>

#include "core/result.h"

namespace splash::disk {

// An owned file descriptor (move-only; closed by the destructor).
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }

 private:
  int fd_ = -1;
};

// A file in `dir` with no name: O_TMPFILE, or where the file system lacks it a
// `splash-cache-XXXXXX` file unlinked at once. Either way nothing is left behind, even after kill -9.
Result<Fd> open_unlinked_file(const std::string& dir);
// Opens (creating, mode 0600) a regular file for reading and writing.
Result<Fd> open_file(const std::string& path);
// mkdir -p with the given mode for the directories it creates.
Status make_directories(const std::string& path, unsigned mode);

Status write_at(int fd, std::span<const uint8_t> data, uint64_t offset, const std::string& what);
// Reads exactly data.size() bytes; a short read (end of file) is an error ("truncated").
Status read_at(int fd, std::span<uint8_t> data, uint64_t offset, const std::string& what);
// Reads up to data.size() bytes; returns how many (fewer only at the end of the file).
Result<size_t> read_some_at(int fd, std::span<uint8_t> data, uint64_t offset, const std::string& what);

// fallocate(PUNCH_HOLE | KEEP_SIZE): the range reads as zeros and its blocks return to the file system.
Status punch_hole(int fd, uint64_t offset, uint64_t length, const std::string& what);
// Whether punch_hole works on files in `dir` (tried on an unlinked scratch file).
bool punch_hole_supported(const std::string& dir);
// Bytes the file occupies on disk (st_blocks * 512) and its logical size.
int64_t file_allocated_bytes(int fd);
int64_t file_size(int fd);
// The first data byte at or after `offset` (SEEK_DATA), or -1 when only holes follow.
int64_t next_data(int fd, uint64_t offset);

// An exclusive flock on `path` (created 0600), held until destruction. try_lock waits up to `wait`
// for another holder (process or open file) to let go; kBusy when it does not.
class DirLock {
 public:
  enum class Outcome { kLocked, kBusy, kError };
  static Outcome try_lock(const std::string& path, std::chrono::milliseconds wait, DirLock& out, std::string& error);
  bool held() const { return fd_.valid(); }

 private:
  Fd fd_;
};

}  // namespace splash::disk
