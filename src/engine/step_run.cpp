// EngineImpl::run() and postprocess(): the second and third parts of a step. run() feeds the batch
// schedule() planned through one forward pass; postprocess() hands each lane its logits rows in batch
// order (prompt logprobs, sampling, verification of proposals), rolls rejected proposals out of the KV,
// updates drafters and the draft budget, publishes completed pages to the prefix cache, counts the
// pass and ends the lanes that finished.
#include <algorithm>

#include "engine/scheduler_impl.h"
#include "spec/spec_sequence.h"

namespace splash {

bool EngineImpl::run(Batch& batch) {
  seq_runs_.clear();
  for (const BatchRun& r : batch.runs) seq_runs_.push_back({&r.lane->seq(), r.tokens, r.logits});
  batch.forward_start = EngineClock::now();
  const Status st = model_.forward_into(seq_runs_, kv_, threads_, out_, fwd_);
  batch.forward_end = EngineClock::now();
  if (st.ok()) return true;
  // The model rolled every run back; only this batch's requests fail.
  end_batch(batch, str_cat("engine_failed: ", st.error_message()), batch.forward_end);
  return false;
}

void EngineImpl::end_batch(const Batch& batch, const std::string& message, EngineClock::time_point now) {
  for (const BatchRun& r : batch.runs)
    for (size_t i = 0; i < lanes_.size(); ++i)
      if (lanes_[i].get() == r.lane) {
        end_lane_at(i, FinishReason::kError, message, now);
        break;
      }
}

void EngineImpl::count_batch(const Batch& batch) {
  const double dt = ms_between(batch.forward_start, batch.forward_end);
  if (batch.has_prefill() && batch.prefill_contended) {
    decode_owed_ms_ = std::max(0.0, decode_owed_ms_) + options_.decode_share * dt;
    decode_pass_owed_ = true;
  } else if (batch.n_decode > 0) {
    decode_owed_ms_ = std::max(0.0, decode_owed_ms_ - dt);
    decode_pass_owed_ = false;
  }
  if (batch.n_decode > 0) {
    ++sched_.decode_batches;
    ++sched_.decode_batches_by_width[std::min(batch.n_decode, sched_.decode_batches_by_width.size()) - 1];
    metrics_.decode_tokens += static_cast<int64_t>(batch.n_decode);
    metrics_.decode_ms += dt;
  }
  if (batch.has_prefill()) {
    ++sched_.prefill_batches;
    sched_.prefill_rows += batch.n_prefill;
    metrics_.prefill_tokens += batch.n_prefill;
    metrics_.prefill_ms += dt;
    metrics_.prefill_tok_s = metrics_.prefill_ms > 0 ? metrics_.prefill_tokens * 1000.0 / metrics_.prefill_ms : 0;
  }
}

void EngineImpl::process_run(const Batch& batch, size_t r, std::vector<std::pair<Lane*, Lane::Step>>& finished) {
  const BatchRun& run = batch.runs[r];
  Lane* lane = run.lane;
  const EngineClock::time_point now = batch.forward_end;
  const int64_t n_fed = static_cast<int64_t>(run.tokens.size());
  bool sample = run.logits != LogitRows::kNone;
  if (!run.decode) {
    cache_publish(*lane);  // whole pages as they complete: a request right behind reuses them
    lane->after_prefill_chunk(now);
    if (run.logits == LogitRows::kAll) lane->on_prompt_rows(out_.logits_at(r, 0), out_.n_vocab, run.position, n_fed);
    sample = lane->to_feed() == 0;  // the prompt's last chunk (kAll rows come with every chunk)
    if (sample && lane->scores_only()) {
      finished.emplace_back(lane, Lane::Step{});
      finished.back().second.finish = FinishReason::kLength;
      return;
    }
  }
  // Rows in order; a verify run goes on while the committed token is the proposal (spec/verify.h).
  const int64_t k = run.n_proposals;
  int64_t n_accepted = 0;
  bool lane_finished = false;
  for (int64_t i = 0; i <= k && sample; ++i) {
    float* row =
        out_.logits.data() + (k > 0 ? out_.logits_offset[r] + i : out_.logits_offset[r + 1] - 1) * out_.n_vocab;
    const int32_t proposal = i < k ? run.tokens[static_cast<size_t>(i + 1)] : -1;
    Lane::Step step = lane->on_logits({row, static_cast<size_t>(out_.n_vocab)}, now, proposal);
    if (step.first_token) log_.ttft_ms.push_back(step.ttft_ms);
    if (step.itl_ms >= 0) log_.itl_ms.push_back(step.itl_ms);
    if (step.finish) {
      finished.emplace_back(lane, std::move(step));
      lane_finished = true;
      break;
    }
    if (i == k || lane->ctx().back() != proposal) break;
    ++n_accepted;
  }
  if (k > 0) {
    // Rejected proposals leave the KV (and the recurrent state) before anything can publish it.
    Status st =
        rollback_verify(model_, kv_, threads_, lane->seq(), run.tokens, n_accepted + 1, lane->recurrent_snapshot());
    lane->draft_budget().update(static_cast<int>(k), static_cast<int>(n_accepted), options_.spec_block - 1);
    metrics_.drafted_tokens += k;
    metrics_.accepted_draft_tokens += n_accepted;
    metrics_.decode_tokens += n_accepted;
    ++metrics_.verify_steps;
    auto& by_method = method_metrics(lane->drafter()->method());
    by_method.drafted_tokens += k;
    by_method.accepted_draft_tokens += n_accepted;
    ++by_method.verify_steps;
    if (!st.ok() && !lane_finished) {
      finished.emplace_back(lane, Lane::Step{});
      finished.back().second.finish = FinishReason::kError;
      finished.back().second.error = str_cat("engine_failed: ", st.error_message());
      lane_finished = true;
    }
  }
  // The step's wall time (drafting, forward, verification) against what this lane committed.
  if (drafter_ && run.decode && options_.spec_time_rule)
    lane->draft_budget().observe_step(k > 0, static_cast<int>(n_accepted + 1),
                                      std::chrono::duration<double>(EngineClock::now() - batch.planned_at).count());
  // The drafter sees the committed tokens (and the hidden rows of the fed ones it keeps).
  if (!lane_finished) (void)lane->sync_drafter(out_, r, 0, run.decode ? n_accepted + 1 : n_fed, run.position);
}

void EngineImpl::postprocess(const Batch& batch) {
  count_batch(batch);
  // Finished lanes leave after the loop (the batch points at them).
  std::vector<std::pair<Lane*, Lane::Step>> finished;
  for (size_t r = 0; r < batch.runs.size(); ++r) process_run(batch, r, finished);
  if (metrics_.drafted_tokens > 0) {
    metrics_.draft_acceptance_rate = static_cast<double>(metrics_.accepted_draft_tokens) / metrics_.drafted_tokens;
    metrics_.mean_accepted_length =
        static_cast<double>(metrics_.accepted_draft_tokens + metrics_.verify_steps) / metrics_.verify_steps;
  }
  if (batch.n_decode > 0)
    metrics_.decode_tok_s = metrics_.decode_ms > 0 ? metrics_.decode_tokens * 1000.0 / metrics_.decode_ms : 0;
  for (auto& [lane, step] : finished)
    for (size_t i = 0; i < lanes_.size(); ++i)
      if (lanes_[i].get() == lane) {
        end_lane_at(i, *step.finish, std::move(step.error), batch.forward_end);
        break;
      }
}

void EngineImpl::step(std::vector<uint64_t> cancels) {
  Batch batch = schedule(std::move(cancels));
  if (batch.empty()) return;
  if (run(batch)) postprocess(batch);
}

}  // namespace splash
