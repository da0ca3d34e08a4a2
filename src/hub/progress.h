// Download progress on stderr: on a terminal one line redrawn in place (at most 10 times a second)
// with bytes, rate and ETA; otherwise plain lines (start, every 25 %, end) so logs stay readable.
// Files under 64 KiB (config.json and the like) show nothing.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace splash::hub {

// "1.5 GiB / 4.2 GiB  35%  12.3 MiB/s  ETA 3m41s" (total 0: size unknown, no percent / ETA).
std::string format_progress(uint64_t done, uint64_t total, double bytes_per_second);
// "45s", "3m41s", "2h05m"; "?" for a non-finite or negative value.
std::string format_eta(double seconds);

class Progress {
 public:
  // `resumed`: bytes already on disk when this download started (not counted in the rate).
  Progress(std::FILE* out, bool tty, std::string name, uint64_t total, uint64_t resumed);
  void update(uint64_t done);
  void finish(bool ok);

 private:
  void print(uint64_t done, bool final_line);

  std::FILE* out_;
  bool tty_;
  std::string name_;
  uint64_t total_, resumed_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  int last_quarter_ = -1;
  uint64_t done_ = 0;
  bool quiet_ = false;
};

}  // namespace splash::hub
