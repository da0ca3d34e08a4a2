// One file of a repository into the Hugging Face cache: blobs/<etag>.incomplete is written (and
// resumed with a Range request when it is already there, across retries and across runs), checked
// against the expected size and hash (ETag: sha256 for LFS files, the git blob sha1 otherwise), then
// renamed into blobs/<etag> and linked from snapshots/<commit>/<file>. A flock on
// .locks/<repo>/<etag>.lock serialises processes: a second one waits, then reuses the blob.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "core/result.h"
#include "hub/hf_cache.h"
#include "hub/hub_client.h"

namespace splash::hub {

// How the hash in an ETag is checked.
enum class EtagHash { kNone, kSha256, kGitSha1 };
EtagHash etag_hash_kind(const std::string& etag);  // 64 hex: sha256; 40 hex: git blob sha1

// Incremental hashing of a file's contents for `kind` (`size` is needed by the git blob header).
class ContentHasher {
 public:
  ContentHasher(EtagHash kind, uint64_t size);
  ~ContentHasher();
  ContentHasher(const ContentHasher&) = delete;
  ContentHasher& operator=(const ContentHasher&) = delete;
  void reset();
  void update(const void* data, size_t n);
  std::string hex_digest();  // lower-case hex; "" for kNone

 private:
  EtagHash kind_;
  uint64_t size_;
  void* ctx_ = nullptr;  // EVP_MD_CTX
};

struct BlobResult {
  bool downloaded = false;  // false: the blob was already there (or another process fetched it)
  uint64_t bytes_received = 0;
};

// Makes snapshots/<commit>/<file> point at a verified blobs/<meta.etag>. `progress` receives the
// progress display (stderr), `log` the "waiting for another process" line (stdout).
Result<BlobResult> fetch_blob(HubClient& client, const RepoCache& cache, const std::string& commit,
                              const std::string& file, const FileMeta& meta, std::FILE* progress, std::FILE* log);

}  // namespace splash::hub
