// Our own small HTTP/1.1 server on POSIX sockets. One event-loop thread accepts connections and
// holds every connection that is waiting for a request head (epoll; no thread each, so thousands of
// idle or slow clients cost a descriptor and a buffer each); a connection whose head is complete
// gets a thread of its own for the body, the handler and the response, up to max_connections, and
// goes back to the loop when a keep-alive response is done. Strict request parsing
// (request_parser.h), limits and timeouts decided by the transport, streamed responses with
// disconnect detection. See docs/SERVER.md "Transport" and "Limits and abuse".
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "server/http/message.h"

namespace splash::http {

struct ServerOptions {
  std::string host = "127.0.0.1";  // IPv4 address, "localhost", or an IPv6 address ("::1")
  uint16_t port = 8000;              // 0: any free port (see Server::bound_port)
  size_t max_request_bytes = 128 << 20;  // 413 beyond, decided from Content-Length before reading the body
  // Requests being served at once (head complete: body, handler, response); a complete head
  // beyond this gets 503 frontend_overloaded unless an upload slower than 512 KiB/s for over a
  // second makes room (it gets the 503 instead). queue_size + 64 in `splash serve`.
  int max_connections = 96;
  // Connections waiting for a head, held by the event loop. When full, the one that sent nothing
  // for longest, else the slowest head, makes room for a new connection (a partial head gets 503).
  int max_waiting = 4096;
  // Head due this long after the connection (or the previous response) began waiting: 408 if part
  // of it came, a silent close otherwise. Milliseconds so tests can use short ones; a
  // std::chrono::seconds value converts implicitly.
  std::chrono::milliseconds header_timeout{30000};
  // Once a head's first byte came it must also keep up a minimum rate: due head_grace plus one
  // second per head_min_rate bytes after that byte (never later than header_timeout). 0: no rate.
  std::chrono::milliseconds head_grace{5000};
  size_t head_min_rate = 1024;
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

// What the transport has seen, for /status (`http.connections`). Gauges are as of the event loop's
// latest pass.
struct ConnectionStats {
  int64_t waiting = 0;    // connections without a complete head, held by the loop (gauge)
  int64_t serving = 0;    // connections with a request in progress, a thread each (gauge)
  int64_t lingering = 0;  // refused connections drained before closing (gauge)
  int64_t accepted = 0;
  int64_t evicted = 0;             // waiting connections or slow uploads ended to make room for new ones
  int64_t head_timeouts = 0;       // heads not complete in time (408, or a silent close when idle)
  int64_t refused_overloaded = 0;  // complete heads beyond max_connections (503)
  int64_t refused_not_http = 0;    // first bytes no request line may hold (400 at once)
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
  ConnectionStats stats() const;  // thread-safe

  struct Connection;  // one accepted socket: its buffer, head-stage state and serving thread

 private:
  // Out of line (like the destructor): Connection is incomplete here, and an inline constructor
  // would need its destructor for the unwinding path.
  explicit Server(const ServerOptions& options);
  // --- the event loop's thread (server.cpp) ---
  void event_loop();
  void accept_ready();
  void read_waiting(int fd);
  void advance_waiting(int fd);
  void serve(std::unique_ptr<Connection> conn);
  void reap_finished();
  void sweep(std::chrono::steady_clock::time_point now);
  void start_waiting(std::unique_ptr<Connection> conn);
  std::unique_ptr<Connection> take_waiting(int fd);
  void evict_one_waiting();
  int serving_count() const;
  bool evict_slowest_upload();
  void refuse(int fd, const std::string& wire);
  void drain_lingering(int fd);
  void close_lingering(int fd);

  ServerOptions options_;
  Handler handler_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;   // eventfd: stop() and finished serving threads wake the loop
  int epoll_fd_ = -1;  // the listening socket, wake_fd_, waiting and lingering connections
  uint16_t bound_port_ = 0;
  std::atomic<bool> stopping_{false};
  bool started_ = false;
  bool stopped_ = false;
  std::thread loop_;

  // The loop's thread only, until stop() has joined it; then stop() alone.
  std::unordered_map<int, std::unique_ptr<Connection>> waiting_;  // by descriptor
  std::list<std::unique_ptr<Connection>> serving_;                // each with its thread
  // Refused sockets (answer sent, write side shut) drained for up to 2 s so the client reads the
  // answer instead of a reset; at most 1024, the oldest closed first.
  std::unordered_map<int, std::chrono::steady_clock::time_point> lingering_;

  struct AtomicStats {
    std::atomic<int64_t> waiting{0}, serving{0}, lingering{0}, accepted{0}, evicted{0}, head_timeouts{0},
        refused_overloaded{0}, refused_not_http{0};
  };
  AtomicStats stats_;
};

}  // namespace splash::http
