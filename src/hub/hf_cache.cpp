#include "hub/hf_cache.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "hub/model_ref.h"

namespace splash::hub {

namespace fs = std::filesystem;

std::string repo_folder_name(const std::string& repo) {
  std::string out = "models--";
  for (char c : repo) {
    if (c == '/') out += "--";
    else out += c;
  }
  return out;
}

RepoCache::RepoCache(std::string cache_dir, std::string repo) : cache_dir_(std::move(cache_dir)), repo_(std::move(repo)) {}

std::string RepoCache::repo_dir() const { return (fs::path(cache_dir_) / repo_folder_name(repo_)).string(); }
std::string RepoCache::blob_path(const std::string& etag) const {
  return (fs::path(repo_dir()) / "blobs" / etag).string();
}
std::string RepoCache::incomplete_path(const std::string& etag) const { return blob_path(etag) + ".incomplete"; }
std::string RepoCache::lock_path(const std::string& etag) const {
  return (fs::path(cache_dir_) / ".locks" / repo_folder_name(repo_) / (etag + ".lock")).string();
}
std::string RepoCache::snapshot_dir(const std::string& commit) const {
  return (fs::path(repo_dir()) / "snapshots" / commit).string();
}
std::string RepoCache::snapshot_path(const std::string& commit, const std::string& file) const {
  return (fs::path(snapshot_dir(commit)) / file).string();
}

std::optional<std::string> RepoCache::cached_commit(const std::string& revision) const {
  std::error_code ec;
  if (is_commit_hash(revision) && fs::is_directory(snapshot_dir(revision), ec)) return revision;
  std::ifstream in(fs::path(repo_dir()) / "refs" / revision);
  std::string commit;
  if (!(in >> commit) || !is_commit_hash(commit)) return std::nullopt;
  return commit;
}

Status RepoCache::write_ref(const std::string& revision, const std::string& commit) const {
  if (revision == commit) return {};
  const fs::path ref = fs::path(repo_dir()) / "refs" / revision;
  std::error_code ec;
  fs::create_directories(ref.parent_path(), ec);
  if (ec) return make_error("cannot create ", ref.parent_path().string(), ": ", ec.message());
  const fs::path tmp = ref.string() + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << commit;  // huggingface_hub writes the bare hash, no newline
    if (!out.flush()) return make_error("cannot write ", tmp.string());
  }
  fs::rename(tmp, ref, ec);
  if (ec) return make_error("cannot write ", ref.string(), ": ", ec.message());
  return {};
}

bool RepoCache::has_snapshot_file(const std::string& commit, const std::string& file) const {
  std::error_code ec;
  return fs::is_regular_file(snapshot_path(commit, file), ec);  // follows the symlink
}

Status RepoCache::link_snapshot(const std::string& commit, const std::string& file, const std::string& etag) const {
  const fs::path link = snapshot_path(commit, file);
  std::error_code ec;
  fs::create_directories(link.parent_path(), ec);
  if (ec) return make_error("cannot create ", link.parent_path().string(), ": ", ec.message());
  // snapshots/<commit>/<dirs...>/<file> -> ../../(../ per dir)blobs/<etag>
  fs::path target = "../..";
  for (size_t n = std::count(file.begin(), file.end(), '/'); n > 0; --n) target /= "..";
  target = target / "blobs" / etag;
  // Create under a temporary name and rename over any stale link: atomic for other readers.
  const fs::path tmp = link.string() + ".tmp" + std::to_string(getpid());
  fs::remove(tmp, ec);
  fs::create_symlink(target, tmp, ec);
  if (ec) return make_error("cannot link ", link.string(), ": ", ec.message());
  fs::rename(tmp, link, ec);
  if (ec) return make_error("cannot link ", link.string(), ": ", ec.message());
  return {};
}

std::vector<std::string> RepoCache::snapshot_files(const std::string& commit) const {
  std::vector<std::string> out;
  std::error_code ec;
  const fs::path dir = snapshot_dir(commit);
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec)) out.push_back(it->path().lexically_relative(dir).generic_string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace splash::hub
