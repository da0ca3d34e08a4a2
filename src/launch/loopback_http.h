// The launchers' view of a Splash server on this machine: one blocking HTTP/1.1 GET to 127.0.0.1
// with a Bearer key and a deadline. Enough for /ready and /v1/models; not a general client.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "core/result.h"

namespace splash::launch {

struct HttpReply {
  int status = 0;
  std::string body;
};

enum class GetFailure : uint8_t {
  kRefused,   // nothing listens on the port
  kTimeout,   // connected (a server still loading holds its listener) but no answer in time
  kBroken,    // the peer answered something that is not HTTP, or the connection broke
};

struct GetResult {
  std::optional<HttpReply> reply;  // set on success
  GetFailure failure = GetFailure::kRefused;
  std::string error;               // why, when reply is unset
};

// GET `path` from 127.0.0.1:`port`; `bearer` (when non-empty) goes in Authorization.
GetResult loopback_get(uint16_t port, const std::string& path, const std::string& bearer,
                       std::chrono::milliseconds timeout);

// The first executable file named `program` in the ':'-separated `path_list` (a name with a '/' is
// checked as given); empty when there is none.
std::string find_program(const std::string& program, const std::string& path_list);

}  // namespace splash::launch
