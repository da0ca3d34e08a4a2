#include "server/http/exchange.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdint>

#include "core/log.h"

namespace splash::http {

namespace {

bool valid_header(const Header& h) {
  if (h.name.empty()) return false;
  for (char c : h.name) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == ':') return false;
  }
  for (char c : h.value) {
    if (c == '\r' || c == '\n' || c == '\0') return false;
  }
  return true;
}

// Appends the status line and the handler's headers, minus the framing ones the transport owns.
// Returns true when the handler asked for "Connection: close".
bool append_head(std::string* out, int status, const std::vector<Header>& headers) {
  *out += str_cat("HTTP/1.1 ", status, " ", reason_phrase(status), "\r\n");
  bool close = false;
  for (const auto& h : headers) {
    if (!valid_header(h)) {
      log_warn("http: dropped response header '", h.name.substr(0, 64), "' (invalid name or value)");
      continue;
    }
    if (iequals(h.name, "Connection")) {
      if (iequals(h.value, "close")) close = true;
      continue;
    }
    if (iequals(h.name, "Content-Length") || iequals(h.name, "Transfer-Encoding")) continue;
    *out += h.name;
    *out += ": ";
    *out += h.value;
    *out += "\r\n";
  }
  return close;
}

bool status_has_body(int status) { return status >= 200 && status != 204 && status != 304; }

class Writer final : public ResponseWriter {
 public:
  explicit Writer(std::shared_ptr<Exchange> ex) : ex_(std::move(ex)) {}
  ~Writer() override { ex_->abandon(); }
  void respond(int status, std::vector<Header> headers, std::string body) override {
    ex_->respond(status, std::move(headers), std::move(body));
  }
  bool start_stream(int status, std::vector<Header> headers) override {
    return ex_->start_stream(status, std::move(headers));
  }
  bool write(std::string_view data) override { return ex_->write(data); }
  void end() override { ex_->end(); }
  bool client_gone() const override { return ex_->client_gone(); }
  void on_disconnect(std::function<void()> fn) override { ex_->on_disconnect(std::move(fn)); }

 private:
  std::shared_ptr<Exchange> ex_;
};

}  // namespace

std::string serialize_response(const SimpleResponse& response, bool close, bool head_only, bool* closes) {
  std::string out;
  bool handler_close = append_head(&out, response.status, response.headers);
  if (closes) *closes = close || handler_close;
  bool body = status_has_body(response.status);
  if (body) out += str_cat("Content-Length: ", response.body.size(), "\r\n");
  if (close || handler_close) out += "Connection: close\r\n";
  out += "\r\n";
  if (body && !head_only) out += response.body;
  return out;
}

Exchange::Exchange(const Config& config) : config_(config), close_(config.close) {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

Exchange::~Exchange() {
  if (wake_fd_ >= 0) close(wake_fd_);
}

void Exchange::wake() {
  if (wake_fd_ < 0) return;
  uint64_t one = 1;
  // EAGAIN (counter saturated) is fine: the connection thread is due to wake anyway.
  ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  (void)n;
}

void Exchange::clear_wake() {
  uint64_t v = 0;
  ssize_t n = ::read(wake_fd_, &v, sizeof(v));
  (void)n;
}

void Exchange::append_locked(std::string_view data) {
  if (out_off_ == out_.size()) {
    out_.clear();
    out_off_ = 0;
  }
  out_.append(data);
}

void Exchange::respond(int status, std::vector<Header> headers, std::string body) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (phase_ != Phase::kWaiting) {
      log_warn("http: respond() after the response was started; ignored");
      return;
    }
    phase_ = Phase::kComplete;
    if (gone_) return;
    bool handler_close = false;
    std::string wire = serialize_response(SimpleResponse{status, std::move(headers), std::move(body)}, close_,
                                          config_.head_only, &handler_close);
    close_ = close_ || handler_close;
    append_locked(wire);
  }
  wake();
}

