// `splash claude|codex|opencode [--port P] [--model M] [-- agent args...]` (spec 10): find the ready
// server on loopback (or start `splash serve --model M` as a child and wait for /ready), read
// /v1/models, print `Starting <agent>: <model> · N context tokens`, then run the agent configured by
// launch/agent_config.h. Without a child server the agent replaces this process (exec); with one,
// the agent runs as a child and the server is stopped (SIGTERM) when it exits.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "launch/agent_config.h"
#include "launch/loopback_http.h"

extern char** environ;

namespace splash::cli {

namespace {

using launch::Agent;
using namespace std::chrono_literals;

int launcher_error(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  return 1;
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

std::string no_server_message(uint16_t port) {
  return str_cat("No ready Splash server at ", launch::loopback_url(port), ". Start one with 'splash serve --model MODEL",
                 port == 8000 ? std::string() : str_cat(" --port ", port),
                 "', or pass --model MODEL to start it here.");
}

std::string auth_message() {
  return "Splash authentication failed; set SPLASH_API_KEY to the key the server was started with (--api-key).";
}

// The environment the agent gets: ours with the launch's variables set or removed.
std::vector<std::string> agent_environment(const launch::AgentLaunch& l) {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    const std::string name = kv.substr(0, kv.find('='));
    bool replaced = false;
    for (const auto& [k, v] : l.env) replaced = replaced || k == name;
    if (!replaced) out.push_back(std::move(kv));
  }
  for (const auto& [k, v] : l.env)
    if (v) out.push_back(k + "=" + *v);
  return out;
}

[[noreturn]] void exec_agent(const std::string& program_path, const launch::AgentLaunch& l) {
  std::vector<std::string> env = agent_environment(l);
  std::vector<char*> argv, envp;
  for (const std::string& a : l.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  ::execve(program_path.c_str(), argv.data(), envp.data());
  std::fprintf(stderr, "cannot run %s: %s\n", program_path.c_str(), std::strerror(errno));
  _exit(127);
}

// A `splash serve` started for the agent, stopped when this object goes.
class ChildServer {
 public:
  ~ChildServer() { stop(); }
  Status start(const std::string& model, uint16_t port, const std::string& log_path) {
    log_path_ = log_path;
    pid_ = ::fork();
    if (pid_ < 0) return make_error("cannot start splash serve: ", std::strerror(errno));
    if (pid_ == 0) {
      FILE* log = std::fopen(log_path.c_str(), "w");
      if (log) {
        ::dup2(fileno(log), STDOUT_FILENO);
        ::dup2(fileno(log), STDERR_FILENO);
      }
      const std::string port_text = std::to_string(port);
      execl("/proc/self/exe", "splash", "serve", "--model", model.c_str(), "--port", port_text.c_str(),
            static_cast<char*>(nullptr));
      std::fprintf(stderr, "cannot run splash serve: %s\n", std::strerror(errno));
      _exit(127);
    }
    return {};
  }
  // Polls /ready until it answers 200; an error when the server exits first.
  Status wait_ready(uint16_t port, const std::string& key) {
    for (;;) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return make_error("splash serve exited (", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
                          ") before it was ready:\n", log_tail());
      }
      launch::GetResult r = launch::loopback_get(port, "/ready", key, 2s);
      if (r.reply && r.reply->status == 200) return {};
      std::this_thread::sleep_for(200ms);
    }
  }
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 300; ++i) {  // 30 s for the engine to release, then kill
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(100ms);
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  std::string log_tail() const {
    std::ifstream in(log_path_);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    std::string out;
    for (size_t i = lines.size() > 20 ? lines.size() - 20 : 0; i < lines.size(); ++i) out += lines[i] + "\n";
    return out;
  }
  pid_t pid_ = -1;
  std::string log_path_;
};

// Runs the agent as a child (a server child must outlive it) and returns its exit code. Ctrl+C goes
// to the agent (same process group); this process waits it out.
int run_agent_child(const std::string& program_path, const launch::AgentLaunch& l) {
  struct sigaction ignore {}, old_int {}, old_quit {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, &ignore, &old_int);
  ::sigaction(SIGQUIT, &ignore, &old_quit);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGQUIT, &old_quit, nullptr);
    exec_agent(program_path, l);
  }
  int status = 0;
  if (pid > 0)
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGQUIT, &old_quit, nullptr);
  if (pid < 0) return launcher_error(str_cat("cannot start ", l.argv[0], ": ", std::strerror(errno)));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string grouped(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

int run_agent_command(Agent agent, const std::vector<std::string>& args) {
  const char* port_env = std::getenv("SPLASH_PORT");
  auto parsed = launch::parse_agent_args(args, port_env);
  if (!parsed.ok()) {
    std::fprintf(stderr, "error: %s\n", parsed.error_message().c_str());
    return 2;
  }
  const launch::AgentArgs& a = *parsed;
  launch::ServerAddress server{a.port, env_or("SPLASH_API_KEY", "")};

  // The agent first: starting a server for a program that is not there helps no one.
  const std::string program = launch::agent_program(agent);
  const std::string program_path = launch::find_program(program, env_or("PATH", "/usr/local/bin:/usr/bin:/bin"));
  if (program_path.empty())
    return launcher_error(str_cat(program, " is not installed or is not on PATH; install ", launch::agent_title(agent),
                                  " with: ", launch::agent_install_command(agent)));

  ChildServer child;
  bool started_child = false;
  launch::GetResult models = launch::loopback_get(a.port, "/v1/models", server.api_key, 5s);
  if (!models.reply || models.reply->status == 503) {
    if (a.model.empty()) return launcher_error(no_server_message(a.port));
    const std::string log_path = str_cat(env_or("TMPDIR", "/tmp"), "/splash-serve-", a.port, ".log");
    std::printf("Starting splash serve --model %s --port %u (log: %s)\n", a.model.c_str(),
                static_cast<unsigned>(a.port), log_path.c_str());
    std::fflush(stdout);
    if (Status st = child.start(a.model, a.port, log_path); !st.ok()) return launcher_error(st.error_message());
    if (Status st = child.wait_ready(a.port, server.api_key); !st.ok()) return launcher_error(st.error_message());
    started_child = true;
    models = launch::loopback_get(a.port, "/v1/models", server.api_key, 10s);
    if (!models.reply) return launcher_error(no_server_message(a.port));
  }
  if (models.reply->status == 401 || models.reply->status == 403) return launcher_error(auth_message());
  if (models.reply->status != 200)
    return launcher_error(str_cat(no_server_message(a.port), " (GET /v1/models answered ", models.reply->status, ")"));
  auto served = launch::parse_models_reply(models.reply->body);
  if (!served.ok()) return launcher_error(str_cat(launch::loopback_url(a.port), ": ", served.error_message()));

  launch::AgentLaunch l = launch::agent_launch(agent, *served, server, a.agent_args);
  std::printf("Starting %s: %s · %s context tokens\n", program.c_str(), served->id.c_str(),
              grouped(served->context_length).c_str());
  std::fflush(stdout);
  if (!started_child) exec_agent(program_path, l);
  return run_agent_child(program_path, l);
}

}  // namespace splash::cli
