// One accepted connection (internal to the transport): its thread reads request heads and bodies,
// applies the limits, calls the handler and drains its response (server.h, exchange.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "server/http/server.h"

namespace splash::http {

// Shared between the connection's thread and the acceptor. `fd` is closed, and `yielded` set, only
// under the Server's connection mutex, so the acceptor and stop() never touch a reused descriptor.
struct Server::Connection {
  int fd = -1;
  std::string remote_addr, local_addr;
  uint16_t local_port = 0;
  std::atomic<bool> idle{true};           // waiting for a head, not one byte of it received yet
  std::atomic<int64_t> idle_since_ms{0};  // steady clock, when idle last became true
  std::atomic<bool> done{false};          // the thread has finished; join it
  bool yielded = false;                   // shut down to make room for a new connection
  std::thread thread;
};

// Serves requests on `conn.fd` until the client leaves, an error closes the connection, or
// `stopping` is set. Does not close the descriptor.
void serve_connection(Server::Connection& conn, const ServerOptions& options, const Handler& handler,
                      const std::atomic<bool>& stopping);

}  // namespace splash::http
