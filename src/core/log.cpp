#include "core/log.h"

#include <atomic>
#include <cstdio>

namespace splash {

namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
}

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }

void log_line(LogLevel level, const std::string& line) {
  const char* prefix = level == LogLevel::kWarn ? "warning: " : level == LogLevel::kError ? "error: " : "";
  std::string out = std::string(prefix) + line + "\n";
  std::fwrite(out.data(), 1, out.size(), stderr);
}

}  // namespace splash
