// A raw-socket HTTP client for the transport tests: sends exact bytes and parses responses with
// its own small decoder (chunked, Content-Length, close-delimited), written separately from the
// server's code so the two cannot share a mistake.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace splash::http::testing {

struct ClientResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::vector<std::string> chunks;  // chunked responses: each chunk's data
  bool chunked = false;

  std::optional<std::string> header(std::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (n.size() != name.size()) continue;
      bool eq = true;
      for (size_t i = 0; i < n.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(n[i])) != std::tolower(static_cast<unsigned char>(name[i]))) {
          eq = false;
        }
      }
      if (eq) return v;
    }
    return std::nullopt;
  }
};

class RawClient {
 public:
  using ms = std::chrono::milliseconds;

  explicit RawClient(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawClient() { close_now(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }

  bool send_bytes(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  void close_now() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Reads until the buffer holds `n` bytes or the peer closes / the timeout passes.
  bool fill(size_t n, ms timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (buf_.size() < n) {
      if (!read_more(deadline)) return false;
    }
    return true;
  }
  // Reads until "\r\n" appears at or after `from`; returns its position.
  std::optional<size_t> find_line(size_t from, ms timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      size_t p = buf_.find("\r\n", from);
      if (p != std::string::npos) return p;
      if (!read_more(deadline)) return std::nullopt;
    }
  }

  // One response (interim 1xx responses are skipped and counted in `interim`).
  std::optional<ClientResponse> read_response(ms timeout = ms(5000), bool head_request = false, int* interim = nullptr) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      size_t end;
      while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
        if (!read_more(deadline)) return std::nullopt;
      }
      ClientResponse r;
      std::string head = buf_.substr(0, end);
      buf_.erase(0, end + 4);
      size_t eol = head.find("\r\n");
      std::string status_line = head.substr(0, eol);
      if (status_line.size() < 12 || status_line.compare(0, 5, "HTTP/") != 0) return std::nullopt;
      r.status = std::stoi(status_line.substr(9, 3));
      size_t pos = eol == std::string::npos ? head.size() : eol + 2;
      while (pos < head.size()) {
        size_t e = head.find("\r\n", pos);
        if (e == std::string::npos) e = head.size();
        std::string line = head.substr(pos, e - pos);
        size_t colon = line.find(':');
        std::string value = colon == std::string::npos ? "" : line.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.erase(0, 1);
        r.headers.emplace_back(line.substr(0, colon), value);
        pos = e + 2;
      }
      if (r.status >= 100 && r.status < 200) {
        if (interim) ++*interim;
        continue;
      }
      if (head_request || r.status == 204 || r.status == 304) return r;
      auto te = r.header("Transfer-Encoding");
      auto cl = r.header("Content-Length");
      auto left = [&] {
        return std::chrono::duration_cast<ms>(deadline - std::chrono::steady_clock::now());
      };
      if (te && *te == "chunked") {
        r.chunked = true;
        for (;;) {
          auto line_end = find_line(0, left());
          if (!line_end) return std::nullopt;
          size_t size = std::stoul(buf_.substr(0, *line_end), nullptr, 16);
          buf_.erase(0, *line_end + 2);
          if (!fill(size + 2, left())) return std::nullopt;
          if (buf_.compare(size, 2, "\r\n") != 0) return std::nullopt;
          if (size == 0) {
            buf_.erase(0, 2);
            return r;
          }
          r.chunks.push_back(buf_.substr(0, size));
          r.body += r.chunks.back();
          buf_.erase(0, size + 2);
        }
      }
      if (cl) {
        size_t n = std::stoul(*cl);
        if (!fill(n, left())) return std::nullopt;
        r.body = buf_.substr(0, n);
        buf_.erase(0, n);
        return r;
      }
      // Close-delimited.
      while (read_more(deadline)) {
      }
      r.body = buf_;
      buf_.clear();
      return r;
    }
  }

  // True when the server closes the connection (EOF or reset) within `timeout`; data that arrives
  // meanwhile is kept.
  bool wait_closed(ms timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (read_more(deadline)) {
    }
    return eof_;
  }

  std::string& buffer() { return buf_; }

 private:
  bool read_more(std::chrono::steady_clock::time_point deadline) {
    if (eof_) return false;
    auto left = std::chrono::duration_cast<ms>(deadline - std::chrono::steady_clock::now()).count();
    if (left < 0) left = 0;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    char tmp[65536];
    ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  std::string buf_;
};

inline long elapsed_ms(std::chrono::steady_clock::time_point since) {
  return static_cast<long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - since).count());
}

// The `error.code` of an OpenAI-shaped error body, or a note saying the body is not one.
inline std::string code_of(const ClientResponse& r) {
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.contains("error")) return "(not an error body: " + r.body + ")";
  return j["error"].value("code", "");
}

}  // namespace splash::http::testing
