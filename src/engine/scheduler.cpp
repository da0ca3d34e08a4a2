// Engine: the public API, the engine thread's outer loop, bookkeeping and status. One step's work is
// in schedule.cpp (cancels, admission, KV pages, the batch) and step_run.cpp (forward, results).
#include "engine/scheduler.h"

#include <algorithm>
#include <cmath>
#include <ctime>

#include "engine/cache_namespace.h"
#include "engine/scheduler_impl.h"

namespace splash {

namespace {
constexpr int kMaxLanes = 16;
constexpr int64_t kDefaultPoolCapBytes = int64_t{1} << 30;

int64_t pages_for_positions(int64_t n) { return (n + kKvPageTokens - 1) / kKvPageTokens; }
}  // namespace

// --- Engine -----------------------------------------------------------------------------------------

Engine::Engine(std::unique_ptr<EngineImpl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() {
  if (impl_) impl_->shutdown(/*to_disk=*/false);
}

Result<std::unique_ptr<Engine>> Engine::create(const Model& model, const Tokenizer& tokenizer,
                                               const EngineOptions& options) {
  SPLASH_TRY(std::unique_ptr<EngineImpl> impl, EngineImpl::create(model, tokenizer, options));
  impl->start();
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Result<uint64_t> Engine::submit(EngineRequest request, EngineCallback callback) {
  return impl_->submit(std::move(request), std::move(callback));
}
void Engine::cancel(uint64_t id) { impl_->cancel(id); }
EngineStatus Engine::status() const { return impl_->status(); }
void Engine::shutdown(bool to_disk) { impl_->shutdown(to_disk); }
Status Engine::attach_drafter(std::unique_ptr<DrafterSource> source) { return impl_->attach_drafter(std::move(source)); }

// --- EngineImpl: API side ----------------------------------------------------------------------------

Result<std::unique_ptr<EngineImpl>> EngineImpl::create(const Model& model, const Tokenizer& tokenizer,
                                                       const EngineOptions& options) {
  if (options.lanes < 1 || options.lanes > kMaxLanes)
    return make_error("engine: lanes = ", options.lanes, " is outside [1, ", kMaxLanes, "]");
  if (options.queue_size < 1) return make_error("engine: queue_size = ", options.queue_size, " must be >= 1");
  if (options.kv_pages < 0) return make_error("engine: kv_pages = ", options.kv_pages, " is negative");
  if (!std::isfinite(options.decode_share) || options.decode_share < 0)
    return make_error("engine: decode_share = ", options.decode_share, " must be a finite number >= 0");
  if (options.chunk_tokens < 0) return make_error("engine: chunk_tokens = ", options.chunk_tokens, " is negative");
  const int64_t chunk = options.chunk_tokens > 0 ? options.chunk_tokens : model.options().chunk_tokens;
  if (chunk < 1) return make_error("engine: the prefill chunk (", chunk, " tokens) must be >= 1");
  if (options.drafter && (options.spec_block < 1 || options.spec_block > 32))
    return make_error("engine: spec_block = ", options.spec_block, " is outside [1, 32]");

  int64_t n_pages = options.kv_pages;
  if (n_pages == 0) {
    // Enough for every lane at full context, within a cap that suits tests and small machines; the
    // memory plan passes an explicit size when serving.
    const int64_t per_context = pages_for_positions(model.max_context());
    const int64_t page_bytes = KvPagePool::page_bytes(model.kv_cache_config(options.kv_format, 1));
    const int64_t cap = std::max(per_context, kDefaultPoolCapBytes / std::max<int64_t>(page_bytes, 1));
    n_pages = std::min(per_context * options.lanes, cap);
  }
  auto kv = KvPagePool::create(model.kv_cache_config(options.kv_format, n_pages));
  if (!kv.ok()) return make_error("engine: KV pool of ", n_pages, " pages: ", kv.error_message());
  return std::make_unique<EngineImpl>(model, tokenizer, options, std::move(*kv), chunk);
}

EngineImpl::EngineImpl(const Model& model, const Tokenizer& tokenizer, const EngineOptions& options, KvPagePool kv,
                       int64_t chunk_tokens)
    : model_(model),
      tokenizer_(tokenizer),
      options_(options),
      chunk_(chunk_tokens),
      kv_pages_total_(kv.kv_pages_total()),
      threads_(options.threads),
      kv_(std::move(kv)) {
  fwd_.chunk_tokens = chunk_;
  status_.lanes = options_.lanes;
  status_.restore_state_bytes = model_.recurrent_state_floats() * static_cast<int64_t>(sizeof(float));
  status_.queue_size = options_.queue_size;
  status_.scheduler.decode_batches_by_width.assign(static_cast<size_t>(options_.lanes), 0);
  sched_ = status_.scheduler;
  status_.kv.pages_allocated = kv_.kv_pages_total();
  status_.kv.pages_free = kv_.kv_pages_free();
  status_.kv.allocated_bytes = kv_.kv_bytes_total();
  status_.kv.page_bytes = kv_.page_bytes();
  if (options_.drafter && options_.spec_block > 1) {
    drafter_ = options_.drafter;
    // Every pass returns the hidden rows the drafter conditions on (DFlash; empty for the others).
    fwd_.hidden_layers = drafter_->make()->hidden_layers();
    metrics_.draft_method = std::string(drafter_->method());
    method_metrics(metrics_.draft_method);
  }
  status_.metrics = metrics_;  // the drafter's method shows before the first step
  if (options_.prefix_cache) {
    PrefixCacheOptions co;
    // The same description the disk tier was opened with (serve): one function, so a change to it
    // cannot leave the disk's chains unreachable from the engine's root.
    co.namespace_description = engine_cache_namespace(model_, options_.cache_identity, options_.kv_format);
    co.recurrent_floats = model_.recurrent_state_floats();
    co.max_checkpoint_bytes = options_.max_checkpoint_bytes;
    co.disk = options_.cache_store;
    co.write_behind_delay = options_.cache_write_behind_delay;
    cache_ = std::make_unique<PrefixCache>(kv_, std::move(co));
    status_.cache_enabled = true;
  }
}

Result<uint64_t> EngineImpl::submit(EngineRequest request, EngineCallback callback) {
  uint64_t id = 0;
  {
    std::lock_guard lk(mu_);
    id = next_id_++;
  }
  auto reject = [&](Error error) -> Result<uint64_t> {
    std::lock_guard lk(mu_);
    ++status_.requests.rejected;
    return error;
  };
  auto lane = Lane::create(id, std::move(request), std::move(callback), tokenizer_, model_.config().n_vocab,
                           model_.max_context());
  // Lane::create checks only the request's own fields.
  if (!lane.ok()) return reject(make_error(ErrorCode::kInvalidArgument, lane.error_message()));
  const int64_t need = pages_for_positions((*lane)->max_positions());
  if (need > kv_pages_total_)
    return reject(make_error(ErrorCode::kCapacityExhausted, "capacity_exhausted: the request needs up to ",
                             (*lane)->max_positions(), " KV positions (", need, " pages) but the KV pool holds ",
                             kv_pages_total_,
                             " pages; lower max_tokens or the prompt, or raise --max-memory / lower --max-context"));
  std::lock_guard lk(mu_);
  if (stop_) {
    ++status_.requests.rejected;
    return make_error(ErrorCode::kShuttingDown, "shutting down: the engine is stopping");
  }
  if (n_admitted_ >= options_.queue_size) {
    ++status_.requests.rejected;
    return make_error(ErrorCode::kQueueFull, "queue full: ", n_admitted_, " requests are running or waiting (queue size ",
                      options_.queue_size, ")");
  }
  ++n_admitted_;
  ++status_.requests.submitted;
  incoming_.push_back(std::move(*lane));
  cv_.notify_one();
  return id;
}

void EngineImpl::cancel(uint64_t id) {
  std::lock_guard lk(mu_);
  if (stop_) return;  // shutdown cancels everything anyway
  cancels_.push_back(id);
  cv_.notify_one();
}

EngineStatus EngineImpl::status() const {
  std::lock_guard lk(mu_);
  EngineStatus s = status_;
  s.scheduler.queued += static_cast<int64_t>(incoming_.size());
  s.metrics.ttft_ms = ttft_window_.summary();
  s.metrics.itl_ms = itl_window_.summary();
  return s;
}

Status EngineImpl::attach_drafter(std::unique_ptr<DrafterSource> source) {
  if (!source) return make_error("attach_drafter: no drafter source");
  if (options_.spec_block < 2)
    return make_error("attach_drafter: speculative decoding is off in this engine (spec_block ", options_.spec_block,
                      ")");
  if (options_.spec_block > 32)  // create() checks this only when a drafter is there from the start
    return make_error("attach_drafter: spec_block = ", options_.spec_block, " is outside [2, 32]");
  std::lock_guard lk(mu_);
  if (stop_) return make_error(ErrorCode::kShuttingDown, "shutting down: the engine is stopping");
  incoming_drafter_ = std::move(source);
  cv_.notify_one();
  return {};
}

void EngineImpl::shutdown(bool to_disk) {
  {
    std::lock_guard lk(mu_);
    if (!stop_) stop_to_disk_ = to_disk;
    stop_ = true;
    cv_.notify_one();
  }
  // A callback (engine thread) may call shutdown(): it cannot join itself; the thread drains on its
  // way out and the destructor joins.
  if (std::this_thread::get_id() == thread_.get_id()) return;
  std::lock_guard jl(join_mu_);
  if (thread_.joinable()) thread_.join();
}

// --- EngineImpl: engine thread -----------------------------------------------------------------------

void EngineImpl::take_incoming() {
  std::lock_guard lk(mu_);
  while (!incoming_.empty()) {
    queue_.push_back(std::move(incoming_.front()));
    incoming_.pop_front();
  }
}

void EngineImpl::thread_main() {
  for (;;) {
    std::vector<uint64_t> cancels;
    {
      std::unique_lock lk(mu_);
      // Lanes or queued requests are work, unless the last step could only wait for an SSD read:
      // then it looks again every 2 ms (the read's batch takes longer than that).
      auto work = [&] {
        return stop_ || !incoming_.empty() || !cancels_.empty() || incoming_drafter_ ||
               (!disk_wait_only_ && (!lanes_.empty() || !queue_.empty()));
      };
      EngineClock::time_point until = write_behind_at_;
      if (disk_wait_only_) until = std::min(until, EngineClock::now() + std::chrono::milliseconds(2));
      if (until == EngineClock::time_point::max()) cv_.wait(lk, work);
      else cv_.wait_until(lk, until, work);
      if (stop_) break;
      while (!incoming_.empty()) {
        queue_.push_back(std::move(incoming_.front()));
        incoming_.pop_front();
      }
      cancels.swap(cancels_);
      if (incoming_drafter_) pending_drafter_ = std::move(incoming_drafter_);
    }
    if (pending_drafter_ && try_swap_drafter()) publish_and_deliver();
    step(std::move(cancels));
    // Restore points due for write-behind: a bounded batch into the disk tier's queue (its writer
    // thread does the I/O).
    if (cache_) write_behind_at_ = cache_->write_behind(EngineClock::now());
    publish_and_deliver();
  }
  drain();
}

void EngineImpl::drain() {
  {
    std::lock_guard lk(mu_);
    while (!incoming_.empty()) {
      queue_.push_back(std::move(incoming_.front()));
      incoming_.pop_front();
    }
    cancels_.clear();
  }
  const EngineClock::time_point now = EngineClock::now();
  while (!lanes_.empty()) end_lane_at(lanes_.size() - 1, FinishReason::kCancelled, "", now);
  while (!queue_.empty()) {
    std::unique_ptr<Lane> lane = std::move(queue_.front());
    queue_.pop_front();
    end_lane(std::move(lane), FinishReason::kCancelled, "", now);
  }
  // Clean stop with a persistent SSD cache (spec 5.6), or shutdown(to_disk) (an idle release keeps the
  // prefix on the temporary tier): the cached pages and checkpoints go to disk, newest conversations
  // first, for at most 6 s, so that the next start (or engine) takes them back; when the cache is
  // larger than 6 s of writes, the oldest are the ones left out.
  bool to_disk = false;
  {
    std::lock_guard lk(mu_);
    to_disk = stop_to_disk_;
  }
  if (cache_ && options_.cache_store != nullptr && (options_.cache_store->persistent() || to_disk)) {
    cache_->flush_to_disk(EngineClock::now() + std::chrono::seconds(6));
    options_.cache_store->flush();
  }
  publish_and_deliver();
}

void EngineImpl::end_lane(std::unique_ptr<Lane> lane, FinishReason reason, std::string error,
                          EngineClock::time_point now) {
  // The prompt and the committed generated tokens stay cached for a follow-up turn (an error may
  // have left the last forward half done: nothing of it is kept).
  if (reason != FinishReason::kError) cache_publish(*lane);
  lane->release(kv_);
  switch (reason) {
    case FinishReason::kStop:
    case FinishReason::kLength:
    case FinishReason::kContext: ++log_.completed; break;
    case FinishReason::kCancelled:
    case FinishReason::kTimeout: ++log_.cancelled; break;
    case FinishReason::kError: ++log_.failed; break;
  }
  done_.push_back(lane->finish(reason, std::move(error), now));
}

void EngineImpl::end_lane_at(size_t i, FinishReason reason, std::string error, EngineClock::time_point now) {
  std::unique_ptr<Lane> lane = std::move(lanes_[i]);
  lanes_.erase(lanes_.begin() + static_cast<std::ptrdiff_t>(i));
  end_lane(std::move(lane), reason, std::move(error), now);
}

bool EngineImpl::try_swap_drafter() {
  std::vector<int> layers = pending_drafter_->make()->hidden_layers();
  auto conflicts = [&](const std::unique_ptr<Lane>& lane) {
    return lane->drafter() && !lane->drafter()->hidden_layers().empty() && lane->drafter()->hidden_layers() != layers;
  };
  // Preempted lanes wait in queue_ with their drafter and run it again when re-admitted.
  if (std::any_of(lanes_.begin(), lanes_.end(), conflicts) || std::any_of(queue_.begin(), queue_.end(), conflicts))
    return false;
  // Lanes still running on a drafter without hidden layers (lookup) ignore the rows the new one needs.
  if (!layers.empty() || drafter_ == nullptr) fwd_.hidden_layers = std::move(layers);
  attached_drafters_.push_back(std::move(pending_drafter_));
  drafter_ = attached_drafters_.back().get();
  metrics_.draft_method = std::string(drafter_->method());
  method_metrics(metrics_.draft_method);
  ++metrics_.drafters_attached;
  metrics_.drafter_attached_unix_s = static_cast<int64_t>(std::time(nullptr));
  return true;
}

EngineStatus::Metrics::DraftMethod& EngineImpl::method_metrics(std::string_view method) {
  for (auto& m : metrics_.draft_methods)
    if (m.method == method) return m;
  metrics_.draft_methods.push_back({std::string(method)});
  return metrics_.draft_methods.back();
}

void EngineImpl::publish_and_deliver() {
  std::vector<Lane::Done> done;
  done.swap(done_);
  {
    std::lock_guard lk(mu_);
    for (double v : log_.ttft_ms) ttft_window_.add(v);
    for (double v : log_.itl_ms) itl_window_.add(v);
    EngineStatus& s = status_;
    s.requests.completed += log_.completed;
    s.requests.cancelled += log_.cancelled;
    s.requests.failed += log_.failed;
    n_admitted_ -= static_cast<int64_t>(done.size());
    s.scheduler = sched_;
    s.scheduler.queued = static_cast<int64_t>(queue_.size());
    s.scheduler.waiting_resources = waiting_resources_;
    s.scheduler.waiting_prefix = waiting_prefix_;
    s.scheduler.waiting_disk = waiting_disk_;
    s.scheduler.prefilling = 0;
    s.scheduler.decoding = 0;
    for (const auto& lane : lanes_) ++(lane->decoding() ? s.scheduler.decoding : s.scheduler.prefilling);
    s.active_lanes = static_cast<int64_t>(lanes_.size());
    s.kv.pages_cache = cache_ ? cache_->pages_exclusive() : 0;
    s.kv.pages_active = kv_.kv_pages_used() - s.kv.pages_cache;
    s.kv.pages_free = kv_.kv_pages_free();
    if (cache_) s.cache = cache_->stats();
    s.metrics = metrics_;
  }
  log_ = TickLog{};
  for (Lane::Done& d : done)
    if (d.callback) d.callback(d.event);
}

}  // namespace splash
