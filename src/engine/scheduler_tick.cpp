// One engine tick: apply cancels and deadlines, admit queued requests into free lanes, make sure the
// batch's KV pages exist (giving the youngest lane's pages back when the pool is dry), build ONE
// forward batch (every decoding lane's next token plus at most one prefill chunk of the oldest
// prefilling lane), run it, and hand each lane its logits.
#include <algorithm>

#include "engine/scheduler_impl.h"

namespace splash {

int64_t EngineImpl::pages_needed(const Lane& lane, int64_t n_new) const {
  const int64_t have = static_cast<int64_t>(lane.seq().kv.pages.size());
  const int64_t want = (lane.kv_len() + n_new + kKvPageTokens - 1) / kKvPageTokens;
  return std::max<int64_t>(0, want - have);
}

bool EngineImpl::preempt_youngest(const Lane* keep) {
  for (size_t i = lanes_.size(); i-- > 0;) {
    Lane* lane = lanes_[i].get();
    if (lane == keep || lane->seq().kv.pages.empty()) continue;
    lane->preempt(kv_);
    ++sched_.preemptions;
    return true;
  }
  return false;
}

void EngineImpl::tick(std::vector<uint64_t> cancels) {
  EngineClock::time_point now = EngineClock::now();

  // --- cancels and deadlines: lanes and their pages go before anything else runs
  for (uint64_t id : cancels) {
    for (size_t i = 0; i < lanes_.size(); ++i)
      if (lanes_[i]->id() == id) {
        end_lane_at(i, FinishReason::kCancelled, "", now);
        break;
      }
    for (auto it = queue_.begin(); it != queue_.end(); ++it)
      if ((*it)->id() == id) {
        std::unique_ptr<Lane> lane = std::move(*it);
        queue_.erase(it);
        end_lane(std::move(lane), FinishReason::kCancelled, "", now);
        break;
      }
  }
  for (size_t i = lanes_.size(); i-- > 0;)
    if (lanes_[i]->past_deadline(now)) end_lane_at(i, FinishReason::kTimeout, "", now);
  for (auto it = queue_.begin(); it != queue_.end();) {
    if ((*it)->past_deadline(now)) {
      std::unique_ptr<Lane> lane = std::move(*it);
      it = queue_.erase(it);
      end_lane(std::move(lane), FinishReason::kTimeout, "", now);
    } else {
      ++it;
    }
  }

  // --- admission, FIFO
  while (static_cast<int>(lanes_.size()) < options_.lanes && !queue_.empty()) {
    queue_.front()->set_admitted(now);
    lanes_.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  waiting_resources_ = 0;
  if (lanes_.empty()) return;

  // --- KV pages for the decode rows: every decoding lane grows by one position. When the pool cannot
  // give them, the youngest lane holding pages gives its pages back (it recomputes them later).
  std::vector<Lane*> decoders;
  int64_t decode_need = 0;
  for (;;) {
    decoders.clear();
    decode_need = 0;
    for (auto& lane : lanes_)
      if (lane->decoding()) {
        decoders.push_back(lane.get());
        decode_need += pages_needed(*lane, 1);
      }
    if (decode_need <= kv_.kv_pages_free()) break;
    if (!preempt_youngest(decoders.front())) {
      // Only the oldest decoder holds pages and still cannot grow: it cannot fit even alone.
      for (size_t i = 0; i < lanes_.size(); ++i)
        if (lanes_[i].get() == decoders.front()) {
          end_lane_at(i, FinishReason::kError,
                      str_cat("capacity_exhausted: the KV pool (", kv_pages_total_, " pages) is full with this request alone"),
                      now);
          break;
        }
      return;
    }
  }

  // --- the prefill chunk: oldest prefilling lane, within the pages left after the decode rows (and one
  // page of headroom per decoder, so a prompt does not take the page a decoder needs next and get
  // preempted for it right away).
  Lane* prefill = nullptr;
  for (auto& lane : lanes_)
    if (lane->prefilling()) {
      prefill = lane.get();
      break;
    }
  bool run_prefill = prefill != nullptr;
  bool run_decode = !decoders.empty();
  if (!options_.mix_prefill && run_prefill && run_decode) {
    // Alternating mode: decode-only and prefill-only passes take turns.
    run_prefill = last_tick_decode_only_;
    run_decode = !run_prefill;
  }
  int64_t n_chunk = 0;
  if (run_prefill) {
    for (;;) {
      const int64_t reserve = run_decode ? decode_need + static_cast<int64_t>(decoders.size()) : 0;
      const int64_t spare_pages = std::max<int64_t>(0, kv_.kv_pages_free() - reserve);
      const int64_t slack = static_cast<int64_t>(prefill->seq().kv.pages.size()) * kKvPageTokens - prefill->kv_len();
      n_chunk = std::min({chunk_, prefill->to_feed(), slack + spare_pages * kKvPageTokens});
      if (n_chunk > 0 || !decoders.empty()) break;  // with decoders, the prompt just waits this tick
      // Nothing can run: pages are held by lanes that are not running. Take them back, youngest first.
      if (!preempt_youngest(prefill)) {
        for (size_t i = 0; i < lanes_.size(); ++i)
          if (lanes_[i].get() == prefill) {
            end_lane_at(i, FinishReason::kError,
                        str_cat("capacity_exhausted: the KV pool (", kv_pages_total_, " pages) is full with this request alone"),
                        now);
            break;
          }
        return;
      }
    }
    if (n_chunk == 0) {
      ++waiting_resources_;
      run_prefill = false;
    }
  }
  if (!run_decode && !run_prefill && !decoders.empty()) run_decode = true;  // alternating fallback

  // --- the batch
  std::vector<SequenceRun> runs;
  std::vector<Lane*> run_lanes;
  if (run_decode)
    for (Lane* d : decoders) {
      runs.push_back({&d->seq(), d->feed(1), LogitRows::kLast});
      run_lanes.push_back(d);
    }
  const size_t n_decode = runs.size();
  if (run_prefill) {
    const bool ends = n_chunk == prefill->to_feed();
    runs.push_back({&prefill->seq(), prefill->feed(n_chunk), ends ? LogitRows::kLast : LogitRows::kNone});
    run_lanes.push_back(prefill);
  }
  if (runs.empty()) return;
  last_tick_decode_only_ = n_decode > 0 && !run_prefill;

  const EngineClock::time_point t0 = EngineClock::now();
  auto out = model_.forward(runs, kv_, threads_, fwd_);
  now = EngineClock::now();
  if (!out.ok()) {
    // The model rolled every run back; only this batch's requests fail.
    const std::string message = str_cat("engine_failed: ", out.error_message());
    for (Lane* lane : run_lanes)
      for (size_t i = 0; i < lanes_.size(); ++i)
        if (lanes_[i].get() == lane) {
          end_lane_at(i, FinishReason::kError, message, now);
          break;
        }
    return;
  }

  const double dt = ms_between(t0, now);
  if (n_decode > 0) {
    ++sched_.decode_batches;
    ++sched_.decode_batches_by_width[std::min(n_decode, sched_.decode_batches_by_width.size()) - 1];
    metrics_.decode_tokens += static_cast<int64_t>(n_decode);
    metrics_.decode_ms += dt;
    metrics_.decode_tok_s = metrics_.decode_ms > 0 ? metrics_.decode_tokens * 1000.0 / metrics_.decode_ms : 0;
  }
  if (run_prefill) {
    ++sched_.prefill_batches;
    sched_.prefill_rows += n_chunk;
    metrics_.prefill_tokens += n_chunk;
    metrics_.prefill_ms += dt;
    metrics_.prefill_tok_s = metrics_.prefill_ms > 0 ? metrics_.prefill_tokens * 1000.0 / metrics_.prefill_ms : 0;
  }

  // --- results, in batch order; finished lanes leave after the loop (the batch points at them)
  std::vector<std::pair<Lane*, Lane::Step>> finished;
  for (size_t r = 0; r < runs.size(); ++r) {
    Lane* lane = run_lanes[r];
    if (r >= n_decode) lane->after_prefill_chunk(now);
    if (runs[r].logits != LogitRows::kLast) continue;
    float* row = out->logits.data() + (out->logits_offset[r + 1] - 1) * out->n_vocab;
    Lane::Step step = lane->on_logits({row, static_cast<size_t>(out->n_vocab)}, now);
    if (step.first_token) log_.ttft_ms.push_back(step.ttft_ms);
    if (step.itl_ms >= 0) log_.itl_ms.push_back(step.itl_ms);
    if (step.finish) finished.emplace_back(lane, std::move(step));
  }
  for (auto& [lane, step] : finished)
    for (size_t i = 0; i < lanes_.size(); ++i)
      if (lanes_[i].get() == lane) {
        end_lane_at(i, *step.finish, std::move(step.error), now);
        break;
      }
}

}  // namespace splash
