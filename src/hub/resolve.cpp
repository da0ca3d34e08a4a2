#include "hub/resolve.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/sizes.h"
#include "hub/download.h"
#include "hub/gguf_select.h"
#include "hub/hf_cache.h"
#include "hub/hub_client.h"
#include "hub/identify.h"

namespace splash::hub {

namespace fs = std::filesystem;

namespace {

constexpr const char* kAuthHint = "set HF_TOKEN or run 'hf auth login' with access to this repository";
constexpr uint64_t kHeaderFirstFetch = 1u << 20;   // most GGUF headers fit; big vocabularies take a second
constexpr uint64_t kHeaderMaxBytes = 512u << 20;   // a header larger than this is refused
constexpr uint64_t kSmallFileMax = 64u << 20;      // config.json and friends

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

bool is_root(const std::string& f) { return f.find('/') == std::string::npos; }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string short_commit(const std::string& c) { return c.substr(0, 12); }

std::string expand_home(const std::string& p) {
  if (p.size() >= 1 && p[0] == '~' && (p.size() == 1 || p[1] == '/')) {
    const char* home = std::getenv("HOME");
    if (home) return std::string(home) + p.substr(1);
  }
  return p;
}

std::string local_model_id(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot read ", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Error cannot_resolve(const ModelRef& ref, const std::string& reason, HubFailure failure, const std::string& note) {
  std::string m = str_cat("cannot resolve ", ref.repo, ": ", reason, "; ", note);
  if (failure == HubFailure::kAuth) m += str_cat("; ", kAuthHint);
  return Error{m, ErrorCode::kUnavailable};
}

// GGUF repositories: a variant was named, or the root holds GGUFs and no config.json.
bool is_gguf_choice(const ModelRef& ref, const std::vector<std::string>& files) {
  return !ref.variant.empty() || (!contains(files, "config.json") && !gguf_candidates(files).empty());
}

// What the cache alone holds for ref at `revision`.
Result<ResolvedModel> resolve_cached(const ModelRef& ref, const RepoCache& cache, const std::string& revision,
                                     const std::string& reason, HubFailure failure) {
  auto commit = cache.cached_commit(revision);
  if (!commit)
    return cannot_resolve(ref, reason, failure,
                          str_cat("no cached copy of revision '", revision, "' in ", cache.repo_dir()));
  const std::vector<std::string> files = cache.snapshot_files(*commit);
  ResolvedModel r;
  r.from_hub = true;
  r.repo = ref.repo;
  r.commit = *commit;
  r.model_id = ref.text();
  if (is_gguf_choice(ref, files)) {
    auto choice = select_gguf(files, ref.variant);
    if (!choice.ok())
      return cannot_resolve(ref, reason, failure, str_cat("the cached copy of ", short_commit(*commit), " has ",
                                                            choice.error_message()));
    r.path = cache.snapshot_path(*commit, choice->file);
  } else {
    if (!contains(files, "config.json"))
      return cannot_resolve(ref, reason, failure,
                            str_cat("the cached copy of ", short_commit(*commit), " has no config.json or .gguf file"));
    r.path = cache.snapshot_dir(*commit);
  }
  return r;
}

// Downloads `todo` (already checked), printing the Fetching line first.
Status fetch_files(HubClient& client, const RepoCache& cache, const ModelRef& ref, const std::string& commit,
                   const std::vector<std::pair<std::string, FileMeta>>& todo, const Console& console,
                   uint64_t& bytes) {
  if (todo.empty()) return {};
  uint64_t total = 0;
  for (const auto& t : todo) total += t.second.size;
  std::fprintf(console.out, "Fetching %zu file(s), %s, from %s@%s; cached files are reused.\n", todo.size(),
               format_bytes(total).c_str(), ref.repo.c_str(), short_commit(commit).c_str());
  std::fflush(console.out);
  for (const auto& [file, meta] : todo) {
    auto got = fetch_blob(client, cache, commit, file, meta, console.progress, console.out);
    if (!got.ok()) {
      return cannot_resolve(ref, got.error_message(), client.last_failure(),
                            "files already downloaded stay in the cache and a partial one is resumed next start");
    }
    bytes += got->bytes_received;
  }
  return {};
}

Result<FileMeta> meta_of(HubClient& client, const ModelRef& ref, const std::string& commit, const std::string& file) {
  auto m = client.file_meta(ref.repo, commit, file);
  if (!m.ok()) return cannot_resolve(ref, m.error_message(), client.last_failure(), "nothing was downloaded for it");
  return m;
}

// The GGUF's header through range requests, identified before its weights are fetched.
Status identify_remote_gguf(HubClient& client, const ModelRef& ref, const std::string& commit, const std::string& file,
                            const FileMeta& meta) {
  const std::string source = ref.repo + "/" + file;
  std::string prefix;
  uint64_t want = std::min<uint64_t>(kHeaderFirstFetch, meta.size);
  for (;;) {
    if (want > prefix.size()) {
      auto more = client.fetch_range(ref.repo, commit, file, prefix.size(), want - prefix.size());
      // A dropped connection is retried like a download.
      for (int attempt = 1; !more.ok() && client.last_failure() == HubFailure::kUnreachable &&
                            attempt < client.settings().download_attempts;
           ++attempt)
        more = client.fetch_range(ref.repo, commit, file, prefix.size(), want - prefix.size());
      if (!more.ok()) return cannot_resolve(ref, more.error_message(), client.last_failure(), "nothing was downloaded");
      prefix += *more;
    }
    const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(prefix.data()), prefix.size());
    SPLASH_TRY(GgufHeaderScan scan, scan_gguf_header(bytes, meta.size, source));
    if (scan.complete) {
      SPLASH_TRY(ModelConfig config, identify_gguf(bytes, scan, source));
      (void)config;
      return {};
    }
    if (scan.bytes_needed > kHeaderMaxBytes || scan.bytes_needed <= prefix.size())
      return make_error(source, ": the GGUF header is larger than ", format_bytes(kHeaderMaxBytes));
    want = scan.bytes_needed;
  }
}

Result<ResolvedModel> resolve_gguf(HubClient& client, const RepoCache& cache, const ModelRef& ref,
                                   const std::string& commit, const std::vector<std::string>& files,
                                   const Console& console) {
  auto choice = select_gguf(files, ref.variant);
  if (!choice.ok()) return make_error(ref.repo, ": ", choice.error_message());
  if (choice->by_ending)
    std::fprintf(console.out, "No GGUF is named for :%s alone; using %s, the only one whose name ends in -%s.\n",
                 ref.variant.c_str(), choice->file.c_str(), ref.variant.c_str());
  std::fprintf(console.out, "Selected %s from %s.\n", choice->file.c_str(), ref.repo.c_str());
  std::fflush(console.out);
  ResolvedModel r;
  if (!cache.has_snapshot_file(commit, choice->file)) {
    SPLASH_TRY(FileMeta meta, meta_of(client, ref, commit, choice->file));
    // A blob another revision (or another tool) already fetched needs no identification request.
    std::error_code ec;
    if (client.settings().check_model && !fs::is_regular_file(cache.blob_path(meta.etag), ec))
      SPLASH_TRY_STATUS(identify_remote_gguf(client, ref, commit, choice->file, meta));
    SPLASH_TRY_STATUS(fetch_files(client, cache, ref, commit, {{choice->file, meta}}, console, r.bytes_downloaded));
  }
  r.path = cache.snapshot_path(commit, choice->file);
  return r;
}

Result<ResolvedModel> resolve_safetensors(HubClient& client, const RepoCache& cache, const ModelRef& ref,
                                          const std::string& commit, const std::vector<std::string>& files,
                                          const Console& console) {
  ResolvedModel r;
  if (!contains(files, "config.json"))
    return make_error(ref.repo, ": the repository has neither config.json nor a .gguf file in its root");
  // config.json first (small, not a weight): the model is identified before anything else is fetched.
  if (!cache.has_snapshot_file(commit, "config.json")) {
    SPLASH_TRY(FileMeta meta, meta_of(client, ref, commit, "config.json"));
    if (meta.size > kSmallFileMax) return make_error(ref.repo, ": config.json is larger than ", format_bytes(kSmallFileMax));
    auto got = fetch_blob(client, cache, commit, "config.json", meta, console.progress, console.out);
    if (!got.ok()) return cannot_resolve(ref, got.error_message(), client.last_failure(), "nothing was downloaded");
    r.bytes_downloaded += got->bytes_received;
  }
  SPLASH_TRY(std::string config_text, read_file(cache.snapshot_path(commit, "config.json")));
  if (client.settings().check_model) {
    SPLASH_TRY(ModelConfig config, identify_hf_config(config_text, ref.repo + "/config.json"));
    (void)config;
  }
  if (!contains(files, "tokenizer.json"))
    return make_error(ref.repo, ": the repository has no tokenizer.json (Splash reads the tokenizer from it)");
  const std::vector<std::string> needed = safetensors_files_needed(files);
  if (std::none_of(needed.begin(), needed.end(), [](const std::string& f) { return ends_with(f, ".safetensors"); }))
    return make_error(ref.repo, ": the repository has no .safetensors weights in its root");
  std::vector<std::pair<std::string, FileMeta>> todo;
  for (const std::string& f : needed) {
    if (cache.has_snapshot_file(commit, f)) continue;
    SPLASH_TRY(FileMeta meta, meta_of(client, ref, commit, f));
    todo.emplace_back(f, meta);
  }
  SPLASH_TRY_STATUS(fetch_files(client, cache, ref, commit, todo, console, r.bytes_downloaded));
  r.path = cache.snapshot_dir(commit);
  return r;
}

}  // namespace

