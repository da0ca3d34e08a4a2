// Shared pieces of the engine scheduler tests: a tiny model written once per test binary, and an
// event recorder per request.
#pragma once

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/generate.h"
#include "engine/scheduler.h"
#include "gtest/gtest.h"
#include "test_gate.h"
#include "testmodel/test_model.h"
#include "tokenizer/model_tokenizer.h"

namespace splash::sched_test {

struct LoadedModel {
  ModelFiles files;
  std::unique_ptr<Tokenizer> tokenizer;
  Model model;
};

// Loads the model at `path` (ModelFiles must outlive the Model, so both live in one object).
inline std::unique_ptr<LoadedModel> load_model(const std::string& path, const ModelOptions& mopts = {}) {
  auto files = ModelFiles::open(path);
  EXPECT_TRUE(files.ok()) << files.error_message();
  if (!files.ok()) return nullptr;
  auto out = std::make_unique<LoadedModel>();
  out->files = std::move(*files);
  auto tok = load_model_tokenizer(out->files);
  EXPECT_TRUE(tok.ok() && *tok) << (tok.ok() ? "no tokenizer" : tok.error_message());
  if (!tok.ok() || !*tok) return nullptr;
  out->tokenizer = std::move(*tok);
  auto model = Model::load(out->files, mopts);
  EXPECT_TRUE(model.ok()) << model.error_message();
  if (!model.ok()) return nullptr;
  out->model = std::move(*model);
  return out;
}

// tiny-llama (dim 64, 2 layers, context 2048) as GGUF F32, written once into a per-process temp dir.
inline const std::string& tiny_model_path() {
  static const std::string path = [] {
    const auto dir = std::filesystem::temp_directory_path() / ("splash_sched_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    const std::string p = (dir / "tiny.gguf").string();
    auto spec = test_model_preset("tiny-llama");
    EXPECT_TRUE(spec.ok()) << spec.error_message();
    Status st = write_test_model(*spec, p);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return p;
  }();
  return path;
}

// Removes the temp dir at exit of the binary.
struct TinyModelCleanup {
  ~TinyModelCleanup() {
    std::error_code ec;
    std::filesystem::remove_all(std::filesystem::temp_directory_path() / ("splash_sched_" + std::to_string(getpid())), ec);
  }
};

// Everything one request's callback saw, thread-safe.
class Recorder {
 public:
  EngineCallback callback() {
    return [this](const EngineEvent& e) { on_event(e); };
  }
  void on_event(const EngineEvent& e) {
    if (e.kind == EngineEvent::kText) gate_.pass();
    std::lock_guard lk(mu_);
    events_.push_back(e);
    if (e.kind == EngineEvent::kDone) ++n_done_;
    cv_.notify_all();
  }
  // Closed: this request's text events wait on the engine thread until it opens (test_gate.h).
  // Close it before submitting this request.
  engine_test::TestGate& text_gate() { return gate_; }
  // Waits for kDone; false after `timeout`.
  bool wait_done(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    std::unique_lock lk(mu_);
    return cv_.wait_for(lk, timeout, [&] { return n_done_ > 0; });
  }
  std::vector<EngineEvent> events() const {
    std::lock_guard lk(mu_);
    return events_;
  }
  int n_done() const {
    std::lock_guard lk(mu_);
    return n_done_;
  }
  EngineEvent done() const {
    std::lock_guard lk(mu_);
    for (const auto& e : events_)
      if (e.kind == EngineEvent::kDone) return e;
    return {};
  }
  std::vector<int32_t> tokens() const {
    std::lock_guard lk(mu_);
    std::vector<int32_t> out;
    for (const auto& e : events_)
      if (e.kind == EngineEvent::kText) out.insert(out.end(), e.tokens.begin(), e.tokens.end());
    return out;
  }
  std::string text() const {
    std::lock_guard lk(mu_);
    std::string out;
    for (const auto& e : events_)
      if (e.kind == EngineEvent::kText) out += e.text;
    return out;
  }
  int count(EngineEvent::Kind kind) const {
    std::lock_guard lk(mu_);
    int n = 0;
    for (const auto& e : events_) n += e.kind == kind;
    return n;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<EngineEvent> events_;
  int n_done_ = 0;
  engine_test::TestGate gate_;
};

// How generate() ended: at an end-of-generation token, or at one of its stop strings (both kStop).
inline bool ended_at_eos(const GenerateStats& s) { return s.finish == FinishReason::kStop && s.stop_index < 0; }
inline bool ended_at_stop_string(const GenerateStats& s) {
  return s.finish == FinishReason::kStop && s.stop_index >= 0;
}

inline EngineRequest greedy_request(std::vector<int32_t> prompt, int64_t max_tokens) {
  EngineRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

inline EngineOptions test_options(int lanes = 4) {
  EngineOptions o;
  o.lanes = lanes;
  o.kv_format = KvFormat::kF32;
  o.threads = 2;
  return o;
}

}  // namespace splash::sched_test
