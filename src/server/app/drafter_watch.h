// Attaches the '<model>-dflash' drafter to a running server when it appears (issue 41: the demo's
// drafter is trained in the background after `scripts/setup` already serves, so the server starts
// on prompt lookup and switches to DFlash a few minutes later without a restart).
//
//   DrafterWatch watch({.model_path = path, .interval = 5s, .threads = t, .block = 8}, model, engine);
//   ...                                  // serving; the destructor stops and joins the watcher
//
// A thread looks for the folder every `interval` (find_dflash_drafter) and, once it holds both
// config.json and model.safetensors, loads it (off the engine thread: the target's weights are
// immutable, so the engine keeps decoding meanwhile) and hands it to Engine::attach_drafter(), which
// swaps it in at a step boundary. Training writes into '<name>-dflash.tmp' and renames the folder when
// done, so a folder that exists is complete. It prints
//   Speculative · dflash · block N · <dir> (attached while serving; was lookup)
// and stops; a drafter that fails to load prints a warning once and stops the watch (serving goes on
// with lookup). Thread-safety: the object is created and destroyed by one thread; the Model and
// Engine are borrowed and must outlive it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace splash {
class Engine;
class Model;
}  // namespace splash

namespace splash::app {

struct DrafterWatchOptions {
  std::string model_path;  // the path the target was opened from (the folder is looked for beside it)
  std::chrono::milliseconds interval{5000};
  int threads = 1;  // the drafter's compute threads (as at start-up)
  int block = 8;    // the engine's verify block, for the console line
};

class DrafterWatch {
 public:
  DrafterWatch(DrafterWatchOptions options, const Model& target, Engine& engine);
  ~DrafterWatch();
  DrafterWatch(const DrafterWatch&) = delete;
  DrafterWatch& operator=(const DrafterWatch&) = delete;

 private:
  void run();
  // One look: true when the watch is over (attached, or a drafter that does not load).
  bool poll();

  const DrafterWatchOptions options_;
  const Model& target_;
  Engine& engine_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace splash::app