std::vector<std::string> safetensors_files_needed(const std::vector<std::string>& repo_files) {
  static const char* const kSmall[] = {"config.json",           "generation_config.json", "tokenizer.json",
                                       "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                                       "chat_template.json",    "model.safetensors.index.json"};
  std::vector<std::string> out;
  for (const char* f : kSmall)
    if (contains(repo_files, f)) out.push_back(f);
  std::vector<std::string> weights;
  for (const std::string& f : repo_files)
    if (is_root(f) && ends_with(f, ".safetensors")) weights.push_back(f);
  std::sort(weights.begin(), weights.end());
  out.insert(out.end(), weights.begin(), weights.end());
  return out;
}

Result<ResolvedModel> resolve_model(const ModelRef& ref, const HubSettings& settings, const Console& console) {
  if (!ref.is_hub()) {
    ResolvedModel r;
    r.path = expand_home(ref.path);
    r.model_id = local_model_id(r.path);
    return r;
  }
  if (Status st = check_revision(settings.revision); !st.ok()) return st.error();
  RepoCache cache(settings.cache_dir, ref.repo);
  if (settings.offline) {
    SPLASH_TRY(ResolvedModel r, resolve_cached(ref, cache, settings.revision,
                                               "offline mode (--offline or HF_HUB_OFFLINE) uses only the cache",
                                               HubFailure::kNone));
    std::fprintf(console.out, "Using the cached copy of %s@%s (offline).\n", ref.repo.c_str(),
                 short_commit(r.commit).c_str());
    std::fflush(console.out);
    return r;
  }
  // A commit the cache already holds is never checked again (spec 1.2).
  if (is_commit_hash(settings.revision) && cache.cached_commit(settings.revision)) {
    auto r = resolve_cached(ref, cache, settings.revision, "", HubFailure::kNone);
    if (r.ok()) return r;
  }
  HubClient client(settings);
  auto info = client.repo_info(ref.repo, settings.revision);
  if (!info.ok()) {
    const HubFailure f = client.last_failure();
    if (f == HubFailure::kUnreachable) {
      auto cached = resolve_cached(ref, cache, settings.revision, info.error_message(), f);
      if (cached.ok()) {
        std::fprintf(console.out, "Could not reach the Hub (%s); using the cached copy of %s@%s.\n",
                     info.error_message().c_str(), ref.repo.c_str(), short_commit(cached->commit).c_str());
        std::fflush(console.out);
      }
      return cached;
    }
    std::string reason = info.error_message();
    if (f == HubFailure::kRevisionNotFound) reason = str_cat("revision '", settings.revision, "' not found");
    return cannot_resolve(ref, reason, f, "nothing was downloaded for it");
  }
  if (!is_commit_hash(info->commit))
    return cannot_resolve(ref, str_cat("the Hub answered commit '", info->commit, "', not a 40-hex id"),
                          HubFailure::kOther, "nothing was downloaded for it");
  auto r = is_gguf_choice(ref, info->files) ? resolve_gguf(client, cache, ref, info->commit, info->files, console)
                                            : resolve_safetensors(client, cache, ref, info->commit, info->files, console);
  if (!r.ok()) return r;
  if (Status st = cache.write_ref(settings.revision, info->commit); !st.ok()) return st.error();
  r->from_hub = true;
  r->repo = ref.repo;
  r->commit = info->commit;
  r->model_id = ref.text();
  return r;
}

Result<ResolvedModel> resolve_model(const std::string& model, const HubSettings& settings, const Console& console) {
  SPLASH_TRY(ModelRef ref, parse_model_ref(model, [](const std::string& p) {
               std::error_code ec;
               return fs::exists(expand_home(p), ec);
             }));
  return resolve_model(ref, settings, console);
}

}  // namespace splash::hub
