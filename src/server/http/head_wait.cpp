#include "server/http/head_wait.h"

#include <algorithm>
#include <cstdio>

#include "core/result.h"

namespace splash::http {

using std::chrono::milliseconds;

HeadWait head_wait_start(HeadClock::time_point now, std::string_view leftover) {
  HeadWait w;
  w.since = now;
  if (!leftover.empty()) head_wait_received(&w, leftover.size(), now);
  return w;
}

void head_wait_received(HeadWait* w, size_t n, HeadClock::time_point now) {
  if (n == 0) return;
  if (w->received == 0) w->first_byte = now;
  w->received += n;
}

HeadClock::time_point head_deadline(const HeadWait& w, const HeadPolicy& policy) {
  HeadClock::time_point hard = w.since + policy.header_timeout;
  if (w.received == 0 || policy.min_rate == 0) return hard;
  // Whole milliseconds of allowance per byte received; saturating is moot below the hard limit.
  auto earned = milliseconds(static_cast<int64_t>(w.received * 1000 / policy.min_rate));
  return std::min(hard, w.first_byte + policy.grace + earned);
}

bool has_request_bytes(std::string_view in) {
  return std::any_of(in.begin(), in.end(), [](char c) { return c != '\r' && c != '\n'; });
}

std::optional<HttpError> check_request_line_bytes(std::string_view in) {
  size_t start = 0;
  while (start < in.size() && (in[start] == '\r' || in[start] == '\n')) ++start;  // RFC 9112 2.2
  for (size_t i = start; i < in.size(); ++i) {
    auto c = static_cast<unsigned char>(in[i]);
    if (c == '\r' || c == '\n') return std::nullopt;  // the line ended: the parser judges the rest
    if (c >= 0x20 && c < 0x7f) continue;
    char hex[8];
    std::snprintf(hex, sizeof(hex), "%02X", c);
    std::string why = c >= 0x80   ? str_cat("is not ASCII; percent-encode it in the target as %", hex)
                      : c == '\t' ? std::string("is a tab; the request line separates its parts with single spaces")
                                  : std::string("is a control character");
    // A TLS handshake record starts with 0x16: the commonest way to send binary bytes to this port.
    if (i == start && c == 0x16) why = "starts a TLS handshake; this server speaks plain HTTP (use http://)";
    return HttpError{400, "invalid_request_error", str_cat("request line byte ", i - start, " (0x", hex, ") ", why)};
  }
  return std::nullopt;
}

std::optional<size_t> pick_head_to_evict(const std::vector<const HeadWait*>& waits, HeadClock::time_point now) {
  std::optional<size_t> best;
  double best_rate = 0;
  for (size_t i = 0; i < waits.size(); ++i) {
    const HeadWait& w = *waits[i];
    // Bytes per millisecond since the first byte; a connection that sent nothing rates -1 (first out).
    double rate = -1;
    if (w.received > 0) {
      auto ms = std::chrono::duration_cast<milliseconds>(now - w.first_byte).count();
      rate = static_cast<double>(w.received) / static_cast<double>(std::max<int64_t>(ms, 1));
    }
    if (!best || rate < best_rate || (rate == best_rate && w.since < waits[*best]->since)) {
      best = i;
      best_rate = rate;
    }
  }
  return best;
}

}  // namespace splash::http
