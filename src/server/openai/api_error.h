// OpenAI-shaped API errors: an HTTP status, the error type and code of spec 2.7, and a message the
// client can act on (it names the offending field, e.g. "'temperature' must be a number").
#pragma once

#include <string>
#include <utility>
#include <variant>

#include "core/check.h"
#include "core/result.h"

namespace splash::openai {

struct ApiError {
  int status = 400;
  std::string type;     // "invalid_request_error", or "server_error" for 5xx
  std::string code;     // spec 2.7: invalid_request_error, context_length_exceeded, model_not_found ...
  std::string message;
};

// Any status with its code; the type follows from the status (server_error for 5xx).
ApiError api_error(int status, std::string code, std::string message);
// 400 with code invalid_request_error: what every validation failure in this folder returns.
ApiError invalid_request(std::string message);

// The one mapping from an Error's code to the HTTP status and error.code (spec 2.7):
//   kQueueFull -> 503 runtime_busy ("; retry shortly" appended), kCapacityExhausted -> 400
//   capacity_exhausted (" (raise --max-memory or lower --max-context)" appended), kShuttingDown -> 503
//   server_shutdown, kUnavailable -> 503 runtime_unavailable, kTimeout -> 504 request_timeout,
//   kEngineFailed -> 500 engine_failed, kInvalidArgument and kUnknown -> 400 invalid_request_error
//   (an unclassified failure while serving a request comes from the request).
ApiError api_error(const Error& error);

// {"error":{"message":...,"type":...,"code":...}} (spec 2.7).
std::string error_body(const ApiError& error);

// Result type of the request parsers: a value or an ApiError (not splash::Result, whose Error has
// no status or code).
template <class T>
class [[nodiscard]] ApiResult {
 public:
  ApiResult(T value) : v_(std::move(value)) {}           // NOLINT(google-explicit-constructor)
  ApiResult(ApiError error) : v_(std::move(error)) {}    // NOLINT(google-explicit-constructor)
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & {
    SPLASH_CHECK(ok());
    return std::get<0>(v_);
  }
  const T& value() const& {
    SPLASH_CHECK(ok());
    return std::get<0>(v_);
  }
  T&& value() && {
    SPLASH_CHECK(ok());
    return std::get<0>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const ApiError& error() const {
    SPLASH_CHECK(!ok());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, ApiError> v_;
};

}  // namespace splash::openai
