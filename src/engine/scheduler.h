// The serving engine behind `splash serve`: admits requests (already tokenized), runs up to `lanes`
// of them at once on one model, and streams their text back through callbacks.
//
//   auto engine = *Engine::create(model, tokenizer, {.lanes = 4});
//   EngineRequest req;  req.prompt = ids;  req.max_tokens = 128;
//   auto id = engine->submit(std::move(req), [](const EngineEvent& e) { ... });   // never blocks
//   engine->cancel(*id);                                                           // client went away
//
// Scheduling (one engine thread): each step (schedule -> run -> postprocess, scheduler_impl.h) builds
// ONE forward batch from every decoding lane's next token plus at most one prefill chunk
// (chunk_tokens) of the oldest prefilling lane, so decoding lanes keep streaming while a long prompt
// is prefilled. Requests beyond `lanes` wait in a FIFO;
// submit() refuses once `queue_size` requests (running + waiting) are admitted. KV pages come from
// one pool shared by the lanes and are taken as the sequences grow; when the pool runs dry the
// youngest lane gives its pages back and later recomputes them (same tokens, nothing is lost), and a
// request that could not fit even alone is refused at submit() ("capacity_exhausted: ...").
//
// Thread-safety: submit(), cancel(), status() and shutdown() may be called from any thread, callbacks
// included (none of them blocks on a forward pass). Callbacks run on the engine thread, one event at
// a time, and must not block. Every accepted request gets exactly one kDone, always last.
// Ownership: the Model and Tokenizer are borrowed and must outlive the Engine; the engine owns its
// KV pool, thread pool and thread. Destroying the Engine calls shutdown() and joins the engine
// thread, so it must not be destroyed from inside a callback (shutdown() itself may be called there).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend/cpu/attention_kv.h"
#include "cache/prefix_cache.h"
#include "constrain/matcher.h"
#include "core/finish_reason.h"
#include "core/result.h"
#include "engine/engine_metrics.h"
#include "model/model.h"
#include "sampling/logprobs.h"
#include "sampling/sampling_params.h"
#include "spec/drafter.h"
#include "tokenizer/tokenizer.h"

