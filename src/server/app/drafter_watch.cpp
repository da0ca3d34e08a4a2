#include "server/app/drafter_watch.h"

#include <cstdio>
#include <filesystem>

#include "engine/scheduler.h"
#include "spec/dflash/dflash_drafter.h"

namespace splash::app {

DrafterWatch::DrafterWatch(DrafterWatchOptions options, const Model& target, Engine& engine)
    : options_(std::move(options)), target_(target), engine_(engine) {
  thread_ = std::thread([this] { run(); });
}

DrafterWatch::~DrafterWatch() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void DrafterWatch::run() {
  std::unique_lock lk(mu_);
  while (!stop_) {
    if (cv_.wait_for(lk, options_.interval, [this] { return stop_; })) break;
    lk.unlock();
    const bool over = poll();
    lk.lock();
    if (over) break;
  }
}

bool DrafterWatch::poll() {
  const auto dir = find_dflash_drafter(options_.model_path);
  std::error_code ec;
  if (!dir || !std::filesystem::is_regular_file(std::filesystem::path(*dir) / "model.safetensors", ec)) return false;
  auto source = make_dflash_source(*dir, target_, options_.threads);
  if (!source.ok()) {
    std::fprintf(stderr, "warning: the DFlash drafter %s does not load (%s); serving on with prompt lookup\n",
                 dir->c_str(), source.error_message().c_str());
    return true;
  }
  if (Status st = engine_.attach_drafter(std::move(*source)); !st.ok()) {
    std::fprintf(stderr, "warning: cannot attach the DFlash drafter %s: %s\n", dir->c_str(), st.error_message().c_str());
    return true;
  }
  std::printf("Speculative · dflash · block %d · %s (attached while serving; was lookup)\n", options_.block,
              dir->c_str());
  std::fflush(stdout);
  return true;
}

}  // namespace splash::app
