#include "server/http/connection.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <exception>

#include "core/log.h"
#include "server/http/exchange.h"
#include "server/http/request_parser.h"

namespace splash::http {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr size_t kReadChunk = 64 << 10;
// After a refusal, what a client still sending is allowed before we close anyway.
constexpr size_t kLingerDrainBytes = 16 << 20;
constexpr milliseconds kLingerTime{2000};

int ms_until(Clock::time_point deadline) {
  auto ms = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
  if (ms <= 0) return 0;
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

enum class ReadStatus : uint8_t { kData, kEof, kTimeout, kError };

// Waits until `deadline` for bytes and appends at most `max_bytes` of them to `buf`.
ReadStatus read_some(int fd, std::string* buf, size_t max_bytes, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int r = poll(&p, 1, ms_until(deadline));
    if (r < 0) {
      if (errno == EINTR) continue;
      return ReadStatus::kError;
    }
    if (r == 0) return ReadStatus::kTimeout;
    size_t old = buf->size();
    buf->resize(old + max_bytes);
    ssize_t n = recv(fd, buf->data() + old, max_bytes, MSG_DONTWAIT);
    buf->resize(old + (n > 0 ? static_cast<size_t>(n) : 0));
    if (n > 0) return ReadStatus::kData;
    if (n == 0) return ReadStatus::kEof;
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
    return ReadStatus::kError;
  }
}

bool send_all(int fd, std::string_view data, Clock::time_point deadline) {
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      int r = poll(&p, 1, ms_until(deadline));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL))) return false;
      continue;
    }
    return false;
  }
  return true;
}

// Ends the connection after a response: shut our side, then read (and discard) until the client
// closes, briefly. Closing with unread request bytes would make the kernel send a reset, and the
// client could lose the response it has not read yet.
void linger_close(int fd) {
  shutdown(fd, SHUT_WR);
  auto deadline = Clock::now() + kLingerTime;
  std::string sink;
  size_t drained = 0;
  while (drained < kLingerDrainBytes) {
    sink.clear();
    if (read_some(fd, &sink, kReadChunk, deadline) != ReadStatus::kData) break;
    drained += sink.size();
  }
}

// A refusal by the transport itself (or by pre_body_check): answer, then close.
void refuse(int fd, const SimpleResponse& response, bool head_only, const ServerOptions& options) {
  std::string wire = serialize_response(response, /*close=*/true, head_only);
  if (send_all(fd, wire, Clock::now() + options.write_stall_timeout)) linger_close(fd);
}

SimpleResponse to_response(const HttpError& e) { return error_response(e.status, e.code, e.message); }

// Reads until `in` holds `length` bytes (plus whatever pipelined bytes came with them).
// Deadlines: no byte for body_idle_timeout, or the whole body over body_idle_timeout + length at
// 512 KiB/s (spec 2.7).
ReadStatus read_body(Server::Connection& conn, uint64_t length, const ServerOptions& options) {
  std::string* in = &conn.in;
  auto allowance = milliseconds(static_cast<int64_t>(length / (512 << 10)) * 1000);
  auto total_deadline = Clock::now() + options.body_idle_timeout + allowance;
  conn.body_received.store(std::min<uint64_t>(in->size(), length));  // what came with the head counts
  conn.body_since_ms.store(
      std::chrono::duration_cast<milliseconds>(Clock::now().time_since_epoch()).count());
  conn.receiving_body.store(true);
  ReadStatus st = ReadStatus::kData;
  while (in->size() < length) {
    auto deadline = std::min(total_deadline, Clock::now() + options.body_idle_timeout);
    size_t want = static_cast<size_t>(std::min<uint64_t>(length - in->size(), kReadChunk));
    st = read_some(conn.fd, in, want, deadline);
    if (st != ReadStatus::kData) break;
    conn.body_received.store(in->size());
  }
  conn.receiving_body.store(false);
  return st;
}

void dispatch(const Handler& handler, const Request& request, const std::shared_ptr<Exchange>& exchange) {
  std::shared_ptr<ResponseWriter> writer = make_writer(exchange);
  if (!handler) {
    SimpleResponse r = error_response(404, "not_found", str_cat("no route for ", request.method, " ", request.path));
    writer->respond(r.status, std::move(r.headers), std::move(r.body));
    return;
  }
  try {
    handler(request, writer);
  } catch (const std::exception& e) {
    log_error("http: handler for ", request.method, " ", request.path, " threw: ", e.what());
    SimpleResponse r = error_response(500, "internal_server_error", "internal error while handling the request");
    writer->respond(r.status, std::move(r.headers), std::move(r.body));  // ignored if already started
  } catch (...) {
    log_error("http: handler for ", request.method, " ", request.path, " threw a non-exception");
    SimpleResponse r = error_response(500, "internal_server_error", "internal error while handling the request");
    writer->respond(r.status, std::move(r.headers), std::move(r.body));
  }
}

