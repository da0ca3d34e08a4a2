#include "server/openai/api_error.h"

#include <nlohmann/json.hpp>

namespace splash::openai {

ApiError api_error(int status, std::string code, std::string message) {
  ApiError e;
  e.status = status;
  e.type = status >= 500 ? "server_error" : "invalid_request_error";
  e.code = std::move(code);
  e.message = std::move(message);
  return e;
}

ApiError invalid_request(std::string message) {
  return api_error(400, "invalid_request_error", std::move(message));
}

std::string error_body(const ApiError& error) {
  nlohmann::ordered_json body;
  body["error"]["message"] = error.message;
  body["error"]["type"] = error.type;
  body["error"]["code"] = error.code;
  // Messages may quote client bytes that are not UTF-8: replace them rather than throw.
  return body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace splash::openai
