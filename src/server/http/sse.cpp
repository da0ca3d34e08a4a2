#include "server/http/sse.h"

#include <nlohmann/json.hpp>

namespace splash::http {

std::string sse_event(std::string_view json) {
  std::string out;
  out.reserve(json.size() + 8);
  size_t start = 0;
  while (true) {
    size_t nl = json.find_first_of("\r\n", start);
    out += "data: ";
    out.append(json.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start));
    out += '\n';
    if (nl == std::string_view::npos) break;
    // CRLF counts as one line break.
    start = nl + 1;
    if (json[nl] == '\r' && start < json.size() && json[start] == '\n') ++start;
  }
  out += '\n';
  return out;
}

std::string sse_json_event(const nlohmann::json& value) {
  return sse_event(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::string sse_done() { return "data: [DONE]\n\n"; }

std::string sse_comment(std::string_view text) {
  std::string out = ": ";
  for (char c : text) out.push_back(c == '\n' || c == '\r' ? ' ' : c);
  out += "\n\n";
  return out;
}

std::vector<Header> sse_headers() {
  return {{"Content-Type", "text/event-stream"}, {"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
}

}  // namespace splash::http
