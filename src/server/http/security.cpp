#include "server/http/security.h"

#include "core/result.h"

namespace splash::http {

namespace {

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool is_alnum(char c) { return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'); }

std::optional<uint16_t> parse_port(std::string_view s) {
  if (s.empty() || s.size() > 5) return std::nullopt;
  uint32_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<uint32_t>(c - '0');
  }
  if (n == 0 || n > 65535) return std::nullopt;
  return static_cast<uint16_t>(n);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// "scheme://authority" with nothing after the authority (that is all an Origin may hold).
struct ParsedOrigin {
  std::string scheme;  // lowercased
  HostPort authority;
};

std::optional<ParsedOrigin> parse_origin(std::string_view origin) {
  size_t sep = origin.find("://");
  if (sep == std::string_view::npos || sep == 0) return std::nullopt;
  ParsedOrigin out;
  out.scheme = to_lower(origin.substr(0, sep));
  for (char c : out.scheme) {
    if (!is_alnum(c) && c != '+' && c != '-' && c != '.') return std::nullopt;
  }
  auto hp = parse_host_port(origin.substr(sep + 3));
  if (!hp) return std::nullopt;
  out.authority = std::move(*hp);
  return out;
}

uint16_t default_port(std::string_view scheme) { return scheme == "https" ? 443 : 80; }

std::vector<Header> admitted_headers(std::string_view origin) {
  return {{"Access-Control-Allow-Origin", std::string(origin)},
          {"Vary", "Origin"},
          {"Access-Control-Expose-Headers", "Retry-After, WWW-Authenticate"}};
}

// A comma-separated list of header names (what a preflight may ask for), so that echoing it back
// cannot inject anything.
bool is_header_name_list(std::string_view s) {
  if (trim(s).empty()) return false;
  for (char c : s) {
    if (!is_alnum(c) && c != '-' && c != '_' && c != ',' && c != ' ' && c != '\t') return false;
  }
  return true;
}

}  // namespace

// --- Host --------------------------------------------------------------------------------------

std::optional<HostPort> parse_host_port(std::string_view value) {
  value = trim(value);
  if (value.empty()) return std::nullopt;
  HostPort out;
  std::string_view host, port;
  bool has_port = false;
  if (value.front() == '[') {
    size_t close = value.find(']');
    if (close == std::string_view::npos || close == 1) return std::nullopt;
    host = value.substr(1, close - 1);
    for (char c : host) {
      bool hex = (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
      if (!hex && c != ':' && c != '.') return std::nullopt;
    }
    std::string_view rest = value.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      port = rest.substr(1);
      has_port = true;
    }
  } else {
    size_t colon = value.find(':');
    host = value.substr(0, colon);
    if (colon != std::string_view::npos) {
      port = value.substr(colon + 1);
      has_port = true;
    }
    if (host.empty()) return std::nullopt;
    for (char c : host) {
      if (!is_alnum(c) && c != '-' && c != '.' && c != '_' && c != '~') return std::nullopt;
    }
  }
  if (has_port) {
    out.port = parse_port(port);
    if (!out.port) return std::nullopt;
  }
  out.host = to_lower(host);
  return out;
}

namespace {
// --allowed-host and --host values: a name, optionally with a port or IPv6 brackets.
std::string normalized_name(std::string_view configured) {
  if (auto hp = parse_host_port(configured)) return hp->host;
  // A bare IPv6 address ("::1") is not valid Host syntax without brackets.
  if (auto hp = parse_host_port(str_cat("[", configured, "]"))) return hp->host;
  return to_lower(configured);
}
}  // namespace

bool host_allowed(std::string_view host_header, const HostPolicy& policy, std::string_view local_addr) {
  auto hp = parse_host_port(host_header);
  if (!hp) return false;
  const std::string& name = hp->host;
  if (name == "localhost" || name == "127.0.0.1" || name == "::1") return true;
  if (!policy.bind_host.empty() && name == normalized_name(policy.bind_host)) return true;
  if (!local_addr.empty() && name == normalized_name(local_addr)) return true;
  for (const auto& allowed : policy.allowed_hosts) {
    if (!allowed.empty() && name == normalized_name(allowed)) return true;
  }
  return false;
}

std::string host_refused_message(std::string_view host_header) {
  if (trim(host_header).empty())
    return "the request has no Host header; send one (e.g. 'Host: localhost:8000'), which HTTP/1.0 clients may "
           "leave out but this server needs (protection against DNS rebinding)";
  auto hp = parse_host_port(host_header);
  if (!hp)
    return str_cat("Host '", log_excerpt(trim(host_header), 255),
                   "' is not a host name or address with an optional :port");
  std::string name = hp->host;
  if (name.size() > 255) name = name.substr(0, 255);
  return str_cat("Host '", name, "' is not allowed; restart with --allowed-host ", name,
                 " to accept it (protection against DNS rebinding)");
}

// --- Origin / CORS -----------------------------------------------------------------------------

CorsDecision check_origin(std::optional<std::string_view> origin, std::string_view host_header,
                          const OriginPolicy& policy) {
  CorsDecision d;
  if (!origin) return d;
  std::string_view o = trim(*origin);
  bool wildcard = false;
  for (const auto& allowed : policy.allowed_origins) {
    if (allowed == "*") wildcard = true;
  }
  auto admit = [&](OriginVerdict v) {
    d.verdict = v;
    d.headers = admitted_headers(o);
    return d;
  };
  if (o == "null") {
    if (wildcard) return admit(OriginVerdict::kListed);
    d.verdict = OriginVerdict::kRefused;
    return d;
  }
  auto po = parse_origin(o);
  auto host = parse_host_port(host_header);
  if (po && host && po->scheme == "http" && po->authority.host == host->host &&
      po->authority.port.value_or(default_port(po->scheme)) == host->port.value_or(80)) {
    return admit(OriginVerdict::kSameOrigin);
  }
  for (const auto& allowed : policy.allowed_origins) {
    if (allowed == "*" || to_lower(allowed) == to_lower(o)) {
      // Echo only a well-formed origin: the value goes back into a response header.
      if (!po) break;
      return admit(OriginVerdict::kListed);
    }
  }
  d.verdict = OriginVerdict::kRefused;
  return d;
}

std::string origin_refused_message(std::string_view origin) {
  std::string o(trim(origin));
  if (o.size() > 255) o = o.substr(0, 255);
  return str_cat("Origin ", o, " is not allowed; restart with --allowed-origin ", o, " to accept it");
}

bool is_preflight(const Request& head) {
  return head.method == "OPTIONS" && head.header("Origin").has_value() &&
         head.header("Access-Control-Request-Method").has_value();
}

SimpleResponse preflight_response(const Request& head, const CorsDecision& decision) {
  if (!decision.allowed()) {
    return error_response(403, "forbidden", origin_refused_message(head.header("Origin").value_or("")));
  }
  SimpleResponse r;
  r.status = 204;
  r.headers = decision.headers;
  r.headers.push_back({"Access-Control-Allow-Methods", "GET, HEAD, POST, DELETE, OPTIONS"});
  if (auto req = head.header("Access-Control-Request-Headers"); req && is_header_name_list(*req)) {
    r.headers.push_back({"Access-Control-Allow-Headers", std::string(trim(*req))});
  }
  r.headers.push_back({"Access-Control-Max-Age", "600"});
  return r;
}

// --- API key -----------------------------------------------------------------------------------

bool is_web_page_path(std::string_view path) {
  return path == "/" || path == "/index.html" || path == "/favicon.ico" ||
         (path.size() > 8 && path.substr(0, 8) == "/assets/");
}

bool is_public_path(std::string_view method, std::string_view path) {
  if (method == "OPTIONS") return true;
  if (path.find("..") != std::string_view::npos || path.find('%') != std::string_view::npos) return false;
  return is_web_page_path(path) || path == "/health" || path == "/ready";
}

// --- logging refusals -----------------------------------------------------------------------------

std::string log_excerpt(std::string_view value, size_t max_bytes) {
  std::string out;
  const size_t n = std::min(value.size(), max_bytes);
  out.reserve(n + 24);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    out.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
  }
  if (value.size() > n) out += str_cat("...(+", value.size() - n, " bytes)");
  return out;
}

std::optional<std::string> RefusalLog::line(std::string_view text, std::chrono::steady_clock::time_point now) {
  std::lock_guard lock(mu_);
  if (last_ && now - *last_ < interval_) {
    ++held_back_;
    return std::nullopt;
  }
  last_ = now;
  std::string out(text);
  if (held_back_ > 0) out += str_cat(" (", held_back_, " more refusals since the last line, not logged)");
  held_back_ = 0;
  return out;
}

bool constant_time_equals(std::string_view given, std::string_view secret) {
  // Every byte of the secret is visited whatever `given` holds; indexes into `given` wrap so
  // that no branch depends on its content (only on its length, which the client already knows).
  volatile uint8_t diff = given.size() == secret.size() ? 0 : 1;
  size_t n = given.size();
  for (size_t i = 0; i < secret.size(); ++i) {
    uint8_t g = n == 0 ? 0 : static_cast<uint8_t>(given[i % n]);
    diff = diff | static_cast<uint8_t>(g ^ static_cast<uint8_t>(secret[i]));
  }
  return diff == 0 && !secret.empty();
}

AuthVerdict check_api_key(const Request& head, std::string_view api_key) {
  if (api_key.empty()) return AuthVerdict::kOk;
  std::optional<std::string_view> bearer;
  if (auto auth = head.header("Authorization")) {
    std::string_view v = trim(*auth);
    if (v.size() > 7 && iequals(v.substr(0, 6), "bearer") && (v[6] == ' ' || v[6] == '\t')) {
      bearer = trim(v.substr(7));
    }
  }
  auto x_key = head.header("x-api-key");
  if (!bearer && !x_key) return AuthVerdict::kMissing;
  // Evaluate both comparisons before combining, so which one failed does not show in the timing.
  bool bearer_ok = !bearer || constant_time_equals(*bearer, api_key);
  bool x_ok = !x_key || constant_time_equals(trim(*x_key), api_key);
  return bearer_ok && x_ok ? AuthVerdict::kOk : AuthVerdict::kInvalid;
}

SimpleResponse auth_refusal(AuthVerdict verdict) {
  SimpleResponse r = error_response(
      401, "authentication_error",
      verdict == AuthVerdict::kMissing
          ? "missing API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'"
          : "invalid API key");
  r.headers.push_back({"WWW-Authenticate", "Bearer"});
  return r;
}

}  // namespace splash::http
