// Strict HTTP/1.x request-head parsing, without sockets (the fuzz target drives it directly).
// Only what the spec's API needs is accepted (spec 2): HTTP/1.0 and 1.1, origin-form targets,
// CRLF line ends, no obs-fold, a body framed by one Content-Length and never by Transfer-Encoding.
// Anything else is refused with the status a client can act on (400, 411, 417, 431, 501, 505).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "server/http/message.h"

namespace splash::http {

// A refusal decided by the transport; sent as error_response(status, code, message) and the
// connection is closed afterwards.
struct HttpError {
  int status = 400;
  std::string code;     // "invalid_request_error", "request_too_large" ...
  std::string message;  // for the client: says what was wrong and what to send instead
};

struct ParseLimits {
  size_t max_head_bytes = 64 << 10;  // request line + headers + blank line; 431 beyond
  size_t max_headers = 100;          // 431 beyond
};

// Content-Length: 1*DIGIT, saturating at UINT64_MAX (an absurd length is a 413 for the caller, not
// a 400); nullopt when it is not a decimal number.
std::optional<uint64_t> parse_content_length(std::string_view v);

// --- finding the end of the head -------------------------------------------------------------

enum class HeadScanState : uint8_t { kIncomplete, kComplete, kError };

struct HeadScan {
  HeadScanState state = HeadScanState::kIncomplete;
  size_t skip = 0;     // empty lines (CRLF) before the request line, which RFC 9112 lets us ignore
  size_t length = 0;   // kComplete: bytes from the buffer's start through the blank line's CRLF
  size_t scanned = 0;  // kIncomplete: pass back as `resume` so a slow client costs O(n), not O(n^2)
  HttpError error;     // kError: bare CR or LF -> 400, head over max_head_bytes -> 431
};

// Looks for the CRLF CRLF that ends a head in `buf` (the bytes received so far on a connection).
HeadScan scan_head(std::string_view buf, const ParseLimits& limits, size_t resume = 0);

// --- parsing it ------------------------------------------------------------------------------

struct ParsedHead {
  Request request;             // method, target, path, query, version_minor, headers; body empty
  uint64_t content_length = 0;  // 0 when absent (allowed only for methods without a body);
                                // saturates at UINT64_MAX for absurd values (the caller answers 413)
  bool keep_alive = true;       // HTTP/1.1 without "Connection: close"; HTTP/1.0 always closes
  bool expect_continue = false;  // "Expect: 100-continue" on HTTP/1.1
};

struct HeadParse {
  std::optional<ParsedHead> head;
  HttpError error;  // when !head
  bool ok() const { return head.has_value(); }
};

// `head` is the request line through the final blank line (scan_head's length minus skip).
HeadParse parse_head(std::string_view head, const ParseLimits& limits);

}  // namespace splash::http
