#include "server/http/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/log.h"
#include "server/http/connection.h"
#include "server/http/exchange.h"

namespace splash::http {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kListenBacklog = 1024;
constexpr size_t kMaxLingering = 1024;  // spec 2.8
constexpr std::chrono::milliseconds kRefuseLinger{2000};
constexpr int kMaxEvents = 256;
constexpr int kMaxAcceptsPerWake = 256;  // then the loop serves its other descriptors too
constexpr size_t kHeadReadChunk = 16 << 10;
// Deadlines of waiting and lingering connections are checked this often (one pass over them).
constexpr std::chrono::milliseconds kSweepInterval{50};
// An upload may be evicted for a new request once it has run this long below this rate.
constexpr std::chrono::milliseconds kUploadGrace{1000};
constexpr double kUploadEvictRate = 512 << 10;  // bytes per second

std::string address_string(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(ss).sin_addr, buf, sizeof(buf));
  } else if (ss.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr, buf, sizeof(buf));
  }
  return buf;
}

uint16_t address_port(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(ss).sin_port);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(ss).sin6_port);
  return 0;
}

int loop_timeout_ms(Clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
  return ms <= 0 ? 0 : static_cast<int>(std::min<int64_t>(ms, 1000)) + 1;
}

void watch(int epoll_fd, int fd, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev);
}

void wake(int event_fd) {
  uint64_t one = 1;
  ssize_t n = ::write(event_fd, &one, sizeof(one));
  (void)n;
}

// A refusal by the loop on the wire: the error body, and the connection closes after it.
std::string refusal_wire(const HttpError& e) {
  return serialize_response(error_response(e.status, e.code, e.message), /*close=*/true, /*head_only=*/false);
}

// The fixed answer for a connection over the cap.
std::string overloaded_response() {
  return refusal_wire({503, "frontend_overloaded", "too many open connections; retry shortly"});
}

}  // namespace

Result<std::unique_ptr<Server>> Server::bind(const ServerOptions& options) {
  auto fail = [&](std::string_view why) {
    return make_error("cannot bind ", options.host, ":", options.port, ": ", why);
  };
  sockaddr_storage addr{};
  socklen_t addr_len = 0;
  std::string host = options.host == "localhost" ? "127.0.0.1" : options.host;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(options.port);
    addr_len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(options.port);
    addr_len = sizeof(sockaddr_in6);
  } else {
    return fail("not an IPv4 or IPv6 address");
  }
  if (options.max_connections < 1) return fail("max_connections must be at least 1");

  int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return fail(std::strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (addr.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), addr_len) != 0 || listen(fd, kListenBacklog) != 0) {
    int err = errno;
    close(fd);
    return fail(std::strerror(err));
  }
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_len);

  std::unique_ptr<Server> server(new Server(options));
  server->listen_fd_ = fd;
  server->bound_port_ = address_port(bound);
  return server;
}

Server::Server(const ServerOptions& options) : options_(options) {}

Server::~Server() { stop(); }

void Server::set_handler(Handler handler) {
  SPLASH_CHECK_MSG(!started_, "Server::set_handler() after start()");
  handler_ = std::move(handler);
}

Status Server::start() {
  SPLASH_CHECK_MSG(!started_ && !stopped_, "Server::start() called twice or after stop()");
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return make_error("cannot start the HTTP server: eventfd: ", std::strerror(errno));
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return make_error("cannot start the HTTP server: epoll: ", std::strerror(errno));
  watch(epoll_fd_, listen_fd_, EPOLLIN);
  watch(epoll_fd_, wake_fd_, EPOLLIN);
  started_ = true;
  loop_ = std::thread([this] { event_loop(); });
  return {};
}

