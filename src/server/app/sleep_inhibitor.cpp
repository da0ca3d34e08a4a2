#include "server/app/sleep_inhibitor.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/result.h"

extern char** environ;

namespace splash::app {

SleepInhibitor::SleepInhibitor(std::function<bool()> busy, SleepInhibitorOptions options)
    : busy_(std::move(busy)), options_(std::move(options)) {
  status_.enabled = options_.enabled;
  if (options_.enabled) thread_ = std::thread([this] { watch_loop(); });
}

SleepInhibitor::~SleepInhibitor() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  stop_child();
}

SleepInhibitorStatus SleepInhibitor::status() const {
  std::lock_guard lock(mu_);
  SleepInhibitorStatus s = status_;
  s.held = child_ >= 0 && counted_;
  return s;
}

void SleepInhibitor::watch_loop() {
  using Clock = std::chrono::steady_clock;
  Clock::time_point idle_since = Clock::now();
  bool tried = false;  // this busy period already started one (a failed one is not retried until idle)
  std::unique_lock lock(mu_);
  while (!stopping_) {
    reap_if_exited();
    if (child_ >= 0 && !counted_ && Clock::now() - started_ >= options_.settle) {
      counted_ = true;  // still running: logind took the lock, or the program would have exited
      ++status_.acquisitions;
    }
    if (busy_()) {
      idle_since = Clock::now();
      if (child_ < 0 && !tried) start_child();
      tried = true;
    } else {
      tried = false;
      if (child_ >= 0 && Clock::now() - idle_since >= options_.linger) stop_child();
    }
    cv_.wait_for(lock, options_.poll);
  }
}

void SleepInhibitor::start_child() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    ++status_.failures;
    status_.last_error = str_cat("pipe: ", std::strerror(errno));
    return;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group, so that ending it also ends the `sleep` it runs; the server's blocked
  // signals are not passed on.
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK);
  std::vector<std::string> args = {options_.program, "--what=sleep", "--who=splash",
                                   "--why=splash serve: requests in progress", "--mode=block", "sleep", "infinity"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, options_.program.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    ++status_.failures;
    status_.last_error = str_cat(options_.program, ": ", std::strerror(rc));
    return;
  }
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  child_ = pid;
  started_ = std::chrono::steady_clock::now();
  stderr_fd_ = fds[0];
  counted_ = false;
}

void SleepInhibitor::reap_if_exited() {
  if (child_ < 0) return;
  int st = 0;
  if (waitpid(child_, &st, WNOHANG) != child_) return;
  char buf[512];
  const ssize_t n = read(stderr_fd_, buf, sizeof buf);
  std::string first_line = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  first_line = first_line.substr(0, first_line.find('\n'));
  ++status_.failures;
  status_.last_error = str_cat(options_.program, " exited",
                               WIFEXITED(st) ? str_cat(" with status ", WEXITSTATUS(st)) : std::string(" on a signal"),
                               first_line.empty() ? "" : ": ", first_line);
  close(stderr_fd_);
  stderr_fd_ = -1;
  child_ = -1;
  counted_ = false;
}

void SleepInhibitor::stop_child() {
  if (child_ < 0) return;
  kill(-child_, SIGKILL);  // the group: systemd-inhibit (its lock goes with it) and its `sleep`
  waitpid(child_, nullptr, 0);
  close(stderr_fd_);
  stderr_fd_ = -1;
  child_ = -1;
  counted_ = false;
}

}  // namespace splash::app
