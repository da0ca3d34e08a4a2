#include "server/http/request_parser.h"

#include <cstdio>
#include <limits>

#include "core/result.h"

namespace splash::http {

namespace {

HttpError bad_request(std::string message) { return HttpError{400, "invalid_request_error", std::move(message)}; }

// RFC 9110 tchar: the characters of a method or a header name.
bool is_tchar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+': case '-':
    case '.': case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (!is_tchar(c)) return false;
  }
  return true;
}

// field-value characters: VCHAR, obs-text, SP, HTAB. Everything else (NUL, other controls, DEL)
// is refused rather than passed to code that may not expect it.
bool is_field_char(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

bool is_target_char(unsigned char c) { return c > 0x20 && c < 0x7f; }

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Printable excerpt of client bytes for an error message (bounded, controls replaced).
std::string excerpt(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 40; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    out.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
  }
  if (s.size() > 40) out += "...";
  return out;
}

// What is wrong with a byte that may not appear in a request target, and how to send it instead.
std::string target_byte_message(unsigned char c) {
  char hex[8];
  std::snprintf(hex, sizeof hex, "%02X", c);
  const char* what = c == ' ' ? "a space" : c >= 0x80 ? "a byte outside ASCII" : "a control character";
  return str_cat("request target holds byte 0x", hex, " (", what,
                 "), which is not allowed in a request target; percent-encode it as %", hex);
}

// Does a comma-separated header value list `token` (case-insensitive)?
bool list_has(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    size_t comma = value.find(',');
    std::string_view item = trim_ows(value.substr(0, comma));
    if (iequals(item, token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

// "HTTP/d.d" -> major, minor; false if malformed.
bool parse_version(std::string_view v, int* major, int* minor) {
  if (v.size() != 8 || v.substr(0, 5) != "HTTP/" || v[6] != '.') return false;
  if (v[5] < '0' || v[5] > '9' || v[7] < '0' || v[7] > '9') return false;
  *major = v[5] - '0';
  *minor = v[7] - '0';
  return true;
}

std::optional<HttpError> parse_request_line(std::string_view line, Request* req) {
  size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) {
    return bad_request(str_cat("malformed request line '", excerpt(line), "': expected METHOD TARGET HTTP/1.1"));
  }
  size_t sp2 = line.find(' ', sp1 + 1);
  std::string_view method = line.substr(0, sp1);
  if (!is_token(method)) return bad_request(str_cat("malformed method '", excerpt(method), "'"));
  if (sp2 == std::string_view::npos) {
    // "GET /path": an HTTP/0.9 simple request.
    return HttpError{505, "http_version_not_supported",
                     "HTTP/0.9 requests are not supported; send HTTP/1.1 or HTTP/1.0"};
  }
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  int major = 0, minor = 0;
  if (!parse_version(version, &major, &minor)) {
    return bad_request(str_cat("malformed request line '", excerpt(line), "': expected METHOD TARGET HTTP/1.1"));
  }
  if (major != 1 || minor > 1) {
    return HttpError{505, "http_version_not_supported",
                     str_cat("HTTP/", major, ".", minor, " is not supported; send HTTP/1.1 or HTTP/1.0")};
  }
  if (target.empty()) return bad_request("empty request target");
  for (unsigned char c : target) {
    if (!is_target_char(c)) return bad_request(target_byte_message(c));
  }
  if (target == "*") {
    if (method != "OPTIONS") return bad_request("request target '*' is only valid for OPTIONS");
  } else if (target.front() != '/') {
    return bad_request(str_cat("request target '", excerpt(target), "' must be a path starting with '/'"));
  }
  req->method = std::string(method);
  req->target = std::string(target);
  size_t q = target.find('?');
  req->path = std::string(target.substr(0, q));
  req->query = q == std::string_view::npos ? std::string() : std::string(target.substr(q + 1));
  req->version_minor = minor;
  return std::nullopt;
}

}  // namespace

std::optional<uint64_t> parse_content_length(std::string_view v) {
  if (v.empty()) return std::nullopt;
  uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return std::nullopt;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (n > (std::numeric_limits<uint64_t>::max() - d) / 10) {
      n = std::numeric_limits<uint64_t>::max();
    } else {
      n = n * 10 + d;
    }
  }
  return n;
}

namespace {

bool method_needs_length(std::string_view method) {
  return method == "POST" || method == "PUT" || method == "PATCH";
}

}  // namespace

