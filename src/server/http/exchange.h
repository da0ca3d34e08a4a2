// One request/response exchange on a connection (internal to the transport): the ResponseWriter
// the handler holds and the state the connection thread drains to the socket. Output is
// serialized into a bounded buffer under a mutex; the connection thread sends it with
// non-blocking sends and is woken through an eventfd. Thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "server/http/message.h"

namespace splash::http {

// Status line + headers (+ body) on the wire. The transport's own headers (Content-Length,
// Transfer-Encoding, Connection) are written here; the same names in `headers` are skipped, as are
// headers with an invalid name or a CR/LF/NUL in the value. `head_only` (HEAD) keeps the
// Content-Length but sends no body. `closes` (optional) is set when the response ends the
// connection (`close`, or the handler's own "Connection: close").
std::string serialize_response(const SimpleResponse& response, bool close, bool head_only,
                               bool* closes = nullptr);

class Exchange {
 public:
  struct Config {
    int version_minor = 1;        // 0: streams are close-delimited
    bool head_only = false;       // HEAD request
    bool close = false;           // the connection closes after this response
    size_t max_buffered = 8 << 20;  // pending output beyond this drops the client
  };
  explicit Exchange(const Config& config);
  ~Exchange();
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  // --- the handler's side (through the ResponseWriter returned by make_writer) ---
  void respond(int status, std::vector<Header> headers, std::string body);
  bool start_stream(int status, std::vector<Header> headers);
  bool write(std::string_view data);
  void end();
  bool client_gone() const;
  void on_disconnect(std::function<void()> fn);
  void abandon();  // the handler dropped its last reference to the writer

  // --- the connection thread's side ---
  enum class Phase : uint8_t { kWaiting, kStreaming, kComplete };
  struct Flush {
    Phase phase = Phase::kWaiting;
    size_t sent = 0;     // bytes sent by this call
    size_t pending = 0;  // bytes still buffered
    bool failed = false;     // send error, or the client was dropped (buffer overflow)
    bool abandoned = false;  // the handler let go of the writer
    bool done() const { return phase == Phase::kComplete && pending == 0; }
  };
  // Sends as much buffered output as the socket takes now (never blocks).
  Flush flush(int fd);
  // The client is gone (disconnect, half-close, stall, stop): write() fails from now on, and the
  // on_disconnect callback runs here, on the caller's thread, unless the response was complete.
  void client_lost();
  bool close_after() const;
  int wake_fd() const { return wake_fd_; }
  void clear_wake();  // reset the eventfd after poll() saw it

 private:
  void wake();
  void append_locked(std::string_view data);

  const Config config_;
  int wake_fd_ = -1;
  mutable std::mutex mu_;
  Phase phase_ = Phase::kWaiting;
  bool chunked_ = false;
  bool close_ = false;
  std::string out_;  // serialized, not yet sent; [out_off_, size) is pending
  size_t out_off_ = 0;
  bool gone_ = false;
  bool overflow_ = false;
  bool abandoned_ = false;
  bool disconnect_fired_ = false;
  std::function<void()> on_disconnect_;
};

// The ResponseWriter handed to the handler. Dropping the last reference to it tells the
// connection that no more output will come (see message.h).
std::shared_ptr<ResponseWriter> make_writer(std::shared_ptr<Exchange> exchange);

}  // namespace splash::http
