#include "engine/lane.h"

#include <algorithm>
#include <limits>

#include "core/check.h"
#include "sampling/row_kernels.h"
#include "spec/spec_sequence.h"
#include "spec/verify.h"

namespace splash {

double ms_between(EngineClock::time_point a, EngineClock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

Result<std::unique_ptr<Lane>> Lane::create(uint64_t id, EngineRequest request, EngineCallback callback,
                                           const Tokenizer& tokenizer, int64_t n_vocab, int64_t max_context) {
  const int64_t n_prompt = static_cast<int64_t>(request.prompt.size());
  if (n_prompt == 0) return make_error("submit: the prompt is empty (pass at least the BOS token)");
  for (int64_t i = 0; i < n_prompt; ++i) {
    const int32_t t = request.prompt[static_cast<size_t>(i)];
    if (t < 0 || t >= n_vocab)
      return make_error("submit: prompt token ", i, " has id ", t, ", outside the vocabulary [0, ", n_vocab, ")");
  }
  if (n_prompt >= max_context)
    return make_error("submit: the prompt has ", n_prompt, " tokens; the model's context limit is ", max_context,
                      " (no room to generate)");
  if (request.max_tokens < 0 || (request.max_tokens == 0 && !request.prompt_logprobs))
    return make_error("submit: max_tokens = ", request.max_tokens, " must be > 0 (0 only when scoring the prompt)");
  if (request.logprobs < -1 || request.logprobs > kMaxTopLogprobs)
    return make_error("submit: logprobs = ", request.logprobs, " must be in [-1, ", kMaxTopLogprobs, "]");
  if (!callback) return make_error("submit: no callback");
  if (request.constraint && request.constraint->vocab().size() != n_vocab) {
    return make_error("submit: the constraint's vocabulary has ", request.constraint->vocab().size(),
                      " tokens, the model ", n_vocab);
  }
  if (Status st = request.sampling.validate(); !st.ok()) return make_error("submit: ", st.error_message());
  auto sampler = Sampler::create(request.sampling);
  if (!sampler.ok()) return make_error("submit: ", sampler.error_message());
  auto stops = StopMatcher::create(request.stop);
  if (!stops.ok()) return make_error("submit: ", stops.error_message());
  std::unique_ptr<Lane> lane(new Lane(id, std::move(request), std::move(callback), tokenizer, std::move(*sampler),
                                      std::move(*stops), max_context));
  lane->n_vocab_ = n_vocab;
  if (lane->request_.constraint) {
    lane->mask_worker_ = std::make_unique<constrain::MaskWorker>(lane->request_.constraint,
                                                                 lane->request_.constraint->timing().test_delay);
  }
  return lane;
}

Lane::Lane(uint64_t id, EngineRequest request, EngineCallback callback, const Tokenizer& tokenizer, Sampler sampler,
           StopMatcher stops, int64_t max_context)
    : id_(id),
      request_(std::move(request)),
      callback_(std::move(callback)),
      tokenizer_(&tokenizer),
      sampler_(std::move(sampler)),
      detok_(tokenizer),
      stops_(std::move(stops)),
      max_context_(max_context) {
  const int64_t n_prompt = static_cast<int64_t>(request_.prompt.size());
  // The last sampled token is never fed back, so the KV reaches prompt + max_tokens - 1 at most.
  // A scoring-only request (max_tokens 0) still feeds its whole prompt.
  max_positions_ = std::min(max_context_, n_prompt + std::max<int64_t>(request_.max_tokens, 1) - 1);
  ctx_ = request_.prompt;
  sampler_.accept_prompt(request_.prompt);
  submitted_ = admitted_ = EngineClock::now();
}

std::span<const int32_t> Lane::feed(int64_t n) const {
  SPLASH_CHECK(n >= 0 && n <= to_feed());
  return std::span<const int32_t>(ctx_).subspan(static_cast<size_t>(kv_len()), static_cast<size_t>(n));
}

void Lane::after_prefill_chunk(EngineClock::time_point now) {
  if (!request_.want_progress || recomputing_ || sampled_any_) return;
  EngineEvent e;
  e.kind = EngineEvent::kProgress;
  e.total = n_prompt();
  e.cache = cached_tokens_;
  e.processed = std::min(kv_len(), n_prompt());
  e.time_ms = ms_between(admitted_, now);
  callback_(e);
}

void Lane::emit_text(std::string text) {
  if (text.empty() && pending_tokens_.empty()) return;
  EngineEvent e;
  e.kind = EngineEvent::kText;
  e.text = std::move(text);
  e.tokens = std::move(pending_tokens_);
  e.logprobs = std::move(pending_logprobs_);
  pending_tokens_.clear();
  pending_logprobs_.clear();
  callback_(e);
}

void Lane::on_prompt_rows(const float* rows, int64_t n_vocab, int64_t fed_at, int64_t n_rows) {
  if (!wants_prompt_rows()) return;
  const int top_n = std::max(request_.logprobs, 0);
  for (int64_t i = 0; i < n_rows; ++i) {
    // Row i sits at position fed_at + i and predicts the token after it.
    const int64_t target = fed_at + i + 1;
    if (target != static_cast<int64_t>(prompt_logprobs_.size()) + 1 || target >= n_prompt()) continue;
    prompt_logprobs_.push_back(token_logprob({rows + i * n_vocab, static_cast<size_t>(n_vocab)},
                                             request_.prompt[static_cast<size_t>(target)], top_n, logprob_scratch_));
  }
  if (static_cast<int64_t>(prompt_logprobs_.size()) < n_prompt() - 1) return;
  prompt_scored_ = true;
  EngineEvent e;
  e.kind = EngineEvent::kText;
  e.prompt_logprobs = std::move(prompt_logprobs_);
  prompt_logprobs_ = {};
  callback_(e);
}

void Lane::plan_block(int max_proposals) {
  block_.assign(1, ctx_.back());
  if (!drafter_ || max_proposals <= 0) return;
  // The block's last position must stay inside the context, and proposals past max_tokens are waste.
  const int64_t room = std::min<int64_t>({budget_.next(max_proposals), request_.max_tokens - n_generated_ - 1,
                                          max_context_ - kv_len() - 1});
  if (room <= 0) return;
  auto proposals = drafter_->propose(static_cast<int>(room));
  if (!proposals.ok()) return;  // a drafter failure costs speed, never the request
  for (int32_t t : *proposals) {
    if (static_cast<int64_t>(block_.size()) > room || t < 0 || t >= n_vocab_) break;
    block_.push_back(t);
  }
}

Status Lane::sync_drafter(const ForwardOutput& out, size_t run, int64_t first_row, int64_t n_rows, int64_t position) {
  if (!drafter_) return {};
  DraftObservation obs;
  obs.tokens = std::span<const int32_t>(ctx_).subspan(static_cast<size_t>(n_observed_));
  if (n_rows > 0 && !out.hidden.empty()) {
    gather_hidden_rows(out, run, first_row, n_rows, hidden_rows_);
    obs.hidden = hidden_rows_.data();
    obs.n_hidden_rows = n_rows;
    obs.hidden_position = position;
    obs.hidden_width = static_cast<int64_t>(hidden_rows_.size()) / n_rows;
  }
  n_observed_ = static_cast<int64_t>(ctx_.size());
  return drafter_->observe(obs);
}

Lane::Step Lane::on_logits(std::span<float> logits, EngineClock::time_point now, int32_t proposal) {
  Step step;
  // Logprobs come from the raw row: sampling below rewrites it (penalties, masks, temperature).
  if (request_.logprobs >= 0) raw_row_.assign(logits.begin(), logits.end());
  if (request_.ignore_eos) {
    for (int32_t id : tokenizer_->eog_ids())
      if (id >= 0 && static_cast<size_t>(id) < logits.size()) logits[static_cast<size_t>(id)] = -std::numeric_limits<float>::infinity();
  }
  if (request_.constraint) {
    constrain::Matcher& m = *request_.constraint;
    // Started when the last token was accepted (the first one here); the matcher is the worker's
    // until the mask is back.
    mask_worker_->start();
    const uint64_t* mask = mask_worker_->wait(m.timing().mask_timeout);
    if (mask == nullptr) {
      step.finish = FinishReason::kError;
      step.error = str_cat(constrain::kMaskTimeoutError, ": the structured-output mask was not ready within ",
                           m.timing().mask_timeout.count() / 1000, " ms");
      return step;
    }
    if (m.must_end()) {  // the output is complete: nothing but an end may follow
      step.finish = FinishReason::kStop;
      return step;
    }
    row_apply_mask(logits, mask);
  }
  auto sampled = verify_row(sampler_, logits, proposal);
  if (!sampled.ok()) {
    step.finish = FinishReason::kError;
    step.error = sampled.error_message();
    return step;
  }
  const int32_t tok = *sampled;
  if (request_.constraint && !request_.constraint->accept(tok)) {
    step.finish = FinishReason::kError;
    step.error = str_cat("constrained sampling drew token ", tok, ", which the grammar does not allow");
    return step;
  }
  if (!sampled_any_) {
    sampled_any_ = true;
    first_token_ = now;
    step.first_token = true;
    step.ttft_ms = ms_between(submitted_, now);
  } else {
    step.itl_ms = ms_between(last_token_, now);
  }
  last_token_ = now;
  recomputing_ = false;
  if (!request_.ignore_eos && tokenizer_->is_eog(tok)) {
    step.finish = FinishReason::kStop;
    return step;
  }
  sampler_.accept(tok);
  ctx_.push_back(tok);
  pending_tokens_.push_back(tok);
  if (request_.logprobs >= 0)
    pending_logprobs_.push_back(token_logprob(raw_row_, tok, request_.logprobs, logprob_scratch_));
  ++n_generated_;
  StopMatcher::Feed fed = stops_.feed(detok_.push(tok));
  if (!fed.emit.empty()) emit_text(std::move(fed.emit));
  if (fed.stopped) {
    step.finish = FinishReason::kStop;
  } else if (n_generated_ >= request_.max_tokens) {
    step.finish = FinishReason::kLength;
  } else if (static_cast<int64_t>(ctx_.size()) - 1 >= max_context_) {
    // The new token would go to position ctx.size() - 1, past the last one the model has.
    step.finish = FinishReason::kContext;
  }
  if (mask_worker_ && !step.finish) mask_worker_->start();  // the next mask, while the forward pass runs
  return step;
}

void Lane::preempt(KvPagePool& pool) {
  release_sequence(pool, seq_);
  recomputing_ = sampled_any_;
  needs_lookup_ = true;
}

void Lane::adopt_prefix(PrefixMatch match) {
  SPLASH_CHECK(seq_.kv.pages.empty() && match.n_tokens < static_cast<int64_t>(ctx_.size()));
  seq_.kv = std::move(match.kv);
  seq_.recurrent = std::move(match.recurrent);
  resumed_at_ = match.n_tokens;
  needs_lookup_ = false;
  if (!looked_up_once_) cached_tokens_ = std::min(match.n_tokens, n_prompt());
  looked_up_once_ = true;
}

Lane::Done Lane::finish(FinishReason reason, std::string error, EngineClock::time_point now) {
  if (reason != FinishReason::kCancelled && reason != FinishReason::kError) {
    std::string tail;
    if (!stops_.stopped()) {
      StopMatcher::Feed fed = stops_.feed(detok_.flush());
      tail = std::move(fed.emit);
      if (!fed.stopped) tail += stops_.finish();
    }
    emit_text(std::move(tail));
  }
  Done done;
  EngineEvent& e = done.event;
  e.kind = EngineEvent::kDone;
  e.finish = reason;
  e.error = std::move(error);
  e.stop_index = stops_.stopped() ? stops_.stop_index() : -1;
  e.prompt_tokens = n_prompt();
  e.cached_tokens = cached_tokens_;
  e.completion_tokens = n_generated_;
  if (sampled_any_) {
    e.prompt_ms = ms_between(admitted_, first_token_);
    e.predicted_ms = ms_between(first_token_, now);
  } else {
    e.prompt_ms = std::max(0.0, ms_between(admitted_, now));
  }
  done.callback = std::move(callback_);
  return done;
}

}  // namespace splash
