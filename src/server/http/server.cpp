#include "server/http/server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

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

int64_t server_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
}

// The fixed answer for a connection over the cap; built once per refusal (no per-request state).
std::string overloaded_response() {
  return serialize_response(
      error_response(503, "frontend_overloaded", "too many open connections; retry shortly"), /*close=*/true,
      /*head_only=*/false);
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
  started_ = true;
  acceptor_ = std::thread([this] { accept_loop(); });
  return {};
}

void Server::stop() {
  if (stopped_) return;
  stopped_ = true;
  stopping_.store(true);
  if (started_) {
    uint64_t one = 1;
    ssize_t n = ::write(wake_fd_, &one, sizeof(one));
    (void)n;
    acceptor_.join();
  }
  if (listen_fd_ >= 0) close(listen_fd_);  // new connections are refused by the kernel from now on
  listen_fd_ = -1;
  // Shutting a socket down wakes its thread's poll/recv: in-flight exchanges see a disconnect.
  {
    std::lock_guard<std::mutex> lock(conns_mu_);
    for (auto& c : conns_) {
      if (c->fd >= 0) shutdown(c->fd, SHUT_RDWR);
    }
  }
  for (auto& c : conns_) {
    if (c->thread.joinable()) c->thread.join();
  }
  conns_.clear();
  for (const auto& l : lingering_) close(l.fd);
  lingering_.clear();
  if (wake_fd_ >= 0) close(wake_fd_);
  wake_fd_ = -1;
}

void Server::accept_loop() {
  while (!stopping_.load()) {
    reap_finished();
    std::vector<pollfd> fds;
    fds.push_back({listen_fd_, POLLIN, 0});
    fds.push_back({wake_fd_, POLLIN, 0});
    for (const auto& l : lingering_) fds.push_back({l.fd, POLLIN, 0});
    int timeout = lingering_.empty() ? 1000 : 100;
    int r = poll(fds.data(), static_cast<nfds_t>(fds.size()), timeout);
    if (r < 0 && errno != EINTR) {
      log_error("http: poll on the listening socket failed: ", std::strerror(errno));
      return;
    }
    if (stopping_.load()) return;
    if (r > 0 && (fds[0].revents & POLLIN)) accept_ready();
    service_lingering();
  }
}

void Server::accept_ready() {
  for (;;) {
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof(peer);
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        // EMFILE and friends: back off instead of spinning on a listen socket that stays readable.
        log_warn("http: accept failed: ", std::strerror(errno));
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // SSE tokens go out at once

    std::lock_guard<std::mutex> lock(conns_mu_);
    int active = 0;
    for (const auto& c : conns_) {
      if (!c->done.load() && !c->yielded) ++active;
    }
    if (active >= options_.max_connections && !yield_idle_locked()) {
      refuse(fd);
      continue;
    }
    auto conn = std::make_unique<Connection>();
    conn->fd = fd;
    conn->remote_addr = address_string(peer);
    sockaddr_storage local{};
    socklen_t local_len = sizeof(local);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) == 0) {
      conn->local_addr = address_string(local);
      conn->local_port = address_port(local);
    }
    conn->idle_since_ms.store(server_now_ms());
    Connection* raw = conn.get();
    conns_.push_back(std::move(conn));
    raw->thread = std::thread([this, raw] {
      serve_connection(*raw, options_, handler_, stopping_);
      std::lock_guard<std::mutex> done_lock(conns_mu_);
      close(raw->fd);
      raw->fd = -1;
      raw->done.store(true);
    });
  }
}

// Spec 2.8: when full, connections that have not sent a head yet make room, the oldest first.
bool Server::yield_idle_locked() {
  Connection* oldest = nullptr;
  for (auto& c : conns_) {
    if (c->done.load() || c->yielded || c->fd < 0 || !c->idle.load()) continue;
    if (!oldest || c->idle_since_ms.load() < oldest->idle_since_ms.load()) oldest = c.get();
  }
  if (!oldest) return false;
  oldest->yielded = true;
  shutdown(oldest->fd, SHUT_RDWR);
  return true;
}

void Server::refuse(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  std::string wire = overloaded_response();
  // A fresh socket's send buffer takes this at once; if not, the client gets what fits.
  ssize_t n = send(fd, wire.data(), wire.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)n;
  shutdown(fd, SHUT_WR);
  if (lingering_.size() >= kMaxLingering) {
    close(lingering_.front().fd);
    lingering_.erase(lingering_.begin());
  }
  lingering_.push_back({fd, Clock::now() + kRefuseLinger});
}

void Server::service_lingering() {
  auto now = Clock::now();
  std::vector<Lingering> keep;
  keep.reserve(lingering_.size());
  char sink[4096];
  for (const auto& l : lingering_) {
    bool finished = now >= l.deadline;
    for (int i = 0; i < 64 && !finished; ++i) {  // bounded: a client that keeps sending gets no more
      ssize_t n = recv(l.fd, sink, sizeof(sink), MSG_DONTWAIT);
      if (n > 0 || (n < 0 && errno == EINTR)) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      finished = true;  // EOF or error
    }
    if (finished) {
      close(l.fd);
    } else {
      keep.push_back(l);
    }
  }
  lingering_ = std::move(keep);
}

void Server::reap_finished() {
  std::vector<std::unique_ptr<Connection>> finished;
  {
    std::lock_guard<std::mutex> lock(conns_mu_);
    for (auto it = conns_.begin(); it != conns_.end();) {
      if ((*it)->done.load()) {
        finished.push_back(std::move(*it));
        it = conns_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& c : finished) c->thread.join();
}

}  // namespace splash::http
