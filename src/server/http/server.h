// Our own small HTTP/1.1 server on POSIX sockets: one acceptor thread, one thread per connection
// up to max_connections, strict request parsing (request_parser.h), limits and timeouts decided by
// the transport, streamed responses with disconnect detection. See docs/SERVER.md "Transport".
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/result.h"
#include "server/http/message.h"

namespace splash::http {

struct ServerOptions {
  std::string host = "127.0.0.1";  // IPv4 address, "localhost", or an IPv6 address ("::1")
  uint16_t port = 8000;              // 0: any free port (see Server::bound_port)
  size_t max_request_bytes = 128 << 20;  // 413 beyond, decided from Content-Length before reading the body
  int max_connections = 96;              // queue_size + 64; beyond: 503 frontend_overloaded
  // Head due this long after the connection (or the previous response) began waiting: 408 if part
  // of it came, a silent close otherwise. Milliseconds so tests can use short ones; a
  // std::chrono::seconds value converts implicitly.
  std::chrono::milliseconds header_timeout{30000};
  // Body upload: 408 when no byte arrives for this long, or when the whole body takes longer than
  // this plus size / 512 KiB/s (spec 2.7).
  std::chrono::milliseconds body_idle_timeout{30000};
  // A client that accepts no response bytes for this long is dropped (on_disconnect runs).
  std::chrono::milliseconds write_stall_timeout{30000};
  size_t max_head_bytes = 64 << 10;      // request line + headers; 431 beyond
  size_t max_headers = 100;              // 431 beyond
  size_t max_buffered_bytes = 8 << 20;   // per response; a stream that outgrows it drops the client
  // Runs after the request head is parsed and before the body is read (auth, Host, Origin checks):
  // return a response to refuse (401/403/413...), std::nullopt to go on. Runs on the connection's
  // thread; may be called concurrently for different connections.
  std::function<std::optional<SimpleResponse>(const Request& head)> pre_body_check;
};

class Server {
 public:
  // Binds and listens (accepting starts with start()). Error text: "cannot bind HOST:PORT: <strerror>".
  static Result<std::unique_ptr<Server>> bind(const ServerOptions& options);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  void set_handler(Handler handler);  // before start(); without one every request gets 404
  Status start();                     // accept loop in a background thread
  // Stops accepting, shuts every connection down (in-flight exchanges see a disconnect and their
  // on_disconnect runs), joins all threads. Idempotent. Returns once the handlers' calls on the
  // connection threads have returned.
  void stop();
  uint16_t bound_port() const { return bound_port_; }

  struct Connection;  // one accepted socket and its thread (server.cpp)

 private:
  // Out of line (like the destructor): Connection is incomplete here, and an inline constructor
  // would need its destructor for the unwinding path.
  explicit Server(const ServerOptions& options);
  void accept_loop();
  void accept_ready();
  void refuse(int fd);
  bool yield_idle_locked();
  void reap_finished();
  void service_lingering();

  ServerOptions options_;
  Handler handler_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: stop() wakes the acceptor
  uint16_t bound_port_ = 0;
  std::atomic<bool> stopping_{false};
  bool started_ = false;
  bool stopped_ = false;
  std::thread acceptor_;

  std::mutex conns_mu_;  // guards every Connection's fd and the list's membership
  std::list<std::unique_ptr<Connection>> conns_;

  // Refused sockets (503 sent, write side shut) drained for up to 2 s so the client reads the
  // 503 instead of a reset. Acceptor thread only.
  struct Lingering {
    int fd;
    std::chrono::steady_clock::time_point deadline;
  };
  std::vector<Lingering> lingering_;
};

}  // namespace splash::http
