#include "server/app/engine_host.h"

#include <cstdio>

namespace splash::app {

EngineHost::Lease::~Lease() { host_.drop_lease(); }

EngineHost::EngineHost(std::unique_ptr<EngineAssembly> loaded, Loader reload,
                       std::optional<std::chrono::milliseconds> idle_release)
    : reload_(std::move(reload)), idle_release_(idle_release), assembly_(std::move(loaded)) {
  last_activity_ = Clock::now().time_since_epoch().count();
  if (idle_release_) weights_.idle_release_seconds = std::chrono::duration<double>(*idle_release_).count();
  if (idle_release_) idle_thread_ = std::thread([this] { idle_loop(); });
}

EngineHost::~EngineHost() {
  shutdown();
  std::unique_ptr<EngineAssembly> gone;
  {
    std::lock_guard lock(mu_);
    gone = std::move(assembly_);
  }
  // Outside the lock: the engine's last callbacks drop their leases, which takes it.
  gone.reset();
}

void EngineHost::shutdown() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    if (assembly_) assembly_->stop(/*to_disk=*/false);
  }
  cv_.notify_all();
  if (idle_thread_.joinable()) idle_thread_.join();
}

Result<std::shared_ptr<EngineHost::Lease>> EngineHost::acquire() {
  const auto start = Clock::now();
  bool waited = false;
  std::unique_lock lock(mu_);
  for (;;) {
    if (stopping_) return make_error(ErrorCode::kShuttingDown, "shutting down: the server is stopping");
    if (assembly_) {
      ++leases_;
      const auto now = Clock::now();
      last_activity_ = now.time_since_epoch().count();
      const double waited_ms = waited ? std::chrono::duration<double, std::milli>(now - start).count() : 0.0;
      return std::make_shared<Lease>(*this, *assembly_, waited_ms);
    }
    waited = true;
    if (loading_) {
      cv_.wait(lock);
      continue;
    }
    // Released: this request loads the weights again; others wait for it.
    loading_ = true;
    lock.unlock();
    std::printf("Reloading · the weights were released after %.0f s idle\n", weights_.idle_release_seconds.value_or(0));
    std::fflush(stdout);
    const auto t0 = Clock::now();
    auto loaded = reload_();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    lock.lock();
    loading_ = false;
    if (!loaded.ok()) {
      ++weights_.restore_failures;
      weights_.last_restore_error = loaded.error_message();
      cv_.notify_all();
      std::fprintf(stderr, "Error · reloading the model failed: %s\n", loaded.error_message().c_str());
      return make_error(ErrorCode::kUnavailable, "the model could not be loaded again after an idle release: ",
                        loaded.error_message());
    }
    assembly_ = std::move(*loaded);
    ++weights_.restores;
    weights_.released = false;
    weights_.last_restore_ms = ms;
    weights_.last_restore_error.clear();
    std::printf("Reloaded · weights and engine in %.2f s\n", ms / 1000.0);
    std::fflush(stdout);
    cv_.notify_all();
  }
}

void EngineHost::drop_lease() {
  last_activity_ = Clock::now().time_since_epoch().count();
  --leases_;
  cv_.notify_all();  // without mu_ (see the header); the idle watch also looks again every second
}

bool EngineHost::release_if_idle() {
  {
    std::lock_guard lock(mu_);
    if (!assembly_ || loading_ || leases_ > 0 || stopping_) return false;
    last_status_ = assembly_->engine().status();
    last_status_.kv.pages_allocated = last_status_.kv.pages_active = last_status_.kv.pages_cache = 0;
    last_status_.kv.pages_free = last_status_.kv.allocated_bytes = 0;
    last_status_.active_lanes = 0;
    // Destroyed under the lock so that a request arriving meanwhile waits and then loads a fresh
    // copy, never two at once. No lease is held, so no engine callback needs the lock meanwhile.
    assembly_->stop(/*to_disk=*/true);
    assembly_.reset();
    weights_.released = true;
    ++weights_.releases;
  }
  std::printf("Released · weights and KV memory after %.0f s idle; the next request loads them again\n",
              weights_.idle_release_seconds.value_or(0));
  std::fflush(stdout);
  return true;
}

void EngineHost::idle_loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (!assembly_ || loading_) {
      cv_.wait(lock);
      continue;
    }
    if (leases_ > 0) {  // a lease's end may notify between this test and the wait: look again soon
      cv_.wait_for(lock, std::chrono::seconds(1));
      continue;
    }
    const auto due = Clock::time_point(Clock::duration(last_activity_.load())) + *idle_release_;
    if (Clock::now() < due) {
      cv_.wait_until(lock, due);
      continue;
    }
    lock.unlock();
    release_if_idle();
    lock.lock();
  }
}

EngineStatus EngineHost::engine_status() const {
  std::lock_guard lock(mu_);
  return assembly_ ? assembly_->engine().status() : last_status_;
}

WeightsStatus EngineHost::weights_status() const {
  std::lock_guard lock(mu_);
  return weights_;
}

}  // namespace splash::app
