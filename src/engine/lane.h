// One request inside the engine: its tokens, KV sequence, sampler, detokenizer and stop matcher,
// and the events it streams. The scheduler (scheduler.cpp) decides when a lane runs and what it
// feeds; the lane turns each logits row into a token, text and, eventually, a finish reason.
//
// A lane's tokens are ctx = prompt + every generated token it kept. Its KV holds the first kv_len()
// of them; the rest are still to be fed: more than one (or a prompt not yet sampled from) means
// prefilling, exactly one (the last sampled token) means decoding. A lane that gave its pages back
// (preempt) has kv_len() == 0 and simply prefills ctx again; its last chunk's logits are then the
// next decode step's, so recomputation changes nothing but time.
//
// Not thread-safe: owned and driven by the engine thread (created on the submitting thread, before
// the engine sees it).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "constrain/mask_worker.h"
#include "engine/scheduler.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "sampling/stop_matcher.h"
#include "spec/draft_budget.h"
#include "spec/drafter.h"
#include "tokenizer/detokenizer.h"

namespace splash {

using EngineClock = std::chrono::steady_clock;

double ms_between(EngineClock::time_point a, EngineClock::time_point b);

class Lane {
 public:
  // Validates the request (see Engine::submit). n_vocab: the model's logits width; max_context: the
  // model's context limit.
  static Result<std::unique_ptr<Lane>> create(uint64_t id, EngineRequest request, EngineCallback callback,
                                              const Tokenizer& tokenizer, int64_t n_vocab, int64_t max_context);

  uint64_t id() const { return id_; }
  const EngineRequest& request() const { return request_; }
  int64_t n_prompt() const { return static_cast<int64_t>(request_.prompt.size()); }
  int64_t n_generated() const { return n_generated_; }

  SequenceState& seq() { return seq_; }
  const SequenceState& seq() const { return seq_; }
  int64_t kv_pages_held() const { return static_cast<int64_t>(seq_.kv.pages.size()); }
  int64_t kv_len() const { return seq_.n_tokens(); }
  // Tokens of ctx not yet in the KV.
  int64_t to_feed() const { return static_cast<int64_t>(ctx_.size()) - kv_len(); }
  bool decoding() const { return sampled_any_ && to_feed() == 1; }
  bool prefilling() const { return !decoding(); }
  // The next n tokens to feed, n <= to_feed().
  std::span<const int32_t> feed(int64_t n) const;
  // Positions the whole ctx would need, and would reach once the request runs to its end.
  int64_t max_positions() const { return max_positions_; }

  // --- prefix cache
  std::span<const int32_t> ctx() const { return ctx_; }
  BlockChain& cache_chain() { return chain_; }
  // Before its first prefill chunk (and again after preempt) the lane looks its ctx up in the cache.
  bool needs_lookup() const { return needs_lookup_; }
  // Starts the KV from a lookup (n_tokens may be 0); the first one sets cached_tokens().
  void adopt_prefix(PrefixMatch match);
  int64_t cached_tokens() const { return cached_tokens_; }
  int64_t resumed_at() const { return resumed_at_; }  // where the current prefill started

  // --- timing
  void set_admitted(EngineClock::time_point t) { admitted_ = t; }
  EngineClock::time_point submitted() const { return submitted_; }
  bool past_deadline(EngineClock::time_point now) const { return now >= request_.deadline; }

  // --- prompt logprobs (EngineRequest::prompt_logprobs)
  // Prompt positions still need their logits: the scheduler asks for every row of the prefill chunk
  // and skips the prefix cache lookup.
  bool wants_prompt_rows() const {
    return request_.prompt_logprobs && !prompt_scored_ && n_prompt() > 1;
  }
  // The rows of a prefill chunk fed at `fed_at` (kAll, n_rows of them, [n_rows, n_vocab]): the
  // logprobs of the prompt tokens they predict; once all are in, a kText carries them. Rows already
  // scored (a recomputation after preemption) are skipped.
  void on_prompt_rows(const float* rows, int64_t n_vocab, int64_t fed_at, int64_t n_rows);
  // max_tokens == 0: the request ends after its prefill without sampling.
  bool scores_only() const { return request_.max_tokens == 0; }

  // After every prefill chunk (the last one before on_logits): a kProgress event when asked for and
  // this is the first prefill (not a recomputation).
  void after_prefill_chunk(EngineClock::time_point now);

