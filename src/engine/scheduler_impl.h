// The engine's private state, shared by scheduler.cpp (public API, thread, bookkeeping) and the
// three parts of one step: schedule.cpp (cancels, admission, cache lookup, KV pages, preemption,
// drafts -> a Batch), step_run.cpp (the forward, then sampling, verification, rollback, stops,
// events and metrics) and scheduler_cache.cpp (prefix cache lookup and publication).
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/thread_pool.h"
#include "engine/batch.h"
#include "engine/engine_metrics.h"
#include "engine/lane.h"
#include "engine/scheduler.h"

namespace splash {

class EngineImpl {
 public:
  // Validates the options and allocates the KV pool (Engine::create's errors); the thread is not
  // started: start() does that, or a test drives the steps itself.
  static Result<std::unique_ptr<EngineImpl>> create(const Model& model, const Tokenizer& tokenizer,
                                                    const EngineOptions& options);
  EngineImpl(const Model& model, const Tokenizer& tokenizer, const EngineOptions& options, KvPagePool kv,
             int64_t chunk_tokens);
  ~EngineImpl() { shutdown(/*to_disk=*/false); }

  Result<uint64_t> submit(EngineRequest request, EngineCallback callback);
  void cancel(uint64_t id);
  EngineStatus status() const;
  Status attach_drafter(std::unique_ptr<DrafterSource> source);
  void shutdown(bool to_disk);
  void start() { thread_ = std::thread([this] { thread_main(); }); }

  // --- one step, on the engine thread (public so that tests/unit/engine/step_test.cpp can drive the
  // parts of a step on an engine whose thread was never started)
  // Moves submitted requests into the FIFO queue (the thread does this before every step).
  void take_incoming();
  // Cancels and deadlines, admission, the prefix cache lookup, KV pages for the decode rows (dropping
  // proposals, then preempting the youngest lane when the pool is dry), the prefill chunk and the
  // drafts: the step's forward batch, empty when nothing can run (lanes may have ended).
  Batch schedule(std::vector<uint64_t> cancels);
  // The forward pass of `batch` (times recorded in it); on failure the model rolled every run back
  // and the batch's lanes end with kError; false then.
  bool run(Batch& batch);
  // Each run's logits: prompt logprobs, sampling and verification of proposals, KV rollback of the
  // rejected ones, stop checks, events, drafter updates, cache publication and metrics; finished
  // lanes end.
  void postprocess(const Batch& batch);
  // schedule -> run -> postprocess.
  void step(std::vector<uint64_t> cancels);
  // Publishes counters and delivers the queued kDone events (callbacks run without the lock).
  void publish_and_deliver();
  // Running lanes, oldest first; the forward output of the last run() (rows a test may rewrite before
  // postprocess()); the KV pool.
  const std::vector<std::unique_ptr<Lane>>& lanes() const { return lanes_; }
  size_t queued() const { return queue_.size(); }
  ForwardOutput& forward_output() { return out_; }
  const KvPagePool& kv() const { return kv_; }

 private:
  // Counters the engine thread keeps and publishes into status_ once per step.
  struct TickLog {
    std::vector<double> ttft_ms, itl_ms;
    int64_t completed = 0, cancelled = 0, failed = 0;
  };

