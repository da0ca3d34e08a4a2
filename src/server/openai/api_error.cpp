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

ApiError api_error(const Error& error) {
  switch (error.code) {
    case ErrorCode::kQueueFull: return api_error(503, "runtime_busy", error.message + "; retry shortly");
    case ErrorCode::kCapacityExhausted:
      return api_error(400, "capacity_exhausted", error.message + " (raise --max-memory or lower --max-context)");
    case ErrorCode::kShuttingDown: return api_error(503, "server_shutdown", error.message);
    case ErrorCode::kUnavailable: return api_error(503, "runtime_unavailable", error.message);
    case ErrorCode::kTimeout: return api_error(504, "request_timeout", error.message);
    case ErrorCode::kEngineFailed: return api_error(500, "engine_failed", error.message);
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kUnknown: break;
  }
  return invalid_request(error.message);
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
