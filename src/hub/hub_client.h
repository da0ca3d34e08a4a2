// The Hub's HTTP routes, through libcurl (the same routes huggingface_hub uses, so HF_ENDPOINT may
// point at a mirror or at the test suite's mock hub):
//   GET  {endpoint}/api/models/{repo}/revision/{rev}   -> {"sha": commit, "siblings": [{"rfilename"}]}
//   HEAD {endpoint}/{repo}/resolve/{rev}/{file}        -> X-Repo-Commit, X-Linked-Etag / ETag,
//                                                         X-Linked-Size / Content-Length (a 302 to a CDN)
//   GET  {endpoint}/{repo}/resolve/{rev}/{file}        -> the bytes; Range: bytes=N- answers 206
// HF_TOKEN goes in `Authorization: Bearer` to the endpoint only (libcurl drops it on redirects to
// another host); no message carries it. One HubClient per thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/result.h"
#include "hub/hub_settings.h"

namespace splash::hub {

// Why the last call failed, for the caller's choice between "use the cache" and "stop".
enum class HubFailure {
  kNone,
  kUnreachable,       // connection refused, DNS, timeout, TLS, 5xx: the cached copy may be used
  kAuth,              // 401 / 403: gated or private; set HF_TOKEN
  kRepoNotFound,      // 404 or X-Error-Code: RepoNotFound
  kRevisionNotFound,  // X-Error-Code: RevisionNotFound
  kEntryNotFound,     // X-Error-Code: EntryNotFound
  kOther,             // any other HTTP status or a malformed answer
};

struct RepoInfo {
  std::string commit;               // "sha"
  std::vector<std::string> files;   // siblings' rfilename
};

struct FileMeta {
  std::string commit;  // X-Repo-Commit (may be empty on mirrors)
  std::string etag;    // X-Linked-Etag, else ETag; quotes and W/ removed
  uint64_t size = 0;   // X-Linked-Size, else Content-Length
};

// Called with (bytes of the file received so far, bytes just written).
using ByteSink = std::function<bool(const char* data, size_t n)>;

class HubClient {
 public:
  explicit HubClient(HubSettings settings);

  const HubSettings& settings() const { return settings_; }
  HubFailure last_failure() const { return failure_; }

  Result<RepoInfo> repo_info(const std::string& repo, const std::string& revision);
  Result<FileMeta> file_meta(const std::string& repo, const std::string& revision, const std::string& file);
  // The whole file (small files: config.json), at most `max_bytes`.
  Result<std::string> fetch(const std::string& repo, const std::string& revision, const std::string& file,
                            uint64_t max_bytes);
  // Bytes [offset, offset + length) (fewer at the end of the file).
  Result<std::string> fetch_range(const std::string& repo, const std::string& revision, const std::string& file,
                                  uint64_t offset, uint64_t length);
  // GETs the file from `offset` (Range) and hands the body to `sink`. `*restarted` is set when the
  // server ignored the range and sent the whole file from byte 0 (the caller truncates first: `sink`
  // is then called from the start). A sink returning false aborts.
  Status download(const std::string& repo, const std::string& revision, const std::string& file, uint64_t offset,
                  const std::function<void(bool restart_from_zero)>& on_start, const ByteSink& sink);

  // {endpoint}/{repo}/resolve/{revision}/{file}, each part escaped.
  std::string resolve_url(const std::string& repo, const std::string& revision, const std::string& file) const;

 private:
  struct Reply {
    long status = 0;
    std::map<std::string, std::string> headers;  // lower-case names, last response of a redirect chain
    std::string body;
  };
  enum class Method { kGet, kHead };
  // One request. `follow` follows redirects. Returns the reply, or an error for transport failures.
  Result<Reply> request(Method method, const std::string& url, bool follow, const std::string& range,
                        uint64_t max_body, const ByteSink* sink, const std::function<void(long)>* on_status);
  Error http_error(const Reply& reply, const std::string& what);
  Error fail(HubFailure kind, const std::string& message);

  HubSettings settings_;
  HubFailure failure_ = HubFailure::kNone;
};

}  // namespace splash::hub