  void thread_main();
  void drain();  // shutdown: cancel everything left
  // Ends `lane` (already out of lanes_/queue_): pages released, kDone queued for delivery.
  void end_lane(std::unique_ptr<Lane> lane, FinishReason reason, std::string error, EngineClock::time_point now);
  // Removes lanes_[i] and ends it.
  void end_lane_at(size_t i, FinishReason reason, std::string error, EngineClock::time_point now);
  // Preempts the youngest lane holding pages other than `keep`; false if there is none.
  bool preempt_youngest(const Lane* keep);
  int64_t pages_needed(const Lane& lane, int64_t n_new) const;
  // Evicts cached pages until `n` pages are free (or nothing more can go); the pool's free count.
  int64_t reclaim(int64_t n);
  // Prefix cache: the lane's KV starts from the longest cached prefix of its ctx (leaving >= 1 token).
  // Blocks only the SSD tier holds are read first, off this thread: until they are in, the lane
  // waits (needs_lookup() stays true) and the other lanes run on.
  void cache_lookup(Lane& lane);
  // Lanes waiting to prefill behind `head` (the prefilling lane that runs) whose prompt shares whole
  // pages with head's that head has not computed yet: they will reuse them (spec 5.1 waiting_prefix).
  int64_t count_waiting_prefix(const Lane& head) const;
  // Prefix cache: the lane's whole pages (and a checkpoint when it stands on one) go into the index.
  void cache_publish(Lane& lane);
  // schedule()'s parts.
  void apply_cancels(const std::vector<uint64_t>& cancels, EngineClock::time_point now);
  void admit(EngineClock::time_point now);
  // Plans every decoding lane's block and makes sure the pool has its pages: `decoders` (oldest
  // first) and the pages they take. false: the oldest decoder cannot fit even alone and has ended.
  bool reserve_decode_pages(std::vector<Lane*>& decoders, int64_t& need, EngineClock::time_point now);
  // Tokens of `prefill`'s next chunk that fit the pages left after `reserve` (0: it waits this step);
  // without decoders it preempts younger lanes to make room. nullopt: it cannot fit even alone and
  // has ended.
  std::optional<int64_t> prefill_chunk(Lane& prefill, int64_t reserve, bool has_decoders, EngineClock::time_point now);
  // Ends the lane as unable to fit the KV pool even alone (capacity_exhausted).
  void end_capacity_exhausted(const Lane* lane, EngineClock::time_point now);
  // Ends the batch's lanes with `message` (the forward failed).
  void end_batch(const Batch& batch, const std::string& message, EngineClock::time_point now);
  // postprocess() for run `r`: its rows; a lane that is done goes into `finished`.
  void process_run(const Batch& batch, size_t r, std::vector<std::pair<Lane*, Lane::Step>>& finished);
  // The forward's wall time into the batch counters and decode_share.
  void count_batch(const Batch& batch);
  // Makes `pending_drafter_` the source of new lanes once no running lane conditions on other hidden
  // layers (attach_drafter); false while it has to wait.
  bool try_swap_drafter();
  // The per-method counters of `method`, added on first use.
  EngineStatus::Metrics::DraftMethod& method_metrics(std::string_view method);

  const Model& model_;
  const Tokenizer& tokenizer_;
  const EngineOptions options_;
  const int64_t chunk_;
  const int64_t kv_pages_total_;
  ForwardOptions fwd_;
  ForwardOutput out_;  // every step's forward output, reused (Model::forward_into: no allocation per step)
  ThreadPool threads_;
  std::vector<SequenceRun> seq_runs_;  // run()'s view of the batch, reused

  // --- shared with submitting threads, under mu_
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Lane>> incoming_;  // submitted, not yet taken by the engine thread
  std::vector<uint64_t> cancels_;
  std::unique_ptr<DrafterSource> incoming_drafter_;  // attach_drafter(), not yet taken
  bool stop_ = false;
  bool stop_to_disk_ = false;  // shutdown(to_disk): flush the cache to a temporary store too
  int64_t n_admitted_ = 0;  // submitted and not yet done (queue_size bound)
  uint64_t next_id_ = 1;
  EngineStatus status_;     // published by the engine thread (metrics summaries filled by status())
  LatencyWindow ttft_window_, itl_window_;
  std::mutex join_mu_;

  // --- engine thread only
  // The source new lanes' drafters come from: options_.drafter, or the last attached one. Attached
  // sources stay owned here for the engine's life (declared before the lanes, so they outlive them).
  const DrafterSource* drafter_ = nullptr;
  std::vector<std::unique_ptr<DrafterSource>> attached_drafters_;
  std::unique_ptr<DrafterSource> pending_drafter_;  // taken from incoming_drafter_, waiting to swap
  KvPagePool kv_;
  std::unique_ptr<PrefixCache> cache_;        // null when options_.prefix_cache is off; before kv_ dies
  std::deque<std::unique_ptr<Lane>> queue_;   // waiting for a lane, FIFO
  std::vector<std::unique_ptr<Lane>> lanes_;  // running, oldest first
  std::vector<Lane::Done> done_;              // kDone events to deliver after publishing
  TickLog log_;
  EngineStatus::Scheduler sched_;             // cumulative counters
  EngineStatus::Metrics metrics_;
  int64_t waiting_resources_ = 0;
  int64_t waiting_prefix_ = 0;
  int64_t waiting_disk_ = 0;
  // The last step ran nothing because the only work is a prefix being read from the SSD: the thread
  // sleeps briefly instead of spinning.
  bool disk_wait_only_ = false;
  // EngineOptions::decode_share: decode-only time (ms) owed to decoders after contended prefill
  // passes, and the one decode-only pass owed after each of them.
  double decode_owed_ms_ = 0;
  bool decode_pass_owed_ = false;
  // The prefix cache's next write-behind step (a persistent disk tier): the thread wakes for it even
  // when idle.
  EngineClock::time_point write_behind_at_ = EngineClock::time_point::max();

  std::thread thread_;
};

}  // namespace splash
