// One accepted connection (internal to the transport). While it waits for a request head the event
// loop owns it (server.cpp, head_wait.h); once a head is complete a thread of its own serves it
// (serve_connection: body, handler, response, and any complete pipelined heads after it), then
// hands it back to the loop for the next head or has the loop close it.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "server/http/head_wait.h"
#include "server/http/server.h"

namespace splash::http {

// The descriptor is closed only by the loop (or by stop() after the loop has ended), never by the
// serving thread, so stop() can shut down a descriptor that a thread still uses without a race.
struct Server::Connection {
  int fd = -1;
  std::string remote_addr, local_addr;
  uint16_t local_port = 0;
  std::string in;  // received, not consumed yet: a head in progress, or pipelined requests
  HeadWait wait;   // the loop's record while waiting for a head

  std::thread thread;             // while served
  std::atomic<bool> done{false};  // the thread has finished; join it
  bool keep = false;              // set before `done`: wait for another head instead of closing

  // While a body arrives, the serving thread publishes its progress; when every serving slot is
  // taken, the loop may evict the slowest upload (`evicted`, then its reading side is shut): its
  // thread answers 503 and ends.
  std::atomic<bool> receiving_body{false};
  std::atomic<int64_t> body_since_ms{0};  // steady clock
  std::atomic<uint64_t> body_received{0};
  std::atomic<bool> evicted{false};
};

enum class ServeOutcome : uint8_t {
  kClose,  // the connection ends (the answer was sent, or the client left)
  kKeep,   // keep-alive: `conn.in` holds no complete head; the loop waits for one
};

// Serves requests on `conn.fd` while `conn.in` holds a complete head (or a malformed one, which is
// refused); the first call's buffer must hold one. Does not close the descriptor.
ServeOutcome serve_connection(Server::Connection& conn, const ServerOptions& options, const Handler& handler,
                              const std::atomic<bool>& stopping);

}  // namespace splash::http
