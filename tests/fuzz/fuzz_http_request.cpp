// libFuzzer target for the HTTP request parser: arbitrary bytes go through head scanning (whole
// and byte-split, as a slow client delivers them), head parsing and body framing, then through
// the security checks that read the parsed headers. Nothing may crash, leak or allocate beyond
// the limits; the incremental scan must agree with the one-shot scan.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/http/request_parser.h"
#include "server/http/security.h"
#include "server/http/sse.h"

using namespace splash::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  ParseLimits limits;
  limits.max_head_bytes = 4096;  // small, so the 431 path is reached too
  limits.max_headers = 32;

  HeadScan whole = scan_head(input, limits);
  // The same bytes in pieces of 7 must give the same verdict at the same place.
  HeadScan piece;
  size_t resume = 0;
  for (size_t n = 7;; n += 7) {
    size_t len = n < size ? n : size;
    piece = scan_head(input.substr(0, len), limits, resume);
    if (piece.state != HeadScanState::kIncomplete || len == size) break;
    resume = piece.scanned;
  }
  if (piece.state != whole.state) abort();
  if (whole.state == HeadScanState::kComplete && piece.length != whole.length) abort();
  if (whole.state != HeadScanState::kComplete) return 0;
  if (whole.length - whole.skip > limits.max_head_bytes) abort();

  HeadParse parsed = parse_head(input.substr(whole.skip, whole.length - whole.skip), limits);
  if (!parsed.ok()) {
    if (parsed.error.status < 400 || parsed.error.status > 599 || parsed.error.message.empty()) abort();
    (void)error_body(parsed.error.status, parsed.error.code, parsed.error.message);
    return 0;
  }
  const ParsedHead& head = *parsed.head;
  const Request& req = head.request;
  if (req.headers.size() > limits.max_headers) abort();
  if (req.path.empty() || req.version_minor < 0 || req.version_minor > 1) abort();

  // Body framing as the connection does it: what is left after the head, cut at Content-Length.
  std::string_view rest = input.substr(whole.length);
  size_t body_len = head.content_length < rest.size() ? static_cast<size_t>(head.content_length) : rest.size();
  std::string body(rest.substr(0, body_len));
  (void)body;

  // The pure checks the route layer runs on every head.
  HostPolicy host_policy{"127.0.0.1", {"splash.lan"}};
  auto host = req.header("Host");
  (void)host_allowed(host.value_or(""), host_policy, "192.168.0.2");
  (void)host_refused_message(host.value_or(""));
  OriginPolicy origin_policy{{"http://app.example"}};
  CorsDecision cors = check_origin(req.header("Origin"), host.value_or(""), origin_policy);
  if (is_preflight(req)) (void)preflight_response(req, cors);
  (void)check_api_key(req, "sk-fuzz");
  (void)is_public_path(req.method, req.path);
  (void)sse_event(req.target);
  return 0;
}