void Server::stop() {
  if (stopped_) return;
  stopped_ = true;
  stopping_.store(true);
  if (started_) {
    wake(wake_fd_);
    loop_.join();
  }
  if (listen_fd_ >= 0) close(listen_fd_);  // new connections are refused by the kernel from now on
  listen_fd_ = -1;
  // The loop has ended: this thread alone owns the sets now. Shutting a served socket down wakes
  // its thread's poll/recv: in-flight exchanges see a disconnect.
  for (auto& c : serving_) shutdown(c->fd, SHUT_RDWR);
  for (auto& c : serving_) {
    if (c->thread.joinable()) c->thread.join();
    close(c->fd);
  }
  serving_.clear();
  for (auto& [fd, c] : waiting_) close(fd);
  waiting_.clear();
  for (const auto& [fd, deadline] : lingering_) close(fd);
  lingering_.clear();
  if (epoll_fd_ >= 0) close(epoll_fd_);
  epoll_fd_ = -1;
  if (wake_fd_ >= 0) close(wake_fd_);
  wake_fd_ = -1;
}

// --- the event loop ------------------------------------------------------------------------------

void Server::event_loop() {
  epoll_event events[kMaxEvents];
  auto next_sweep = Clock::now();
  while (!stopping_.load()) {
    bool timed = !waiting_.empty() || !lingering_.empty();
    int timeout = timed ? loop_timeout_ms(next_sweep) : 1000;
    int n = epoll_wait(epoll_fd_, events, kMaxEvents, timeout);
    if (n < 0 && errno != EINTR) {
      log_error("http: epoll_wait failed: ", std::strerror(errno));
      return;
    }
    if (stopping_.load()) return;
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        accept_ready();
      } else if (fd == wake_fd_) {
        uint64_t count;
        ssize_t r = ::read(wake_fd_, &count, sizeof(count));
        (void)r;
      } else if (lingering_.count(fd)) {
        drain_lingering(fd);
      } else if (waiting_.count(fd)) {
        read_waiting(fd);
      }
    }
    reap_finished();
    auto now = Clock::now();
    if (now >= next_sweep) {
      sweep(now);
      next_sweep = now + kSweepInterval;
    }
    stats_.waiting.store(static_cast<int64_t>(waiting_.size()));
    stats_.serving.store(static_cast<int64_t>(serving_.size()));
    stats_.lingering.store(static_cast<int64_t>(lingering_.size()));
  }
}

ConnectionStats Server::stats() const {
  ConnectionStats s;
  s.waiting = stats_.waiting.load();
  s.serving = stats_.serving.load();
  s.lingering = stats_.lingering.load();
  s.accepted = stats_.accepted.load();
  s.evicted = stats_.evicted.load();
  s.head_timeouts = stats_.head_timeouts.load();
  s.refused_overloaded = stats_.refused_overloaded.load();
  s.refused_not_http = stats_.refused_not_http.load();
  return s;
}

void Server::accept_ready() {
  for (int accepted = 0; accepted < kMaxAcceptsPerWake; ++accepted) {
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof(peer);
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        // EMFILE and friends: make room, and back off instead of spinning on a readable socket.
        log_warn("http: accept failed: ", std::strerror(errno));
        if (!waiting_.empty()) evict_one_waiting();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      return;
    }
    stats_.accepted.fetch_add(1);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // SSE tokens go out at once
    if (static_cast<int>(waiting_.size()) >= options_.max_waiting) evict_one_waiting();

    auto conn = std::make_unique<Connection>();
    conn->fd = fd;
    conn->remote_addr = address_string(peer);
    sockaddr_storage local{};
    socklen_t local_len = sizeof(local);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) == 0) {
      conn->local_addr = address_string(local);
      conn->local_port = address_port(local);
    }
    start_waiting(std::move(conn));
  }
}

void Server::start_waiting(std::unique_ptr<Connection> conn) {
  int fd = conn->fd;
  conn->wait = head_wait_start(Clock::now(), conn->in);
  watch(epoll_fd_, fd, EPOLLIN | EPOLLRDHUP);
  waiting_.emplace(fd, std::move(conn));
  advance_waiting(fd);  // a handed-back connection may hold the start of its next head already
}

