// The head stage of a connection (internal to the transport): the rules the event loop applies to a
// connection that has no complete request head yet. Such a connection has no thread of its own; the
// loop holds its bytes and decides, without sockets, when it is complete, when it is refused at
// once (bytes that cannot start an HTTP request line), when it has been too slow, and which waiting
// connection makes room when the loop holds as many as it may. See docs/SERVER.md "Limits and abuse".
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/http/request_parser.h"

namespace splash::http {

using HeadClock = std::chrono::steady_clock;

struct HeadPolicy {
  // Hard limit from the moment the connection started waiting (accepted, or its previous response
  // sent). A connection that sent nothing is closed silently then; one with part of a head gets 408.
  std::chrono::milliseconds header_timeout{30000};
  // Once the first byte came, a head gets this long plus one second per `min_rate` bytes received:
  // a client trickling a byte a second is cut after the grace instead of holding a slot for 30 s.
  std::chrono::milliseconds grace{5000};
  size_t min_rate = 1024;  // bytes per second; 0 turns the rate rule off
};

// What the loop knows of one waiting connection.
struct HeadWait {
  HeadClock::time_point since;       // started waiting
  HeadClock::time_point first_byte;  // meaningful when received > 0
  size_t received = 0;               // bytes received since `since` (leading CRLFs included)
  size_t scanned = 0;                // scan_head's resume point into the connection's buffer
};

// Starts a wait at `now`, counting `leftover` (pipelined bytes a previous exchange left) as received.
HeadWait head_wait_start(HeadClock::time_point now, std::string_view leftover);

// Records `n` new bytes arriving at `now`.
void head_wait_received(HeadWait* w, size_t n, HeadClock::time_point now);

// When the head is due under `policy`.
HeadClock::time_point head_deadline(const HeadWait& w, const HeadPolicy& policy);

// True when the buffer holds more than line ends: a timed-out connection then gets a 408, otherwise
// it is closed silently.
bool has_request_bytes(std::string_view in);

// A refusal decided from the first bytes alone: a byte that no request line may hold (a TLS
// ClientHello, binary garbage, a raw UTF-8 path) before the first line end. Such a connection is
// answered 400 at once instead of waiting for a head that will never parse.
std::optional<HttpError> check_request_line_bytes(std::string_view in);

// The waiting connection to evict when the loop is full, as an index into `waits`: one that sent
// nothing, the longest waiting first; otherwise the slowest head (fewest bytes per second since
// its first byte), the longest waiting first among equals. nullopt when `waits` is empty.
std::optional<size_t> pick_head_to_evict(const std::vector<const HeadWait*>& waits, HeadClock::time_point now);

}  // namespace splash::http
