#include "hub/hub_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <memory>

#include <nlohmann/json.hpp>

#include "core/version.h"

namespace splash::hub {

namespace {

std::string lower_ascii(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  return std::string(s);
}

// "W/\"abc\"" -> "abc".
std::string clean_etag(std::string e) {
  if (e.rfind("W/", 0) == 0) e = e.substr(2);
  if (e.size() >= 2 && e.front() == '"' && e.back() == '"') e = e.substr(1, e.size() - 2);
  return e;
}

std::string escape(CURL* curl, const std::string& s) {
  char* e = curl_easy_escape(curl, s.c_str(), static_cast<int>(s.size()));
  std::string out = e ? e : "";
  curl_free(e);
  return out;
}

// Escapes each '/'-separated segment, keeping the separators.
std::string escape_path(CURL* curl, const std::string& path) {
  std::string out;
  size_t start = 0;
  for (;;) {
    size_t slash = path.find('/', start);
    out += escape(curl, path.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
    if (slash == std::string::npos) return out;
    out += '/';
    start = slash + 1;
  }
}

struct CurlDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

struct Transfer {
  CURL* curl = nullptr;
  std::map<std::string, std::string>* headers = nullptr;
  std::string* body = nullptr;
  uint64_t max_body = 0;
  const ByteSink* sink = nullptr;
  const std::function<void(long)>* on_status = nullptr;
  bool started = false;
  bool sink_body = false;  // the status was a success: the body goes to the sink
  bool aborted_by_sink = false;
  bool too_large = false;
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string_view line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    t->headers->clear();  // a new response of the redirect chain
  } else if (size_t colon = line.find(':'); colon != std::string_view::npos) {
    (*t->headers)[lower_ascii(std::string(line.substr(0, colon)))] = trim(line.substr(colon + 1));
  }
  return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t len = size * n;
  if (!t->started) {
    t->started = true;
    long status = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
    t->sink_body = t->sink != nullptr && status >= 200 && status < 300;
    if (t->sink_body && t->on_status) (*t->on_status)(status);
  }
  if (t->sink_body) {
    if (!(*t->sink)(data, len)) {
      t->aborted_by_sink = true;
      return 0;
    }
    return len;
  }
  if (t->body->size() + len > t->max_body) {
    t->too_large = true;
    return 0;
  }
  t->body->append(data, len);
  return len;
}

}  // namespace

HubClient::HubClient(HubSettings settings) : settings_(std::move(settings)) {
  curl_global_init(CURL_GLOBAL_DEFAULT);  // reference-counted by libcurl; idempotent
}

Error HubClient::fail(HubFailure kind, const std::string& message) {
  failure_ = kind;
  return Error{redact(message, settings_.token)};
}

std::string HubClient::resolve_url(const std::string& repo, const std::string& revision,
                                   const std::string& file) const {
  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  return settings_.endpoint + "/" + escape_path(curl.get(), repo) + "/resolve/" + escape(curl.get(), revision) + "/" +
         escape_path(curl.get(), file);
}

Result<HubClient::Reply> HubClient::request(Method method, const std::string& url, bool follow,
                                            const std::string& range, uint64_t max_body, const ByteSink* sink,
                                            const std::function<void(long)>* on_status) {
  failure_ = HubFailure::kNone;
  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  if (!curl) return fail(HubFailure::kOther, "cannot initialise libcurl");
  Reply reply;
  Transfer t;
  t.curl = curl.get();
  t.headers = &reply.headers;
  t.body = &reply.body;
  t.max_body = max_body;
  t.sink = sink;
  t.on_status = on_status;
  curl_slist* list = nullptr;
  if (!settings_.token.empty()) list = curl_slist_append(list, ("Authorization: Bearer " + settings_.token).c_str());
  if (!range.empty()) list = curl_slist_append(list, ("Range: bytes=" + range).c_str());
  std::unique_ptr<curl_slist, SlistDeleter> headers(list);
  char errbuf[CURL_ERROR_SIZE] = {0};
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  const std::string agent = std::string("splash/") + kVersion;
  curl_easy_setopt(c, CURLOPT_USERAGENT, agent.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, follow ? 1L : 0L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, settings_.connect_timeout_s);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, settings_.stall_timeout_s);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  if (method == Method::kHead) curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  // Metadata requests answer in seconds; downloads are bounded by the stall timeout instead.
  if (sink == nullptr) curl_easy_setopt(c, CURLOPT_TIMEOUT, settings_.request_timeout_s);
  const CURLcode rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &reply.status);
  if (t.aborted_by_sink) return fail(HubFailure::kOther, "the download was stopped");
  if (t.too_large) return fail(HubFailure::kOther, str_cat(url, ": the answer is larger than ", max_body, " bytes"));
  if (rc != CURLE_OK) {
    const std::string why = errbuf[0] ? trim(errbuf) : curl_easy_strerror(rc);
    return fail(HubFailure::kUnreachable, why);
  }
  return reply;
}

