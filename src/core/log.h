// Minimal leveled logging to stderr. Thread-safe (one write per line). The level is set once at the
// edge (CLI flags) and passed nowhere else: set_log_level() is the only mutable state.
#pragma once

#include "core/result.h"

namespace splash {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_line(LogLevel level, const std::string& line);

template <class... Args>
void log_debug(const Args&... args) {
  if (log_level() <= LogLevel::kDebug) log_line(LogLevel::kDebug, str_cat(args...));
}
template <class... Args>
void log_info(const Args&... args) {
  if (log_level() <= LogLevel::kInfo) log_line(LogLevel::kInfo, str_cat(args...));
}
template <class... Args>
void log_warn(const Args&... args) {
  if (log_level() <= LogLevel::kWarn) log_line(LogLevel::kWarn, str_cat(args...));
}
template <class... Args>
void log_error(const Args&... args) {
  if (log_level() <= LogLevel::kError) log_line(LogLevel::kError, str_cat(args...));
}

}  // namespace splash