HeadScan scan_head(std::string_view buf, const ParseLimits& limits, size_t resume) {
  HeadScan scan;
  // Leading CRLFs (a client's stray line end after a previous body) are skipped, a bounded number.
  size_t skip = 0;
  while (skip + 1 < buf.size() && buf[skip] == '\r' && buf[skip + 1] == '\n' && skip < 16) skip += 2;
  scan.skip = skip;
  auto too_large = [&] {
    scan.state = HeadScanState::kError;
    scan.error = HttpError{431, "request_header_fields_too_large",
                           str_cat("request head exceeds ", limits.max_head_bytes, " bytes")};
    return scan;
  };
  for (size_t i = resume > skip ? resume : skip; i < buf.size(); ++i) {
    if (i - skip >= limits.max_head_bytes) return too_large();
    char c = buf[i];
    if (c == '\n') {
      if (i == 0 || buf[i - 1] != '\r') {
        scan.state = HeadScanState::kError;
        scan.error = bad_request("bare LF in the request head: lines must end with CRLF");
        return scan;
      }
      if (i >= skip + 3 && buf[i - 2] == '\n' && buf[i - 3] == '\r') {  // CRLF CRLF ends the head
        scan.state = HeadScanState::kComplete;
        scan.length = i + 1;
        return scan;
      }
    } else if (c == '\r' && i + 1 < buf.size() && buf[i + 1] != '\n') {
      scan.state = HeadScanState::kError;
      scan.error = bad_request("bare CR in the request head: lines must end with CRLF");
      return scan;
    }
  }
  if (buf.size() - skip >= limits.max_head_bytes) return too_large();
  // Resume one byte back: a CR at the end may be followed by its LF in the next read.
  scan.scanned = buf.empty() ? 0 : buf.size() - 1;
  return scan;
}

HeadParse parse_head(std::string_view head, const ParseLimits& limits) {
  HeadParse out;
  ParsedHead parsed;
  Request& req = parsed.request;

  auto fail = [&](HttpError e) {
    out.error = std::move(e);
    return out;
  };

  size_t eol = head.find("\r\n");
  if (eol == std::string_view::npos) return fail(bad_request("request head without CRLF"));
  if (auto err = parse_request_line(head.substr(0, eol), &req)) return fail(std::move(*err));

  size_t pos = eol + 2;
  bool have_length = false, have_host = false;
  std::string_view transfer_encoding;
  bool have_te = false;
  while (pos < head.size()) {
    size_t end = head.find("\r\n", pos);
    if (end == std::string_view::npos) return fail(bad_request("request head without a final CRLF"));
    std::string_view line = head.substr(pos, end - pos);
    pos = end + 2;
    if (line.empty()) break;  // the blank line that ends the head
    if (line.front() == ' ' || line.front() == '\t') {
      return fail(bad_request("obsolete line folding (a header line starting with whitespace) is not accepted"));
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      return fail(bad_request(str_cat("header line without ':': '", excerpt(line), "'")));
    }
    std::string_view name = line.substr(0, colon);
    if (!is_token(name)) {
      return fail(bad_request(str_cat("malformed header name '", excerpt(name), "'")));
    }
    std::string_view value = trim_ows(line.substr(colon + 1));
    for (unsigned char c : value) {
      if (!is_field_char(c)) {
        return fail(bad_request(str_cat("header ", std::string(name), " holds a control character")));
      }
    }
    if (req.headers.size() >= limits.max_headers) {
      return fail(HttpError{431, "request_header_fields_too_large",
                            str_cat("more than ", limits.max_headers, " header fields")});
    }
    if (iequals(name, "Content-Length")) {
      if (have_length) return fail(bad_request("more than one Content-Length header"));
      auto n = parse_content_length(value);
      if (!n) return fail(bad_request(str_cat("Content-Length '", excerpt(value), "' is not a decimal number")));
      have_length = true;
      parsed.content_length = *n;
    } else if (iequals(name, "Transfer-Encoding")) {
      have_te = true;
      transfer_encoding = value;
    } else if (iequals(name, "Host")) {
      if (have_host) return fail(bad_request("more than one Host header"));
      have_host = true;
    } else if (iequals(name, "Connection")) {
      if (list_has(value, "close")) parsed.keep_alive = false;
    } else if (iequals(name, "Expect")) {
      if (!iequals(value, "100-continue")) {
        return fail(HttpError{417, "expectation_failed",
                              str_cat("Expect: ", excerpt(value), " is not supported (only 100-continue)")});
      }
      parsed.expect_continue = req.version_minor >= 1;
    }
    req.headers.push_back(Header{std::string(name), std::string(value)});
  }

  if (have_te) {
    // Both framings at once is the classic request-smuggling shape: refuse outright.
    if (have_length) return fail(bad_request("both Transfer-Encoding and Content-Length sent"));
    return fail(HttpError{501, "not_implemented",
                          str_cat("Transfer-Encoding (", excerpt(transfer_encoding),
                                  ") is not supported; send the body with Content-Length")});
  }
  if (!have_length && method_needs_length(req.method)) {
    return fail(HttpError{411, "length_required", str_cat(req.method, " needs a Content-Length header")});
  }
  if (req.version_minor >= 1 && !have_host) return fail(bad_request("HTTP/1.1 request without a Host header"));
  if (req.version_minor == 0) parsed.keep_alive = false;
  if (parsed.content_length == 0) parsed.expect_continue = false;
  out.head = std::move(parsed);
  return out;
}

}  // namespace splash::http
