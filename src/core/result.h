// Result<T>: the return type of every operation that can fail for reasons outside the program
// (files, network, user input, memory). Broken invariants use SPLASH_CHECK instead (check.h).
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <variant>

#include "core/check.h"

namespace splash {

// What kind of failure an Error is, for callers that act on the kind (the server's HTTP status and
// error.code, the CLI's follow-up line) instead of on the message's words. Only kinds some caller
// distinguishes have a code; everything else is kUnknown and the message alone says what failed.
enum class ErrorCode : uint8_t {
  kUnknown,            // not classified (make_error without a code)
  kInvalidArgument,    // the caller's input is wrong: a field, a value, a request
  kUnavailable,        // a resource could not be reached or fetched (the Hub, a download)
  kQueueFull,          // admission refused: the queue is at its limit; retrying later can succeed
  kCapacityExhausted,  // the request cannot fit even alone (the KV pool); retrying cannot succeed
  kShuttingDown,       // the engine or server is stopping
  kTimeout,            // a deadline passed
  kEngineFailed,       // the engine failed while running the request
};

// A failure a user can act on: the message names the file / field / value involved.
struct Error {
  std::string message;
  ErrorCode code = ErrorCode::kUnknown;
};

// Concatenates streamable values into a string: str_cat("tensor ", name, " has ", n, " dims").
template <class... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

template <class... Args>
Error make_error(const Args&... args) {
  return Error{str_cat(args...)};
}

// The coded form: make_error(ErrorCode::kQueueFull, "queue full: ", n, " requests are waiting").
template <class... Args>
Error make_error(ErrorCode code, const Args&... args) {
  return Error{str_cat(args...), code};
}

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    SPLASH_CHECK_MSG(ok(), error_message());
    return std::get<0>(v_);
  }
  const T& value() const& {
    SPLASH_CHECK_MSG(ok(), error_message());
    return std::get<0>(v_);
  }
  T&& value() && {
    SPLASH_CHECK_MSG(ok(), error_message());
    return std::get<0>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const {
    SPLASH_CHECK(!ok());
    return std::get<1>(v_);
  }
  const std::string& error_message() const {
    static const std::string kNone;
    return ok() ? kNone : std::get<1>(v_).message;
  }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    SPLASH_CHECK(!ok_);
    return error_;
  }
  const std::string& error_message() const { return error_.message; }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Result<void>;

}  // namespace splash

#define SPLASH_CONCAT_INNER_(a, b) a##b
#define SPLASH_CONCAT_(a, b) SPLASH_CONCAT_INNER_(a, b)

// SPLASH_TRY(auto x, expr): evaluates expr (a Result<T>), returns its error from the enclosing
// function on failure, otherwise binds the value to the declaration. It expands to several
// statements: inside an if/else body, use braces.
#define SPLASH_TRY(decl, expr) SPLASH_TRY_IMPL_(decl, expr, SPLASH_CONCAT_(splash_try_, __LINE__))
#define SPLASH_TRY_IMPL_(decl, expr, tmp) \
  auto tmp = (expr);                      \
  if (!tmp.ok()) return tmp.error();      \
  decl = std::move(tmp).value()

// SPLASH_TRY_STATUS(expr): for Result<void>.
#define SPLASH_TRY_STATUS(expr)                                              \
  do {                                                                       \
    auto splash_status_ = (expr);                                            \
    if (!splash_status_.ok()) return splash_status_.error();                 \
  } while (0)