std::unique_ptr<Server::Connection> Server::take_waiting(int fd) {
  auto it = waiting_.find(fd);
  std::unique_ptr<Connection> conn = std::move(it->second);
  waiting_.erase(it);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  return conn;
}

void Server::read_waiting(int fd) {
  Connection& c = *waiting_.at(fd);
  // Never more than a head's limit in the buffer: scan_head answers 431 beyond it. Bytes land in
  // the loop's scratch first, so a waiting connection's buffer holds what it sent and no more.
  const size_t cap = options_.max_head_bytes + kHeadReadChunk;
  char scratch[kHeadReadChunk];
  for (;;) {
    if (c.in.size() >= cap) break;
    size_t want = std::min(kHeadReadChunk, cap - c.in.size());
    ssize_t n = recv(fd, scratch, want, MSG_DONTWAIT);
    if (n > 0) {
      c.in.append(scratch, static_cast<size_t>(n));
      head_wait_received(&c.wait, static_cast<size_t>(n), Clock::now());
      if (static_cast<size_t>(n) < want) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    // The client closed or half-closed (or failed). A complete head is still served: the serving
    // thread sees the half-close and cancels as spec 2.8 says. Anything less is dropped unanswered.
    if (scan_head(c.in, {options_.max_head_bytes, options_.max_headers}, c.wait.scanned).state ==
        HeadScanState::kIncomplete) {
      close(take_waiting(fd)->fd);
      return;
    }
    break;
  }
  advance_waiting(fd);
}

void Server::advance_waiting(int fd) {
  Connection& c = *waiting_.at(fd);
  if (auto bad = check_request_line_bytes(c.in)) {
    stats_.refused_not_http.fetch_add(1);
    refuse(take_waiting(fd)->fd, refusal_wire(*bad));
    return;
  }
  HeadScan scan = scan_head(c.in, {options_.max_head_bytes, options_.max_headers}, c.wait.scanned);
  if (scan.state == HeadScanState::kIncomplete) {
    c.wait.scanned = scan.scanned;
    return;
  }
  std::unique_ptr<Connection> conn = take_waiting(fd);
  if (scan.state == HeadScanState::kError) {  // bare CR/LF, or over the head limit: 400 / 431
    refuse(conn->fd, refusal_wire(scan.error));
    return;
  }
  reap_finished();
  if (serving_count() >= options_.max_connections && !evict_slowest_upload()) {
    stats_.refused_overloaded.fetch_add(1);
    refuse(conn->fd, overloaded_response());
    return;
  }
  serve(std::move(conn));
}

void Server::serve(std::unique_ptr<Connection> conn) {
  Connection* raw = conn.get();
  serving_.push_back(std::move(conn));
  raw->thread = std::thread([this, raw] {
    raw->keep = serve_connection(*raw, options_, handler_, stopping_) == ServeOutcome::kKeep;
    raw->done.store(true);
    wake(wake_fd_);
  });
}

void Server::reap_finished() {
  for (auto it = serving_.begin(); it != serving_.end();) {
    if (!(*it)->done.load()) {
      ++it;
      continue;
    }
    std::unique_ptr<Connection> conn = std::move(*it);
    it = serving_.erase(it);
    conn->thread.join();
    conn->done.store(false);
    if (conn->keep && !stopping_.load()) {
      conn->in.shrink_to_fit();  // a body's worth of capacity would stay with an idle connection
      start_waiting(std::move(conn));
    } else {
      close(conn->fd);
    }
  }
}

int Server::serving_count() const {
  int n = 0;
  for (const auto& c : serving_) n += c->evicted.load() ? 0 : 1;
  return n;
}

// Every serving slot is taken: an upload that has run for a while below the rate the body deadline
// allows for (512 KiB/s, spec 2.7) makes room, the slowest first. Its thread answers 503 and ends;
// the slot counts as free at once.
bool Server::evict_slowest_upload() {
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
  Connection* slowest = nullptr;
  double slowest_rate = 0;
  for (const auto& c : serving_) {
    if (c->evicted.load() || !c->receiving_body.load()) continue;
    int64_t ms = now_ms - c->body_since_ms.load();
    if (ms < kUploadGrace.count()) continue;
    double rate = static_cast<double>(c->body_received.load()) * 1000.0 / static_cast<double>(ms);
    if (rate >= kUploadEvictRate) continue;
    if (!slowest || rate < slowest_rate) {
      slowest = c.get();
      slowest_rate = rate;
    }
  }
  if (!slowest) return false;
  slowest->evicted.store(true);
  shutdown(slowest->fd, SHUT_RD);  // its read sees the end at once; the write side stays for the 503
  stats_.evicted.fetch_add(1);
  return true;
}

// Spec 2.8: when full, connections that have not sent a head yet make room, the oldest first; then
// the slowest partial heads, which get a 503 (head_wait.h).
void Server::evict_one_waiting() {
  std::vector<const HeadWait*> waits;
  std::vector<int> fds;
  waits.reserve(waiting_.size());
  fds.reserve(waiting_.size());
  for (const auto& [fd, c] : waiting_) {
    waits.push_back(&c->wait);
    fds.push_back(fd);
  }
  auto victim = pick_head_to_evict(waits, Clock::now());
  if (!victim) return;
  std::unique_ptr<Connection> conn = take_waiting(fds[*victim]);
  stats_.evicted.fetch_add(1);
  if (has_request_bytes(conn->in)) {
    refuse(conn->fd, overloaded_response());
  } else {
    close(conn->fd);
  }
}

void Server::sweep(Clock::time_point now) {
  const HeadPolicy policy{options_.header_timeout, options_.head_grace, options_.head_min_rate};
  std::vector<int> expired;
  for (const auto& [fd, c] : waiting_) {
    if (now >= head_deadline(c->wait, policy)) expired.push_back(fd);
  }
  for (int fd : expired) {
    std::unique_ptr<Connection> conn = take_waiting(fd);
    stats_.head_timeouts.fetch_add(1);
    if (!has_request_bytes(conn->in)) {
      close(conn->fd);  // an idle keep-alive connection, or one that never spoke: no 408
      continue;
    }
    auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - conn->wait.since).count();
    std::string why = str_cat("request head not received in time: ", conn->in.size(), " bytes in ", waited,
                              " ms (a head must complete within ", options_.header_timeout.count(),
                              " ms and, from ", options_.head_grace.count(), " ms after its first byte, keep up ",
                              options_.head_min_rate, " bytes/s)");
    refuse(conn->fd, refusal_wire({408, "request_timeout", why}));
  }
  std::vector<int> done;
  for (const auto& [fd, deadline] : lingering_) {
    if (now >= deadline) done.push_back(fd);
  }
  for (int fd : done) close_lingering(fd);
}

// --- refusals by the loop --------------------------------------------------------------------

void Server::refuse(int fd, const std::string& wire) {
  // A socket's send buffer takes a short answer at once; if not, the client gets what fits.
  ssize_t n = send(fd, wire.data(), wire.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)n;
  shutdown(fd, SHUT_WR);
  if (lingering_.size() >= kMaxLingering) {
    auto oldest = std::min_element(lingering_.begin(), lingering_.end(),
                                   [](const auto& a, const auto& b) { return a.second < b.second; });
    close_lingering(oldest->first);
  }
  watch(epoll_fd_, fd, EPOLLIN | EPOLLRDHUP);
  lingering_.emplace(fd, Clock::now() + kRefuseLinger);
}

void Server::drain_lingering(int fd) {
  char sink[4096];
  for (int i = 0; i < 64; ++i) {  // bounded: a client that keeps sending gets no more
    ssize_t n = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
    if (n > 0 || (n < 0 && errno == EINTR)) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    break;  // EOF or error
  }
  close_lingering(fd);
}

void Server::close_lingering(int fd) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  lingering_.erase(fd);
}

}  // namespace splash::http
