// The engine behind the routes, with --idle-release (spec 1.2, 3 `weights`): after `idle_release`
// without requests the loaded assembly (weights, drafter, engine with its KV pool and RAM prefix
// cache) is destroyed, and the next request loads it again through the same loader start-up used.
// The SSD cache tier is not part of the assembly, so what it holds survives a release.
//
//   EngineHost host(std::move(first_assembly), loader, options.idle_release);
//   auto lease = host.acquire();                  // loads first if released; blocks meanwhile
//   if (!lease.ok()) ...                           // the reload failed: 503
//   (*lease)->engine().submit(req, [lease = *lease](const EngineEvent& e) { ... });
//
// A request holds its lease until its last event: while any lease lives nothing is released, and the
// idle clock starts when the last one goes.
// Thread-safety: every member may be called from any thread. acquire() blocks while a load runs;
// a lease may be dropped on any thread, the engine's included (it only updates atomics).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "core/result.h"
#include "engine/scheduler.h"

namespace splash::app {

// What one load builds; owned by the host, destroyed on release. Destroying it must stop the engine
// before the weights go.
class EngineAssembly {
 public:
  virtual ~EngineAssembly() = default;
  virtual Engine& engine() = 0;
  // Stops what feeds the engine, then the engine (every request gets its last event); the assembly
  // stays in memory until destroyed. `to_disk`: the RAM prefix cache goes to the SSD tier first (an
  // idle release), so the next assembly's engine finds it there.
  virtual void stop(bool to_disk) = 0;
};

struct WeightsStatus {
  std::optional<double> idle_release_seconds;  // nullopt: --idle-release off
  bool released = false;      // the weights and KV pool are not in memory now
  int64_t releases = 0;       // idle releases so far
  int64_t restores = 0;       // reloads after a release
  int64_t restore_failures = 0;
  double last_restore_ms = 0;  // how long the last reload took (the requests waiting on it waited that long)
  std::string last_restore_error;
};

class EngineHost {
 public:
  using Loader = std::function<Result<std::unique_ptr<EngineAssembly>>()>;

  class Lease {
   public:
    Lease(EngineHost& host, EngineAssembly& assembly, double waited_ms)
        : host_(host), assembly_(assembly), waited_ms_(waited_ms) {}
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Engine& engine() const { return assembly_.engine(); }
    // How long acquire() waited for a reload (0 when the weights were loaded).
    double load_wait_ms() const { return waited_ms_; }

   private:
    EngineHost& host_;
    EngineAssembly& assembly_;
    double waited_ms_;
  };

  // `loaded` is the assembly start-up built; `reload` builds another the same way.
  EngineHost(std::unique_ptr<EngineAssembly> loaded, Loader reload,
             std::optional<std::chrono::milliseconds> idle_release);
  ~EngineHost();  // stops the idle watch and destroys the assembly (all leases must be gone)
  EngineHost(const EngineHost&) = delete;
  EngineHost& operator=(const EngineHost&) = delete;

  // The engine, loaded first when released. Errors: kUnavailable, the reload failed (the message says
  // why); kShuttingDown, the host is stopping.
  Result<std::shared_ptr<Lease>> acquire();

  // The engine's status, or while released the last one seen with its KV figures zeroed (no pool).
  EngineStatus engine_status() const;
  WeightsStatus weights_status() const;
  // Requests hold leases: true while any does (the sleep inhibitor's test).
  bool busy() const { return leases_.load() > 0; }

  // Releases now if no lease is held (what the idle watch does); true when it released. For tests.
  bool release_if_idle();
  // Stops the idle watch and shuts the engine down; acquire() fails afterwards.
  void shutdown();

 private:
  using Clock = std::chrono::steady_clock;
  void idle_loop();
  void drop_lease();

  Loader reload_;
  const std::optional<std::chrono::milliseconds> idle_release_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<EngineAssembly> assembly_;  // null while released
  bool loading_ = false, stopping_ = false;
  // Dropping a lease never takes mu_: a lease may go on the engine's thread while it holds its own
  // lock, and engine_status() holds mu_ while it asks for that one. Leases are only added under mu_,
  // so a release that saw none under mu_ cannot race a new one.
  std::atomic<int64_t> leases_{0};
  std::atomic<Clock::rep> last_activity_{0};  // steady clock ticks of the last acquire or lease end
  EngineStatus last_status_;  // taken at release
  WeightsStatus weights_;
  std::thread idle_thread_;
};

}  // namespace splash::app
