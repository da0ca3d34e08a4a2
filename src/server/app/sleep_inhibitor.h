// Keeps the machine awake while requests run (spec 10: Apple's caffeinate -> systemd-inhibit): while
// `busy()` says requests are in flight, a child `systemd-inhibit --what=sleep --mode=block ... sleep
// infinity` holds logind's sleep inhibitor lock; it is ended (its process group killed) once the
// server has been idle for `linger`. --allow-idle-sleep turns this off.
//
//   SleepInhibitor awake([&] { return engines.busy(); }, {.enabled = !options.allow_idle_sleep});
//   ... awake.status() for /status `sleep_inhibitor` ...
//
// systemd-inhibit is looked up on PATH. Where it is missing, or exits at once (no logind or D-Bus, as
// in most containers), nothing is held and status() says why; a later busy period tries again.
// A watch thread polls busy() every `poll`, so a request shorter than that may finish unguarded.
// Thread-safety: status() may be called from any thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace splash::app {

struct SleepInhibitorOptions {
  bool enabled = true;  // false: --allow-idle-sleep
  std::string program = "systemd-inhibit";
  std::chrono::milliseconds poll{250};
  std::chrono::milliseconds linger{2000};  // idle time before the inhibitor is let go
  // A started program still running after this long holds the lock (systemd-inhibit that cannot
  // reach logind exits within milliseconds).
  std::chrono::milliseconds settle{500};
};

struct SleepInhibitorStatus {
  bool enabled = false;      // false under --allow-idle-sleep
  bool held = false;         // an inhibitor process is running now
  int64_t acquisitions = 0;  // inhibitor processes started that were still running after `settle`
  int64_t failures = 0;      // inhibitor processes that could not start or exited on their own
  std::string last_error;    // why the last one failed (the program's first line of stderr, or errno)
};

class SleepInhibitor {
 public:
  SleepInhibitor(std::function<bool()> busy, SleepInhibitorOptions options);
  ~SleepInhibitor();  // ends the inhibitor process
  SleepInhibitor(const SleepInhibitor&) = delete;
  SleepInhibitor& operator=(const SleepInhibitor&) = delete;

  SleepInhibitorStatus status() const;

 private:
  void watch_loop();
  void start_child();        // under mu_
  void reap_if_exited();     // under mu_
  void stop_child();         // under mu_

  std::function<bool()> busy_;
  const SleepInhibitorOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  pid_t child_ = -1;      // also its process group
  int stderr_fd_ = -1;    // read end of the child's stderr
  std::chrono::steady_clock::time_point started_;  // of the running child
  bool counted_ = false;  // the running child outlived `settle`
  SleepInhibitorStatus status_;
  std::thread thread_;
};

}  // namespace splash::app
