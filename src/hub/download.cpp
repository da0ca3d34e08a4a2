#include "hub/download.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "hub/progress.h"

namespace splash::hub {

namespace fs = std::filesystem;

namespace {

bool all_hex(const std::string& s) {
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// Closes a descriptor on scope exit (releasing its flock).
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

Status write_all(int fd, const char* data, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return make_error("cannot write ", path, ": ", std::strerror(errno));
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return {};
}

}  // namespace

EtagHash etag_hash_kind(const std::string& etag) {
  if (etag.size() == 64 && all_hex(etag)) return EtagHash::kSha256;
  if (etag.size() == 40 && all_hex(etag)) return EtagHash::kGitSha1;
  return EtagHash::kNone;
}

ContentHasher::ContentHasher(EtagHash kind, uint64_t size) : kind_(kind), size_(size) {
  if (kind_ != EtagHash::kNone) ctx_ = EVP_MD_CTX_new();
  reset();
}

ContentHasher::~ContentHasher() {
  if (ctx_) EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_));
}

void ContentHasher::reset() {
  if (kind_ == EtagHash::kNone) return;
  auto* ctx = static_cast<EVP_MD_CTX*>(ctx_);
  EVP_DigestInit_ex(ctx, kind_ == EtagHash::kSha256 ? EVP_sha256() : EVP_sha1(), nullptr);
  if (kind_ == EtagHash::kGitSha1) {
    const std::string header = "blob " + std::to_string(size_) + std::string(1, '\0');
    EVP_DigestUpdate(ctx, header.data(), header.size());
  }
}

void ContentHasher::update(const void* data, size_t n) {
  if (kind_ != EtagHash::kNone) EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, n);
}

std::string ContentHasher::hex_digest() {
  if (kind_ == EtagHash::kNone) return "";
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), md, &len);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

Result<BlobResult> fetch_blob(HubClient& client, const RepoCache& cache, const std::string& commit,
                              const std::string& file, const FileMeta& meta, std::FILE* progress, std::FILE* log) {
  BlobResult result;
  const std::string blob = cache.blob_path(meta.etag);
  std::error_code ec;
  auto blob_ready = [&] { return fs::is_regular_file(blob, ec) && fs::file_size(blob, ec) == meta.size; };
  if (blob_ready()) {
    SPLASH_TRY_STATUS(cache.link_snapshot(commit, file, meta.etag));
    return result;
  }
  fs::create_directories(fs::path(blob).parent_path(), ec);
  fs::create_directories(fs::path(cache.lock_path(meta.etag)).parent_path(), ec);
  if (ec) return make_error("cannot create the cache folders under ", cache.repo_dir(), ": ", ec.message());

  // One writer per blob: a second process waits here, then finds the blob ready.
  Fd lock;
  lock.fd = open(cache.lock_path(meta.etag).c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock.fd < 0) return make_error("cannot open ", cache.lock_path(meta.etag), ": ", std::strerror(errno));
  if (flock(lock.fd, LOCK_EX | LOCK_NB) != 0) {
    std::fprintf(log, "Waiting for another process downloading %s from %s.\n", file.c_str(), cache.repo().c_str());
    std::fflush(log);
    while (flock(lock.fd, LOCK_EX) != 0)
      if (errno != EINTR) return make_error("cannot lock ", cache.lock_path(meta.etag), ": ", std::strerror(errno));
  }
  if (blob_ready()) {
    SPLASH_TRY_STATUS(cache.link_snapshot(commit, file, meta.etag));
    return result;
  }

  const std::string part = cache.incomplete_path(meta.etag);
  Fd out;
  out.fd = open(part.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (out.fd < 0) return make_error("cannot open ", part, ": ", std::strerror(errno));
  struct stat st {};
  fstat(out.fd, &st);
  uint64_t have = static_cast<uint64_t>(st.st_size);
  const EtagHash kind = etag_hash_kind(meta.etag);
  ContentHasher hasher(kind, meta.size);
  if (have > meta.size) {
    if (ftruncate(out.fd, 0) != 0) return make_error("cannot truncate ", part, ": ", std::strerror(errno));
    have = 0;
  } else if (have > 0 && kind != EtagHash::kNone) {
    // Resuming: the bytes already there enter the hash first.
    std::vector<char> buf(1 << 20);
    uint64_t off = 0;
    while (off < have) {
      const ssize_t r = pread(out.fd, buf.data(), std::min<uint64_t>(buf.size(), have - off), static_cast<off_t>(off));
      if (r <= 0) return make_error("cannot read ", part, ": ", std::strerror(errno));
      hasher.update(buf.data(), static_cast<size_t>(r));
      off += static_cast<uint64_t>(r);
    }
  }
  if (lseek(out.fd, static_cast<off_t>(have), SEEK_SET) < 0) return make_error("cannot seek ", part);

  Progress bar(progress, client.settings().progress_tty, file, meta.size, have);
  std::string last_error;
  Status write_status;
  for (int attempt = 0; have < meta.size && attempt < client.settings().download_attempts; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(200 * attempt));
    const uint64_t before = have;
    auto on_start = [&](bool restart) {
      if (!restart) return;
      // The server ignored the Range header: start over.
      if (ftruncate(out.fd, 0) != 0 || lseek(out.fd, 0, SEEK_SET) < 0) write_status = make_error("cannot truncate ", part);
      have = 0;
      hasher.reset();
    };
    auto sink = [&](const char* data, size_t n) {
      if (!write_status.ok()) return false;
      if (have + n > meta.size) {
        write_status = make_error(file, ": the Hub sent more than the expected ", meta.size, " bytes");
        return false;
      }
      write_status = write_all(out.fd, data, n, part);
      if (!write_status.ok()) return false;
      hasher.update(data, n);
      have += n;
      result.bytes_received += n;
      bar.update(have);
      return true;
    };
    Status st = client.download(cache.repo(), commit, file, have, on_start, sink);
    if (!write_status.ok()) {
      bar.finish(false);
      return write_status.error();
    }
    if (st.ok() && have == meta.size) break;
    last_error = st.ok() ? str_cat("the connection closed after ", have, " of ", meta.size, " bytes")
                         : st.error_message();
    const HubFailure f = client.last_failure();
    if (!st.ok() && f != HubFailure::kUnreachable && f != HubFailure::kOther) {
      bar.finish(false);
      return st.error();
    }
    if (have > before) attempt = std::max(-1, attempt - 1);  // progress made: this attempt was not wasted
  }
  bar.finish(have == meta.size);
  if (have != meta.size)
    return make_error(file, ": download incomplete (", have, " of ", meta.size, " bytes; ", last_error,
                      "); the next start resumes it");
  if (kind != EtagHash::kNone) {
    const std::string got = hasher.hex_digest();
    if (got != meta.etag) {
      fs::remove(part, ec);
      return make_error(file, ": checksum mismatch (expected ", kind == EtagHash::kSha256 ? "sha256 " : "git sha1 ",
                        meta.etag, ", got ", got, "); the partial file was removed, start again");
    }
  }
  if (fsync(out.fd) != 0) return make_error("cannot sync ", part, ": ", std::strerror(errno));
  fs::rename(part, blob, ec);
  if (ec) return make_error("cannot rename ", part, " to ", blob, ": ", ec.message());
  SPLASH_TRY_STATUS(cache.link_snapshot(commit, file, meta.etag));
  result.downloaded = true;
  return result;
}

}  // namespace splash::hub