bool Exchange::start_stream(int status, std::vector<Header> headers) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (phase_ != Phase::kWaiting) {
      log_warn("http: start_stream() after the response was started; ignored");
      return false;
    }
    phase_ = Phase::kStreaming;
    if (gone_) return false;
    std::string wire;
    close_ = append_head(&wire, status, headers) || close_;
    bool has_body = status_has_body(status) && !config_.head_only;
    if (config_.version_minor >= 1 && has_body) {
      chunked_ = true;
      wire += "Transfer-Encoding: chunked\r\n";
    } else if (has_body) {
      close_ = true;  // HTTP/1.0: the end of the body is the end of the connection
    }
    if (close_) wire += "Connection: close\r\n";
    wire += "\r\n";
    append_locked(wire);
  }
  wake();
  return true;
}

bool Exchange::write(std::string_view data) {
  bool ok = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (gone_ || phase_ != Phase::kStreaming) return false;
    if (data.empty() || config_.head_only) return true;  // an empty chunk would end the body
    size_t pending = out_.size() - out_off_;
    if (pending + data.size() > config_.max_buffered) {
      // The client is not reading: drop it rather than grow without bound or block the engine.
      gone_ = true;
      overflow_ = true;
    } else if (chunked_) {
      char size_line[24];
      int n = snprintf(size_line, sizeof(size_line), "%zx\r\n", data.size());
      append_locked(std::string_view(size_line, static_cast<size_t>(n)));
      out_.append(data);
      out_ += "\r\n";
    } else {
      append_locked(data);
    }
    ok = !gone_;
  }
  wake();
  return ok;
}

void Exchange::end() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (phase_ == Phase::kWaiting) {
      log_warn("http: end() without start_stream(); answering 500");
      abandoned_ = true;
    } else if (phase_ == Phase::kStreaming) {
      phase_ = Phase::kComplete;
      if (chunked_ && !gone_) append_locked("0\r\n\r\n");
    }
  }
  wake();
}

bool Exchange::client_gone() const {
  std::lock_guard<std::mutex> lock(mu_);
  return gone_;
}

void Exchange::on_disconnect(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    bool fire_now = gone_ && !overflow_ && phase_ != Phase::kComplete && !disconnect_fired_;
    // After an overflow the connection thread fires the callback (it has not seen it yet).
    if (!fire_now) {
      if (!disconnect_fired_) on_disconnect_ = std::move(fn);
      return;
    }
    disconnect_fired_ = true;
  }
  if (fn) fn();
}

void Exchange::abandon() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    abandoned_ = true;
  }
  wake();
}

Exchange::Flush Exchange::flush(int fd) {
  Flush f;
  std::lock_guard<std::mutex> lock(mu_);
  while (!gone_ && out_off_ < out_.size()) {
    ssize_t n = send(fd, out_.data() + out_off_, out_.size() - out_off_, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      out_off_ += static_cast<size_t>(n);
      f.sent += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;
    } else {
      gone_ = true;
      f.failed = true;
    }
  }
  if (out_off_ == out_.size()) {
    out_.clear();
    out_off_ = 0;
  }
  f.failed = f.failed || overflow_;
  f.phase = phase_;
  f.pending = gone_ ? 0 : out_.size() - out_off_;
  f.abandoned = abandoned_;
  return f;
}

void Exchange::client_lost() {
  std::function<void()> fn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    gone_ = true;
    // Without a callback yet, on_disconnect() fires it when it is registered.
    if (phase_ != Phase::kComplete && !disconnect_fired_ && on_disconnect_) {
      disconnect_fired_ = true;
      fn = std::move(on_disconnect_);
      on_disconnect_ = nullptr;
    }
    overflow_ = false;
  }
  if (fn) fn();
}

bool Exchange::close_after() const {
  std::lock_guard<std::mutex> lock(mu_);
  return close_;
}

std::shared_ptr<ResponseWriter> make_writer(std::shared_ptr<Exchange> exchange) {
  return std::make_shared<Writer>(std::move(exchange));
}

}  // namespace splash::http