// Drains the exchange's output to the socket until the response is complete, watching the socket
// for a disconnect meanwhile. Returns true when the connection may serve another request.
bool pump(int fd, Exchange& ex, const ServerOptions& options, const std::atomic<bool>& stopping) {
  auto last_progress = Clock::now();
  bool peer_shut_write = false;
  for (;;) {
    Exchange::Flush f = ex.flush(fd);
    auto now = Clock::now();
    if (f.sent > 0) last_progress = now;
    if (f.failed) {
      ex.client_lost();
      return false;
    }
    if (f.done()) return !peer_shut_write;
    if (f.abandoned && f.phase == Exchange::Phase::kWaiting) {
      SimpleResponse r = error_response(500, "internal_server_error", "the request ended without a response");
      ex.respond(r.status, std::move(r.headers), std::move(r.body));
      continue;
    }
    if (f.abandoned && f.phase == Exchange::Phase::kStreaming) {
      // No final chunk: the client sees a truncated stream, not a clean end.
      ex.client_lost();
      return false;
    }
    if (stopping.load()) {
      ex.client_lost();
      return false;
    }
    if (f.pending > 0 && now - last_progress >= options.write_stall_timeout) {
      log_info("http: dropping a client that read nothing for ",
               std::chrono::duration_cast<milliseconds>(options.write_stall_timeout).count(), " ms");
      ex.client_lost();
      return false;
    }
    pollfd p[2] = {};
    p[0].fd = fd;
    p[0].events = static_cast<short>((peer_shut_write ? 0 : POLLRDHUP) | (f.pending > 0 ? POLLOUT : 0));
    p[1].fd = ex.wake_fd();
    p[1].events = POLLIN;
    int timeout = 1000;  // a safety net; stop() and the writer wake the poll themselves
    if (f.pending > 0) timeout = std::min(timeout, ms_until(last_progress + options.write_stall_timeout) + 1);
    int r = poll(p, 2, timeout);
    if (r < 0 && errno != EINTR) {
      ex.client_lost();
      return false;
    }
    if (r <= 0) continue;
    if (p[1].revents & POLLIN) ex.clear_wake();
    if (p[0].revents & (POLLHUP | POLLERR | POLLNVAL)) {
      ex.client_lost();
      return false;
    }
    if (p[0].revents & POLLRDHUP) {
      // The client closed (or half-closed) its side: spec 2.8 treats both as a cancel. A response
      // already complete is still sent; anything in progress is cancelled now.
      peer_shut_write = true;
      if (f.phase != Exchange::Phase::kComplete) {
        ex.client_lost();
        return false;
      }
    }
  }
}

}  // namespace

ServeOutcome serve_connection(Server::Connection& conn, const ServerOptions& options, const Handler& handler,
                              const std::atomic<bool>& stopping) {
  const int fd = conn.fd;
  const ParseLimits limits{options.max_head_bytes, options.max_headers};
  std::string& in = conn.in;  // received, not yet consumed (a pipelined next request may wait here)
  while (!stopping.load()) {
    // --- head (the loop gathered it; a pipelined one may already be here too)
    HeadScan scan = scan_head(in, limits);
    if (scan.state == HeadScanState::kIncomplete) return ServeOutcome::kKeep;
    if (scan.state == HeadScanState::kError) {
      refuse(fd, to_response(scan.error), false, options);
      return ServeOutcome::kClose;
    }
    HeadParse parsed = parse_head(std::string_view(in).substr(scan.skip, scan.length - scan.skip), limits);
    in.erase(0, scan.length);
    if (!parsed.ok()) {
      refuse(fd, to_response(parsed.error), false, options);
      return ServeOutcome::kClose;
    }
    ParsedHead& head = *parsed.head;
    Request& req = head.request;
    req.remote_addr = conn.remote_addr;
    req.local_addr = conn.local_addr;
    req.local_port = conn.local_port;
    const bool head_only = req.method == "HEAD";

    // --- checks decided before the body is read
    std::optional<SimpleResponse> refusal;
    if (options.pre_body_check) {
      try {
        refusal = options.pre_body_check(req);
      } catch (...) {
        refusal = error_response(500, "internal_server_error", "internal error while checking the request");
      }
    }
    if (!refusal && head.content_length > options.max_request_bytes) {
      refusal = error_response(413, "request_too_large",
                               str_cat("request body of ", head.content_length, " bytes exceeds the limit of ",
                                       options.max_request_bytes, " bytes (--max-request-size)"));
    }
    if (refusal) {
      bool body_pending = head.content_length > 0;
      if (body_pending || !head.keep_alive) {
        refuse(fd, *refusal, head_only, options);
        return ServeOutcome::kClose;
      }
      if (!send_all(fd, serialize_response(*refusal, false, head_only), Clock::now() + options.write_stall_timeout)) {
        return ServeOutcome::kClose;
      }
      continue;
    }

    // --- body
    if (head.expect_continue && in.size() < head.content_length) {
      if (!send_all(fd, "HTTP/1.1 100 Continue\r\n\r\n", Clock::now() + options.write_stall_timeout)) {
        return ServeOutcome::kClose;
      }
    }
    ReadStatus st = read_body(conn, head.content_length, options);
    if (conn.evicted.load()) {
      refuse(fd,
             error_response(503, "frontend_overloaded",
                            "every request slot is taken and this upload was the slowest; retry shortly"),
             head_only, options);
      return ServeOutcome::kClose;
    }
    if (st == ReadStatus::kTimeout) {
      refuse(fd, error_response(408, "request_timeout", "request body not received in time"), head_only, options);
      return ServeOutcome::kClose;
    }
    if (st != ReadStatus::kData) return ServeOutcome::kClose;
    const size_t body_len = static_cast<size_t>(head.content_length);
    req.body.assign(in, 0, body_len);
    in.erase(0, body_len);

    // --- handler and response
    Exchange::Config config;
    config.version_minor = req.version_minor;
    config.head_only = head_only;
    config.close = !head.keep_alive;
    config.max_buffered = options.max_buffered_bytes;
    auto exchange = std::make_shared<Exchange>(config);
    dispatch(handler, req, exchange);
    if (!pump(fd, *exchange, options, stopping)) return ServeOutcome::kClose;
    if (exchange->close_after()) {
      linger_close(fd);
      return ServeOutcome::kClose;
    }
  }
  return ServeOutcome::kClose;
}

}  // namespace splash::http
