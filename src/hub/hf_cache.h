// The Hugging Face cache layout, as huggingface_hub writes it, so files other tools downloaded are
// reused and ours are usable by them:
//   <cache>/models--<owner>--<name>/blobs/<etag>             file contents, named by ETag
//   <cache>/models--<owner>--<name>/blobs/<etag>.incomplete  a download in progress (resumed)
//   <cache>/models--<owner>--<name>/snapshots/<commit>/<file> relative symlink to ../../blobs/<etag>
//   <cache>/models--<owner>--<name>/refs/<revision>          the commit a branch or tag pointed to
//   <cache>/.locks/models--<owner>--<name>/<etag>.lock       flock()ed while a blob is written
// Not thread-safe per object; several processes are safe through the blob locks and atomic renames.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace splash::hub {

// "owner/name" -> "models--owner--name".
std::string repo_folder_name(const std::string& repo);

class RepoCache {
 public:
  RepoCache(std::string cache_dir, std::string repo);

  const std::string& repo() const { return repo_; }
  std::string repo_dir() const;
  std::string blob_path(const std::string& etag) const;
  std::string incomplete_path(const std::string& etag) const;
  std::string lock_path(const std::string& etag) const;
  std::string snapshot_dir(const std::string& commit) const;
  std::string snapshot_path(const std::string& commit, const std::string& file) const;

  // The commit `revision` stands for in the cache: itself when it is a 40-hex commit with a snapshot
  // folder, else the content of refs/<revision>; nullopt when neither is there.
  std::optional<std::string> cached_commit(const std::string& revision) const;
  // Writes refs/<revision> = commit atomically (no-op for a revision that is itself the commit).
  Status write_ref(const std::string& revision, const std::string& commit) const;
  // True when snapshots/<commit>/<file> exists and resolves to a regular file.
  bool has_snapshot_file(const std::string& commit, const std::string& file) const;
  // Links snapshots/<commit>/<file> to blobs/<etag> with a relative symlink (replacing a stale one).
  Status link_snapshot(const std::string& commit, const std::string& file, const std::string& etag) const;
  // Every regular file under snapshots/<commit>, relative paths, sorted.
  std::vector<std::string> snapshot_files(const std::string& commit) const;

 private:
  std::string cache_dir_, repo_;
};

}  // namespace splash::hub