namespace splash {

struct EngineRequest {
  std::vector<int32_t> prompt;  // [n_prompt] token ids, already templated and tokenized, non-empty
  SamplingParams sampling;
  // > 0: tokens to generate at most (an end-of-generation token excluded); 0 only with
  // prompt_logprobs (score the prompt, generate nothing: the request ends kLength after its prefill).
  int64_t max_tokens = 0;
  std::vector<std::string> stop;  // stop strings, matched on the decoded text across tokens
  // Never stop at an end-of-generation token: those tokens are masked out before sampling (as
  // llama.cpp does), so the request runs to max_tokens, a stop string or the context limit.
  bool ignore_eos = false;
  bool want_progress = false;   // kProgress events after each prefill chunk
  // Publish this request's KV pages (prompt and generated tokens) into the prefix cache for later
  // requests; false = read the cache but write nothing (spec 2.4 cache_prompt).
  bool cache_prompt = true;
  // Log-probabilities in the model's raw distribution (sampling/logprobs.h: before temperature,
  // penalties and filters). -1 = none (no cost); 0..kMaxTopLogprobs = every generated token's
  // logprob plus that many most likely alternatives (EngineEvent::logprobs). Under speculative
  // decoding they come from the verify pass's target rows, so they are those of plain decoding.
  int logprobs = -1;
  // The prompt's own logprobs (EngineEvent::prompt_logprobs, with max(logprobs, 0) alternatives): its
  // logits are computed for every prompt position, so the prefix cache is not read for this request.
  bool prompt_logprobs = false;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // Structured output: every token is drawn from those the matcher allows (the others' logits are
  // -inf before any sampler), and the request stops where only an end can follow. Its vocabulary must
  // be the model's (n_vocab entries). The lane owns it from submit() on.
  std::shared_ptr<constrain::Matcher> constraint;
};

struct EngineEvent {
  enum Kind : uint8_t { kProgress, kText, kDone } kind = kText;
  // kProgress (spec 2.6 prompt_progress): prompt tokens, initially cached (reused from the prefix
  // cache), processed so far including cached, ms since the request got its lane.
  int64_t total = 0, cache = 0, processed = 0;
  double time_ms = 0;
  // kText: a piece that never ends inside a UTF-8 character and never holds part of a stop string,
  // and the ids sampled since the previous kText (the id that completed a stop string included).
  // Every generated id appears in exactly one kText; `text` may be empty (e.g. at the end).
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprob> logprobs;  // [tokens.size()] when EngineRequest::logprobs >= 0, else empty
  // EngineRequest::prompt_logprobs: [n_prompt - 1] for prompt[1..] (the first token has no context),
  // once, in a kText of its own (no text, no tokens) before any generated token's.
  std::vector<TokenLogprob> prompt_logprobs;
  // kDone
  FinishReason finish = FinishReason::kStop;
  std::string error;  // kError: what failed
  int32_t stop_index = -1;  // kStop by a stop string: its index in EngineRequest::stop, else -1
  int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;  // cached: reused prompt tokens
  double prompt_ms = 0;     // lane admission to the first sampled token (spec timings.prompt_ms)
  double predicted_ms = 0;  // first sampled token to the end (spec timings.predicted_ms)
};

// Runs on the engine thread; must not block (hand the event to a bounded writer and return).
using EngineCallback = std::function<void(const EngineEvent&)>;

struct EngineOptions {
  int lanes = 4;          // requests decoding at once, [1, 16]
  int queue_size = 32;    // admitted requests (running + waiting), >= lanes; beyond: "queue full"
  // KV pool size in 32-token pages (the memory plan picks it). 0 = enough for `lanes` full contexts,
  // capped at 1 GiB of pages (but never below one full context).
  int64_t kv_pages = 0;
  KvFormat kv_format = KvFormat::kInt8;
  int threads = 0;             // compute threads; 0 = default_thread_count()
  int64_t chunk_tokens = 0;    // prefill chunk; 0 = the model's (ModelOptions::chunk_tokens)
  // Put the prefill chunk into the same forward as the decode rows (true), or run prefill chunks
  // and decode batches in alternate steps (false). Measured in docs/SERVER.md; mixing is the default.
  bool mix_prefill = true;
  // --decode-share (spec 5.2): when a prompt's prefill competes with decoding lanes, each pass that
  // carried a prefill chunk is followed by decode-only passes until they have taken decode_share
  // times that pass's wall time, and at least one (0 = strictly alternate). Finite, >= 0.
  double decode_share = 0.5;
  // The prefix cache (cache/prefix_cache.h): requests reuse the KV of the longest cached prefix of
  // their prompt; finished and preempted requests leave their pages in it until the pool needs them.
  bool prefix_cache = true;
  // Identity of the weights for the cache namespace (e.g. the model file's size and mtime): a cache
  // shared across restarts or processes must not mix two files of one architecture.
  std::string cache_identity;
  BlockStore* cache_store = nullptr;  // the disk tier (not owned, outlives the engine); nullptr = RAM only
  int64_t max_checkpoint_bytes = int64_t{1} << 30;  // RAM for recurrent-state checkpoints (hybrid models)
  // Persistent cache_store only (spec 5.6): a conversation's newest restore point (>= 2048 tokens)
  // is written to disk this long after its publication unless superseded (tests set it small).
  std::chrono::milliseconds cache_write_behind_delay{10000};
  // Speculative decoding (spec/, spec 6): every decoding lane gets a Drafter from this source and
  // feeds [last token, up to spec_block - 1 proposals] in the same batched forward as the other
  // lanes; the target verifies them (greedy output = plain decoding's, sampling distribution exact).
  // nullptr or spec_block < 2 = plain decoding. Not owned; must outlive the engine. spec_block >= 2
  // without a drafter leaves room for Engine::attach_drafter().
  const DrafterSource* drafter = nullptr;
  int spec_block = 8;
  // Whether a lane's draft budget also weighs each step's wall time (spec/draft_budget.h: drafting
  // slower than plain decoding pauses). false = acceptance alone decides, a schedule that does not
  // depend on the machine's speed (tests that count steps; acceptance measurements).
  bool spec_time_rule = true;
};

struct EngineStatus {
  struct Scheduler {
    int64_t queued = 0;             // waiting for a lane
    int64_t waiting_resources = 0;  // holding a lane, waiting for KV pages
    int64_t waiting_prefix = 0;     // prompts waiting behind a lane that is computing their prefix
    int64_t waiting_disk = 0;       // holding a lane, waiting for its prefix to be read from the SSD
    int64_t prefilling = 0;         // lanes prefilling (or recomputing after giving pages back)
    int64_t decoding = 0;           // lanes decoding
    int64_t prefill_batches = 0;    // forward passes that carried a prefill chunk
    int64_t prefill_rows = 0;       // prompt (and recomputed) tokens run through the model
    int64_t decode_batches = 0;     // forward passes that carried decode rows
    std::vector<int64_t> decode_batches_by_width;  // [lanes]: [w - 1] = decode batches of w rows (b1..b4)
    int64_t preemptions = 0;        // lanes that gave their pages back to let older lanes grow
    int64_t decode_share_batches = 0;  // decode-only passes owed to decoders while a prompt waited
  } scheduler;
  PrefixCacheStats cache;   // prefix cache counters (all zero when it is off)
  bool cache_enabled = false;
  struct Requests {
    int64_t submitted = 0;  // accepted by submit()
    int64_t completed = 0;  // kStop, kLength, kContext
    int64_t cancelled = 0;  // kCancelled, kTimeout
    int64_t failed = 0;     // kError
    int64_t rejected = 0;   // refused by submit() (queue full, capacity, invalid)
  } requests;
  struct Kv {
    int64_t pages_allocated = 0;  // pool size
    int64_t pages_active = 0;     // held by lanes
    int64_t pages_cache = 0;      // held by the prefix cache alone (reclaimable)
    int64_t pages_free = 0;
    int64_t allocated_bytes = 0;  // pool memory
    int64_t page_bytes = 0;
  } kv;
  int64_t lanes = 0;         // configured lanes
  int64_t active_lanes = 0;  // lanes holding a request
  // One restore state (spec 5.1 checkpoint group): a sequence's recurrent state in bytes (conv
  // windows + delta-rule matrices of every Gated DeltaNet layer, fp32); 0 for attention-only models.
  int64_t restore_state_bytes = 0;
  int64_t queue_size = 0;
  struct Metrics {
    LatencySummary ttft_ms;  // submit() to the first sampled token
    LatencySummary itl_ms;   // between consecutive sampled tokens of one request
    int64_t prefill_tokens = 0, decode_tokens = 0;
    double prefill_ms = 0, decode_ms = 0;    // wall time of forwards that carried prefill / decode rows
    double prefill_tok_s = 0, decode_tok_s = 0;  // tokens / those wall times (mixed passes count for both)
    // Speculative decoding (spec 3 metrics names): proposals verified, accepted, their ratio, and the
    // mean tokens committed per verify step of a lane (accepted + the target's own token).
    std::string draft_method;  // the current drafter: "lookup", "draft", "dflash", "mtp"; empty when off
    int64_t drafted_tokens = 0, accepted_draft_tokens = 0, verify_steps = 0;
    double draft_acceptance_rate = 0, mean_accepted_length = 0;
    // The same counters per method of the lanes' drafters, in the order the methods first ran or were
    // attached: one entry, plus one per drafter attached while serving (Engine::attach_drafter).
    struct DraftMethod {
      std::string method;
      int64_t drafted_tokens = 0, accepted_draft_tokens = 0, verify_steps = 0;
    };
    std::vector<DraftMethod> draft_methods;
    int64_t drafters_attached = 0;  // attach_drafter() sources that new lanes now use
    int64_t drafter_attached_unix_s = 0;  // when the last one was swapped in (seconds since 1970); 0 = never
  } metrics;
};

class EngineImpl;

class Engine {
 public:
  // Errors: options out of range, the KV pool allocation failing. Starts the engine thread.
  static Result<std::unique_ptr<Engine>> create(const Model& model, const Tokenizer& tokenizer,
                                                const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates and queues the request; returns its id (> 0). Errors (the callback is never called), by
  // code: kInvalidArgument for an empty prompt, ids outside the vocabulary, a prompt at or past the
  // context limit, max_tokens <= 0 (0 allowed with prompt_logprobs), logprobs outside [-1, 20], bad
  // sampling parameters or stop strings; kCapacityExhausted ("capacity_exhausted: ...") when the
  // request could not fit the KV pool even alone; kQueueFull ("queue full: ...") when queue_size
  // requests are admitted; kShuttingDown ("shutting down: ...").
  Result<uint64_t> submit(EngineRequest request, EngineCallback callback);

  // The request ends with kDone(kCancelled) before the engine runs another forward pass; its lane
  // and KV pages are freed first. Unknown or finished ids are ignored.
  void cancel(uint64_t id);

  EngineStatus status() const;

  // Replaces the drafter source while serving (a DFlash drafter trained after the server started):
  // lanes admitted after the engine thread takes it (at the next step boundary) get drafters from
  // `source`; lanes already running keep theirs, so no sequence changes drafter mid-way. The swap
  // waits while a running lane's drafter conditions on other target layers than the new one's (the
  // forward returns one set of hidden rows). Greedy output does not change: verification is exact.
  // The engine owns `source` from here on. Errors: a null source, an engine built with spec_block < 2
  // (speculation off) or > 32, kShuttingDown. A second call before the first was taken replaces it.
  Status attach_drafter(std::unique_ptr<DrafterSource> source);

  // Every request still queued or running gets kDone(kCancelled) (after at most the forward pass in
  // progress); the engine thread is joined. Later submits fail with kShuttingDown. Idempotent.
  // With a persistent cache_store the cached pages go to disk first (spec 5.6); `to_disk` asks for
  // that with a temporary store too (an idle release: the next engine on the same store finds them).
  void shutdown(bool to_disk = false);

 private:
  explicit Engine(std::unique_ptr<EngineImpl> impl);
  std::unique_ptr<EngineImpl> impl_;
};

}  // namespace splash
