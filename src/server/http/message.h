// HTTP/1.x message types shared by the transport (server.h), the request parser and the route layer:
// the parsed request, the handler's response interface, and the OpenAI-shaped error bodies that the
// transport uses for its own refusals (413, 408, 431, 505, 503 ...).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace splash::http {

struct Header {
  std::string name;   // as received (or as the handler wrote it); lookups are case-insensitive
  std::string value;  // optional whitespace around it removed
};

// ASCII case-insensitive comparison (header names, schemes, host names).
bool iequals(std::string_view a, std::string_view b);

// First header named `name` (case-insensitive), or nullopt.
std::optional<std::string_view> find_header(const std::vector<Header>& headers, std::string_view name);

struct Request {
  std::string method;      // "GET", "POST" ... (case-sensitive, as the RFC says)
  std::string target;      // request-target as received: path[?query]
  std::string path;        // target before '?', raw (not percent-decoded)
  std::string query;       // after '?', without it; empty when absent
  int version_minor = 1;   // HTTP/1.<version_minor>: 0 or 1
  std::vector<Header> headers;
  std::string body;        // exactly Content-Length bytes
  std::string remote_addr;  // peer address, "127.0.0.1"
  std::string local_addr;   // the address the connection arrived on (for the Host allow-list)
  uint16_t local_port = 0;

  std::optional<std::string_view> header(std::string_view name) const {
    return find_header(headers, name);
  }
};

// A complete response (used for refusals decided before the body is read, and by respond()).
struct SimpleResponse {
  int status = 200;
  std::vector<Header> headers;
  std::string body;
};

// Handed to the handler; the handler either calls respond() once, or start_stream() then write()
// any number of times then end(). Thread-safe: every method may be called from any thread (the
// engine's callback thread included) and none blocks for long: output goes to a bounded
// per-connection buffer drained by the connection's thread. If the client stops reading (buffer
// full, or no progress for 30 s) the connection is dropped and write() returns false.
// The transport owns Content-Length, Transfer-Encoding and Connection: such headers given by the
// handler are replaced ("Connection: close" from the handler is honoured). Headers whose name or
// value holds CR, LF or NUL are dropped (no response splitting).
// If the handler drops its last reference without responding, the client gets a 500 (or, mid-stream,
// a connection closed without the final chunk, so it sees a truncated response).
class ResponseWriter {
 public:
  virtual ~ResponseWriter() = default;
  virtual void respond(int status, std::vector<Header> headers, std::string body) = 0;
  // HTTP/1.1: Transfer-Encoding: chunked; HTTP/1.0: close-delimited. False if the client is gone.
  virtual bool start_stream(int status, std::vector<Header> headers) = 0;
  virtual bool write(std::string_view data) = 0;  // false once the client is gone
  virtual void end() = 0;
  virtual bool client_gone() const = 0;           // disconnect or half-close seen, or dropped
  // Called once when the client disconnects (or half-closes, or is dropped) before end(): cancel
  // the work. Runs on the transport's thread; if the client is already gone when it is registered,
  // it runs at once on the caller's thread. Must not call back into this writer while blocking.
  virtual void on_disconnect(std::function<void()> fn) = 0;
};

// Runs on the connection's thread. It should return quickly and finish the response from another
// thread (the engine's callback): while it runs, the transport cannot watch the socket for a
// disconnect.
using Handler = std::function<void(const Request&, std::shared_ptr<ResponseWriter>)>;

// --- errors ------------------------------------------------------------------------------------

// "OK", "Not Found" ...; "Unknown" for codes without a phrase here.
std::string_view reason_phrase(int status);

// {"error":{"message":...,"type":"invalid_request_error"|"server_error","code":...}}: type is
// server_error for 5xx (the spec's OpenAI error shape).
std::string error_body(int status, std::string_view code, std::string_view message);

// A JSON error response; 503 gets Retry-After: 1 (spec 2.7).
SimpleResponse error_response(int status, std::string_view code, std::string_view message);

}  // namespace splash::http