  // --- speculative decoding (spec/): the lane's drafter sees committed tokens only
  void set_drafter(std::unique_ptr<Drafter> drafter) { drafter_ = std::move(drafter); }
  Drafter* drafter() const { return drafter_.get(); }
  // A decoding lane's next input: [last token, proposals...]. plan_block() asks the drafter for up to
  // max_proposals, fewer near max_tokens or the context limit (plain decoding: just the last token).
  void plan_block(int max_proposals);
  void drop_proposals() { block_.resize(1); }
  std::span<const int32_t> block() const { return block_; }
  int64_t n_proposals() const { return static_cast<int64_t>(block_.size()) - 1; }
  std::vector<float>& recurrent_snapshot() { return snapshot_; }
  DraftBudget& draft_budget() { return budget_; }
  // Hands the drafter the ctx tokens it has not seen and `n_rows` hidden rows of run `run` of `out`
  // (from its row `first_row`, at sequence position `position`).
  Status sync_drafter(const ForwardOutput& out, size_t run, int64_t first_row, int64_t n_rows, int64_t position);

  // What one sampled token did, for the engine's metrics.
  struct Step {
    bool first_token = false;
    double ttft_ms = 0;  // submit -> first token (first_token only)
    double itl_ms = -1;  // since the previous token; < 0 when there is none
    std::optional<FinishReason> finish;
    std::string error;
  };
  // The logits after the lane's last fed token: samples, streams kText, and says whether the request
  // is finished (the caller then calls finish()). `logits` [n_vocab] is modified (penalties, masks).
  // With a `proposal` (a drafted token for this row, speculative verification: spec/verify.h) the
  // token is drawn so that it equals the proposal exactly as often as the target allows; the caller
  // reads ctx().back() to see whether it was accepted.
  Step on_logits(std::span<float> logits, EngineClock::time_point now, int32_t proposal = -1);

  // Gives the KV pages back; the lane will prefill its ctx again.
  void preempt(KvPagePool& pool);
  // Releases the KV pages (idempotent).
  void release(KvPagePool& pool) { release_sequence(pool, seq_); }

  // Ends the request: streams the held-back text (not after a cancel or an error), then returns the
  // kDone event and hands over the callback so the engine can deliver it after its bookkeeping.
  struct Done {
    EngineEvent event;
    EngineCallback callback;
  };
  Done finish(FinishReason reason, std::string error, EngineClock::time_point now);

 private:
  Lane(uint64_t id, EngineRequest request, EngineCallback callback, const Tokenizer& tokenizer, Sampler sampler,
       StopMatcher stops, int64_t max_context);
  void emit_text(std::string text);

  uint64_t id_;
  EngineRequest request_;
  EngineCallback callback_;
  const Tokenizer* tokenizer_;
  Sampler sampler_;
  IncrementalDetokenizer detok_;
  StopMatcher stops_;
  int64_t max_context_;
  int64_t max_positions_ = 0;

  std::vector<int32_t> ctx_;             // [n_prompt + n_generated] prompt, then kept generated ids
  SequenceState seq_;                    // KV of ctx_[0, kv_len())
  std::vector<int32_t> pending_tokens_;  // generated ids whose text has not been streamed yet
  std::vector<TokenLogprob> pending_logprobs_;  // [pending_tokens_.size()] when logprobs are asked for
  std::vector<float> raw_row_;           // [n_vocab] the logits row before sampling changes it (logprobs)
  std::vector<float> logprob_scratch_;   // [n_vocab] token_logprob's exp weights
  std::vector<TokenLogprob> prompt_logprobs_;  // [<= n_prompt - 1] scored prompt tokens, prompt[1..]
  bool prompt_scored_ = false;           // prompt_logprobs_ went out (a recomputation scores nothing)
  int64_t n_generated_ = 0;
  bool sampled_any_ = false;
  bool recomputing_ = false;
  bool needs_lookup_ = true;
  bool looked_up_once_ = false;
  int64_t cached_tokens_ = 0;
  int64_t resumed_at_ = 0;
  BlockChain chain_;  // block keys of ctx_, kept across chunks
  std::unique_ptr<Drafter> drafter_;  // null: plain decoding
  std::vector<int32_t> block_;        // [1 + n_proposals] the next decode input
  std::vector<float> snapshot_;       // recurrent state before a verify pass (hybrid models)
  std::vector<float> hidden_rows_;    // scratch for sync_drafter
  DraftBudget budget_;                // proposals to ask for, from how the last ones fared
  int64_t n_observed_ = 0;            // ctx_ tokens the drafter has seen
  int64_t n_vocab_ = 0;
  // The constraint's next mask, computed on a helper thread from each accepted token on, so it
  // overlaps the forward pass; null without a constraint.
  std::unique_ptr<constrain::MaskWorker> mask_worker_;

  EngineClock::time_point submitted_, admitted_, first_token_, last_token_;
};

}  // namespace splash
