// Access rules of spec 2.2, as pure functions the route layer calls from pre_body_check (so a
// refused request is answered before its body is read): the Host allow-list (DNS rebinding), the
// browser Origin / CORS decision, and the API key.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/http/message.h"

namespace splash::http {

// --- Host --------------------------------------------------------------------------------------

struct HostPolicy {
  std::string bind_host;                   // --host as given: "127.0.0.1", "0.0.0.0", "::1"
  std::vector<std::string> allowed_hosts;  // --allowed-host values (a ":port" on them is ignored)
};

struct HostPort {
  std::string host;              // lowercased, IPv6 brackets removed: "localhost", "::1"
  std::optional<uint16_t> port;  // absent when the value had none
};

// Parses a Host header value (or the authority of an Origin): "name", "name:port", "[v6]:port".
// nullopt when malformed (empty, bad characters, port not 1-65535, unbalanced brackets).
std::optional<HostPort> parse_host_port(std::string_view value);

// True when the Host header's name (port ignored) is the bind address, localhost / 127.0.0.1 / ::1,
// the local address the connection arrived on (`local_addr`, so a LAN IP works), or one of
// --allowed-host. Case-insensitive. A malformed or empty Host is not allowed. The caller answers 403
// `forbidden` with host_refused_message(); a missing Host on HTTP/1.1 never gets here (the parser
// answers 400).
bool host_allowed(std::string_view host_header, const HostPolicy& policy, std::string_view local_addr = {});
// Says what is wrong: no Host header at all (HTTP/1.0), a value that is not a host name, or a name
// outside the allow-list (then the --allowed-host flag that admits it).
std::string host_refused_message(std::string_view host_header);

// --- Origin / CORS -----------------------------------------------------------------------------

struct OriginPolicy {
  std::vector<std::string> allowed_origins;  // --allowed-origin: exact "scheme://host[:port]", or "*"
};

enum class OriginVerdict : uint8_t {
  kNoOrigin,  // not a browser cross-site request: nothing to add
  kSameOrigin,  // Origin is http://<Host>
  kListed,      // in --allowed-origin (or "*" is)
  kRefused,     // answer 403 `forbidden` with origin_refused_message()
};

struct CorsDecision {
  OriginVerdict verdict = OriginVerdict::kNoOrigin;
  // For admitted origins: Access-Control-Allow-Origin: <origin>, Vary: Origin,
  // Access-Control-Expose-Headers: Retry-After, WWW-Authenticate. Add them to the response.
  std::vector<Header> headers;
  bool allowed() const { return verdict != OriginVerdict::kRefused; }
};

// Origin must equal http://<Host> (same host, case-insensitive, and same port, 80 when omitted)
// unless listed in --allowed-origin (exact, or "*"). "Origin: null" is admitted only with "*".
CorsDecision check_origin(std::optional<std::string_view> origin, std::string_view host_header,
                          const OriginPolicy& policy);
std::string origin_refused_message(std::string_view origin);

// OPTIONS carrying Origin and Access-Control-Request-Method: a CORS preflight.
bool is_preflight(const Request& head);
// 204 for an admitted preflight: the decision's headers plus Access-Control-Allow-Methods
// "GET, HEAD, POST, DELETE, OPTIONS", the requested headers (echoed when they are a well-formed
// list), Access-Control-Max-Age: 600. 403 `forbidden` for a refused origin.
SimpleResponse preflight_response(const Request& head, const CorsDecision& decision);

// --- logging refusals -----------------------------------------------------------------------------

// A request value (Origin, Host ...) as a log line may show it: at most `max_bytes` bytes, control
// and non-ASCII bytes as '?', and "...(+N bytes)" when cut.
std::string log_excerpt(std::string_view value, size_t max_bytes = 200);

// Rate limit for refusal lines: a client can be refused as often as it likes, the log must not
// grow with it. line() gives the text to print, or nullopt within `interval` of the last line
// printed; the next line printed says how many were held back. Thread-safe.
class RefusalLog {
 public:
  explicit RefusalLog(std::chrono::milliseconds interval = std::chrono::seconds(1)) : interval_(interval) {}
  std::optional<std::string> line(std::string_view text, std::chrono::steady_clock::time_point now);

 private:
  std::mutex mu_;
  std::chrono::milliseconds interval_;
  std::optional<std::chrono::steady_clock::time_point> last_;
  int64_t held_back_ = 0;
};

// --- API key -----------------------------------------------------------------------------------

enum class AuthVerdict : uint8_t { kOk, kMissing, kInvalid };

// The chat page's paths: "/", "/index.html", "/favicon.ico" and "/assets/<name>". The router serves
// the page from exactly these, and they are public, so the rule is written once.
bool is_web_page_path(std::string_view path);

// Paths answered without a key: the chat page's (is_web_page_path), "/health", "/ready", and every
// OPTIONS request; everything else (the API, /status, /metrics, unknown paths) needs the key. A
// path with ".." or "%" is never public (a router that normalized it could otherwise reach a
// protected route through an asset prefix).
bool is_public_path(std::string_view method, std::string_view path);

// With an empty `api_key` auth is off: always kOk. Otherwise the key comes from
// `Authorization: Bearer K` (scheme case-insensitive) and/or `x-api-key: K`; both must match when
// both are sent; neither -> kMissing. An Authorization header with another scheme is not a key.
// Does not look at the path: the caller skips it for is_public_path().
AuthVerdict check_api_key(const Request& head, std::string_view api_key);

// Compares in time that depends only on the secret's length: no early exit on the first differing
// byte, and a length mismatch is folded into the same accumulator.
bool constant_time_equals(std::string_view given, std::string_view secret);

// 401 with WWW-Authenticate: Bearer and code authentication_error (kMissing or kInvalid).
SimpleResponse auth_refusal(AuthVerdict verdict);

}  // namespace splash::http
