// SPLASH_CHECK: invariants of the program itself. A failure is a bug, never bad input: it prints
// file, line and the condition, then aborts. Bad input goes through Result (result.h).
#pragma once

#include <string>

namespace splash::detail {
[[noreturn]] void check_failed(const char* file, int line, const char* cond, const std::string& msg);
}  // namespace splash::detail

#define SPLASH_CHECK(cond)                                                      \
  do {                                                                          \
    if (!(cond)) [[unlikely]]                                                   \
      ::splash::detail::check_failed(__FILE__, __LINE__, #cond, std::string()); \
  } while (0)

#define SPLASH_CHECK_MSG(cond, msg)                                     \
  do {                                                                  \
    if (!(cond)) [[unlikely]]                                           \
      ::splash::detail::check_failed(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)
