#include "launch/loopback_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace splash::launch {

namespace {

using Clock = std::chrono::steady_clock;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

GetResult failed(GetFailure f, std::string why) {
  GetResult r;
  r.failure = f;
  r.error = std::move(why);
  return r;
}

// Status code and body of a complete response in `raw`; nullopt while more bytes are needed.
std::optional<HttpReply> parse_reply(const std::string& raw, bool at_eof, std::string& error) {
  size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) {
    if (at_eof) error = "the connection closed before a complete HTTP head";
    return std::nullopt;
  }
  HttpReply r;
  if (raw.compare(0, 5, "HTTP/") != 0 || raw.size() < 12) {
    error = "the answer is not HTTP";
    return std::nullopt;
  }
  r.status = std::atoi(raw.c_str() + raw.find(' ') + 1);
  std::string head = raw.substr(0, head_end);
  for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t cl = head.find("\r\ncontent-length:");
  const size_t body_start = head_end + 4;
  if (cl != std::string::npos) {
    const size_t want = std::strtoull(head.c_str() + cl + 17, nullptr, 10);
    if (raw.size() - body_start < want) {
      if (at_eof) error = "the connection closed inside the body";
      return std::nullopt;
    }
    r.body = raw.substr(body_start, want);
    return r;
  }
  if (!at_eof) return std::nullopt;  // no length: the body runs to the close
  r.body = raw.substr(body_start);
  return r;
}

}  // namespace

GetResult loopback_get(uint16_t port, const std::string& path, const std::string& bearer,
                       std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return failed(GetFailure::kBroken, str_cat("socket: ", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS) return failed(GetFailure::kRefused, std::strerror(errno));
    pollfd p{fd.get(), POLLOUT, 0};
    if (::poll(&p, 1, remaining_ms(deadline)) <= 0) return failed(GetFailure::kTimeout, "connect timed out");
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return failed(err == ECONNREFUSED ? GetFailure::kRefused : GetFailure::kBroken, std::strerror(err));
  }
  std::string req = str_cat("GET ", path, " HTTP/1.1\r\nHost: 127.0.0.1:", port, "\r\n");
  if (!bearer.empty()) req += str_cat("Authorization: Bearer ", bearer, "\r\n");
  req += "Connection: close\r\n\r\n";
  size_t sent = 0;
  while (sent < req.size()) {
    ssize_t n = ::send(fd.get(), req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) return failed(GetFailure::kBroken, std::strerror(errno));
    pollfd p{fd.get(), POLLOUT, 0};
    if (::poll(&p, 1, remaining_ms(deadline)) <= 0) return failed(GetFailure::kTimeout, "no answer in time");
  }
  std::string raw;
  char buf[16384];
  for (;;) {
    ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    const bool eof = n == 0;
    if (n > 0) raw.append(buf, static_cast<size_t>(n));
    if (n > 0 || eof) {
      std::string error;
      if (auto r = parse_reply(raw, eof, error)) {
        GetResult out;
        out.reply = std::move(*r);
        return out;
      }
      if (!error.empty()) return failed(GetFailure::kBroken, error);
      if (eof) return failed(GetFailure::kBroken, "the connection closed early");
      continue;
    }
    if (errno == ECONNRESET) return failed(GetFailure::kBroken, "the connection was reset");
    if (errno != EAGAIN && errno != EINTR) return failed(GetFailure::kBroken, std::strerror(errno));
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, remaining_ms(deadline)) <= 0) return failed(GetFailure::kTimeout, "no answer in time");
  }
}

namespace {
bool executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}
}  // namespace

std::string find_program(const std::string& program, const std::string& path_list) {
  if (program.find('/') != std::string::npos) return executable_file(program) ? program : std::string();
  size_t start = 0;
  for (;;) {
    size_t colon = path_list.find(':', start);
    std::string dir = path_list.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    std::filesystem::path candidate = std::filesystem::path(dir.empty() ? "." : dir) / program;
    if (executable_file(candidate.string())) return candidate.string();
    if (colon == std::string::npos) return std::string();
    start = colon + 1;
  }
}

}  // namespace splash::launch
