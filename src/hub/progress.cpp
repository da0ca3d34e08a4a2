#include "hub/progress.h"

#include <cmath>

#include "core/sizes.h"

namespace splash::hub {

std::string format_eta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long long>(std::llround(seconds));
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%llds", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, (s / 60) % 60);
  return buf;
}

std::string format_progress(uint64_t done, uint64_t total, double bytes_per_second) {
  std::string s = format_bytes(done);
  if (total > 0) {
    s += " / " + format_bytes(total);
    s += "  " + std::to_string(done >= total ? 100 : done * 100 / total) + "%";
  }
  s += "  " + format_bytes(bytes_per_second > 0 ? static_cast<uint64_t>(bytes_per_second) : 0) + "/s";
  if (total > 0 && done < total)
    s += "  ETA " + (bytes_per_second > 0 ? format_eta(static_cast<double>(total - done) / bytes_per_second) : "?");
  return s;
}

Progress::Progress(std::FILE* out, bool tty, std::string name, uint64_t total, uint64_t resumed)
    : out_(out), tty_(tty), name_(std::move(name)), total_(total), resumed_(resumed),
      start_(std::chrono::steady_clock::now()), last_draw_(start_), done_(resumed), quiet_(total < (64u << 10)) {
  if (quiet_) return;
  if (!tty_) {
    std::fprintf(out_, "Downloading %s (%s%s)\n", name_.c_str(), format_bytes(total_).c_str(),
                 resumed_ > 0 ? (", resuming at " + format_bytes(resumed_)).c_str() : "");
    std::fflush(out_);
  } else {
    print(done_, false);
  }
}

void Progress::print(uint64_t done, bool final_line) {
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = secs > 0 ? static_cast<double>(done - std::min(done, resumed_)) / secs : 0;
  const std::string line = format_progress(done, total_, rate);
  if (tty_) {
    std::fprintf(out_, "\r\033[K%s  %s%s", name_.c_str(), line.c_str(), final_line ? "\n" : "");
  } else {
    std::fprintf(out_, "Downloading %s: %s\n", name_.c_str(), line.c_str());
  }
  std::fflush(out_);
}

void Progress::update(uint64_t done) {
  done_ = done;
  if (quiet_) return;
  const auto now = std::chrono::steady_clock::now();
  if (tty_) {
    if (now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    print(done, false);
    return;
  }
  const int quarter = total_ > 0 ? static_cast<int>(done * 4 / total_) : 0;
  if (last_quarter_ < 0) last_quarter_ = static_cast<int>(resumed_ * 4 / std::max<uint64_t>(total_, 1));
  if (quarter > last_quarter_ && quarter < 4) {
    last_quarter_ = quarter;
    print(done, false);
  }
}

void Progress::finish(bool ok) {
  if (quiet_) return;
  if (ok) print(done_, true);
  else if (tty_) std::fprintf(out_, "\n");
  std::fflush(out_);
}

}  // namespace splash::hub