Error HubClient::http_error(const Reply& reply, const std::string& what) {
  auto header = [&](const char* name) {
    auto it = reply.headers.find(name);
    return it == reply.headers.end() ? std::string() : it->second;
  };
  const std::string code = header("x-error-code");
  const long s = reply.status;
  // The Hub answers 401 RepoNotFound for private repositories too when the request has no access.
  if (code == "RepoNotFound" && (s == 401 || s == 403))
    return fail(HubFailure::kAuth, str_cat("repository not found, or private and this request has no access (HTTP ", s,
                                           ")"));
  if (code == "RepoNotFound" || (s == 404 && code.empty() && what.empty()))
    return fail(HubFailure::kRepoNotFound, str_cat("repository not found (HTTP ", s, ")"));
  if (code == "GatedRepo")
    return fail(HubFailure::kAuth, str_cat("the repository is gated and this request has no access (HTTP ", s, ")"));
  if (code == "RevisionNotFound") return fail(HubFailure::kRevisionNotFound, str_cat("revision not found (HTTP ", s, ")"));
  if (code == "EntryNotFound" || s == 404)
    return fail(HubFailure::kEntryNotFound, str_cat(what.empty() ? "file" : what, " not found (HTTP ", s, ")"));
  if (s == 401 || s == 403)
    return fail(HubFailure::kAuth, str_cat("access denied (HTTP ", s, "): the repository is gated or private"));
  if (s == 429 || s >= 500) return fail(HubFailure::kUnreachable, str_cat("the Hub answered HTTP ", s));
  return fail(HubFailure::kOther, str_cat("unexpected answer HTTP ", s, what.empty() ? "" : " for " + what));
}

Result<RepoInfo> HubClient::repo_info(const std::string& repo, const std::string& revision) {
  std::unique_ptr<CURL, CurlDeleter> curl(curl_easy_init());
  const std::string url = settings_.endpoint + "/api/models/" + escape_path(curl.get(), repo) + "/revision/" +
                          escape(curl.get(), revision);
  SPLASH_TRY(Reply r, request(Method::kGet, url, true, "", 64u << 20, nullptr, nullptr));
  if (r.status != 200) return http_error(r, "");
  RepoInfo info;
  try {
    const auto j = nlohmann::json::parse(r.body);
    info.commit = j.at("sha").get<std::string>();
    for (const auto& s : j.at("siblings")) info.files.push_back(s.at("rfilename").get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    return fail(HubFailure::kOther, str_cat("the Hub's answer for ", repo, " is not the expected JSON: ", e.what()));
  }
  return info;
}

Result<FileMeta> HubClient::file_meta(const std::string& repo, const std::string& revision, const std::string& file) {
  std::string url = resolve_url(repo, revision, file);
  // Redirects within the endpoint (a renamed repository) are followed; the first answer that points
  // elsewhere (the CDN) carries the metadata, as for huggingface_hub.
  for (int hop = 0; hop < 10; ++hop) {
    SPLASH_TRY(Reply r, request(Method::kHead, url, false, "", 0, nullptr, nullptr));
    if (r.status >= 300 && r.status < 400) {
      const std::string loc = r.headers.count("location") ? r.headers["location"] : "";
      if (!loc.empty() && loc[0] == '/' && !r.headers.count("x-linked-etag")) {
        url = settings_.endpoint + loc;
        continue;
      }
    } else if (r.status != 200) {
      return http_error(r, file);
    }
    FileMeta m;
    m.commit = r.headers.count("x-repo-commit") ? r.headers["x-repo-commit"] : "";
    m.etag = clean_etag(r.headers.count("x-linked-etag") ? r.headers["x-linked-etag"] : r.headers["etag"]);
    const std::string size = r.headers.count("x-linked-size") ? r.headers["x-linked-size"] : r.headers["content-length"];
    try {
      m.size = size.empty() ? 0 : std::stoull(size);
    } catch (const std::exception&) {
      return fail(HubFailure::kOther, str_cat(file, ": bad size '", size, "' in the Hub's answer"));
    }
    if (m.etag.empty() || size.empty())
      return fail(HubFailure::kOther, str_cat(file, ": the Hub's answer has no ETag or size"));
    if (m.etag.find('/') != std::string::npos || m.etag == "." || m.etag == "..")
      return fail(HubFailure::kOther, str_cat(file, ": the Hub's ETag '", m.etag, "' is not a plain name"));
    return m;
  }
  return fail(HubFailure::kOther, str_cat(file, ": too many redirects"));
}

Result<std::string> HubClient::fetch(const std::string& repo, const std::string& revision, const std::string& file,
                                     uint64_t max_bytes) {
  SPLASH_TRY(Reply r, request(Method::kGet, resolve_url(repo, revision, file), true, "", max_bytes, nullptr, nullptr));
  if (r.status != 200) return http_error(r, file);
  return std::move(r.body);
}

Result<std::string> HubClient::fetch_range(const std::string& repo, const std::string& revision,
                                           const std::string& file, uint64_t offset, uint64_t length) {
  const std::string range = str_cat(offset, "-", offset + length - 1);
  SPLASH_TRY(Reply r, request(Method::kGet, resolve_url(repo, revision, file), true, range, length, nullptr, nullptr));
  if (r.status != 206) {
    if (r.status == 200 || r.status == 416)
      return fail(HubFailure::kOther, str_cat(file, ": the Hub does not answer range requests (HTTP ", r.status, ")"));
    return http_error(r, file);
  }
  return std::move(r.body);
}

Status HubClient::download(const std::string& repo, const std::string& revision, const std::string& file,
                           uint64_t offset, const std::function<void(bool)>& on_start, const ByteSink& sink) {
  const std::function<void(long)> status_cb = [&](long status) { on_start(offset > 0 && status == 200); };
  SPLASH_TRY(Reply r, request(Method::kGet, resolve_url(repo, revision, file), true,
                              offset > 0 ? str_cat(offset, "-") : "", 1u << 20, &sink, &status_cb));
  if (r.status != 200 && r.status != 206) return http_error(r, file);
  return {};
}

}  // namespace splash::hub
