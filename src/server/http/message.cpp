#include "server/http/message.h"

#include <nlohmann/json.hpp>

namespace splash::http {

namespace {
char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }
}  // namespace

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::optional<std::string_view> find_header(const std::vector<Header>& headers, std::string_view name) {
  for (const auto& h : headers) {
    if (iequals(h.name, name)) return std::string_view(h.value);
  }
  return std::nullopt;
}

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 206: return "Partial Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    case 529: return "Site Overloaded";
    default: return "Unknown";
  }
}

std::string error_body(int status, std::string_view code, std::string_view message) {
  nlohmann::json j;
  j["error"]["message"] = std::string(message);
  j["error"]["type"] = status >= 500 ? "server_error" : "invalid_request_error";
  j["error"]["code"] = std::string(code);
  // Messages may quote client bytes (a method, a header name): replace invalid UTF-8 rather than throw.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

SimpleResponse error_response(int status, std::string_view code, std::string_view message) {
  SimpleResponse r;
  r.status = status;
  r.headers.push_back({"Content-Type", "application/json"});
  if (status == 503) r.headers.push_back({"Retry-After", "1"});
  r.body = error_body(status, code, message);
  return r;
}

}  // namespace splash::http
