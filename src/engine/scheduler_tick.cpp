// One engine tick: apply cancels and deadlines, admit queued requests into free lanes, make sure the
// batch's KV pages exist (giving the youngest lane's pages back when the pool is dry), build ONE
// forward batch (every decoding lane's next token plus at most one prefill chunk of the oldest
// prefilling lane), run it, and hand each lane its logits.
#include <algorithm>

#include "engine/scheduler_impl.h"
#include "spec/spec_sequence.h"

namespace splash {

namespace {
constexpr int64_t kPromptLogprobChunk = 256;  // prefill rows per pass while a prompt is being scored
}  // namespace

int64_t EngineImpl::pages_needed(const Lane& lane, int64_t n_new) const {
  const KvPageTable& t = lane.seq().kv;
  const int64_t have = static_cast<int64_t>(t.pages.size());
  const int64_t want = (lane.kv_len() + n_new + kKvPageTokens - 1) / kKvPageTokens;
  // Appending into a shared, partially filled last page copies it first (one more page).
  const bool cow = n_new > 0 && t.n_tokens % kKvPageTokens != 0 && kv_.refcount(t.pages.back()) > 1;
  return std::max<int64_t>(0, want - have) + (cow ? 1 : 0);
}

int64_t EngineImpl::reclaim(int64_t n) {
  if (cache_ && kv_.kv_pages_free() < n) cache_->evict(n - kv_.kv_pages_free());
  return kv_.kv_pages_free();
}

void EngineImpl::cache_lookup(Lane& lane) {
  // Prompt logprobs need every prompt position's logits, so nothing of the prompt comes from the cache.
  if (!cache_ || lane.wants_prompt_rows()) {
    lane.adopt_prefix({});
    return;
  }
  const auto ctx = lane.ctx();
  const int64_t limit = static_cast<int64_t>(ctx.size()) - 1;
  if (!cache_->prefetch(ctx, limit)) {
    ++waiting_disk_;
    return;
  }
  lane.adopt_prefix(cache_->lookup(ctx, limit, /*read_disk=*/false));
}

int64_t EngineImpl::count_waiting_prefix(const Lane& head) const {
  const auto a = head.ctx();
  int64_t n = 0;
  bool behind = false;
  for (const auto& lane : lanes_) {
    if (lane.get() == &head) {
      behind = true;
      continue;
    }
    if (!behind || !lane->prefilling() || !lane->needs_lookup()) continue;
    const auto b = lane->ctx();
    const size_t len = std::min(a.size(), b.size());
    const size_t shared = static_cast<size_t>(std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(len), b.begin()).first - a.begin());
    const int64_t whole = static_cast<int64_t>(shared) / kKvPageTokens * kKvPageTokens;
    if (whole > 0 && head.kv_len() < whole) ++n;
  }
  return n;
}

void EngineImpl::cache_publish(Lane& lane) {
  if (!cache_ || !lane.request().cache_prompt || lane.kv_len() < kKvPageTokens) return;
  cache_->publish(lane.ctx(), lane.seq().kv, lane.cache_chain());
  // The lane's newest restore point, for write-behind: its published chain; on hybrids only where a
  // checkpoint stands (KV past the last checkpoint cannot be resumed from).
  if (!cache_->has_checkpoint_group()) {
    cache_->note_restore_point(lane.cache_chain(), lane.kv_len() / kKvPageTokens * kKvPageTokens, EngineClock::now());
    return;
  }
  if (lane.seq().recurrent.empty()) return;
  // Prefill stops at checkpoint boundaries (see the chunk size below); this is one of them when the
  // previous position's plan lands here.
  const int64_t replay = (lane.n_prompt() - 1) / kKvPageTokens * kKvPageTokens;
  const int64_t at = lane.kv_len();
  if (at % kKvPageTokens != 0 || at > replay) return;
  const bool rolling = at != replay;
  if (rolling && cache_->next_checkpoint(lane.resumed_at(), at - 1, lane.n_prompt()) != at) return;
  cache_->publish_checkpoint(lane.ctx(), at, lane.seq().recurrent, lane.cache_chain(), rolling);
  cache_->note_restore_point(lane.cache_chain(), at, EngineClock::now());
}

bool EngineImpl::preempt_youngest(const Lane* keep) {
  for (size_t i = lanes_.size(); i-- > 0;) {
    Lane* lane = lanes_[i].get();
    if (lane == keep || lane->seq().kv.pages.empty()) continue;
    // Its pages stay cached (until the pool needs them): the recomputation may find them again.
    cache_publish(*lane);
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
    if (drafter_ && !queue_.front()->drafter()) queue_.front()->set_drafter(drafter_->make());
    lanes_.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  waiting_resources_ = 0;
  waiting_prefix_ = 0;
  waiting_disk_ = 0;
  disk_wait_only_ = false;
  if (lanes_.empty()) {
    if (cache_) cache_->release_prefetch();
    return;
  }

  // --- prefix cache: the lane whose prompt runs next starts from the longest cached prefix (a copied
  // partial page may take a page, so this comes before the decode rows reserve theirs). Lanes behind
  // it that share its prompt's beginning wait for its pages instead of computing them too.
  bool looking_up = false;
  for (auto& lane : lanes_)
    if (lane->prefilling()) {
      if (lane->needs_lookup()) cache_lookup(*lane);
      looking_up = lane->needs_lookup();
      if (cache_) waiting_prefix_ = count_waiting_prefix(*lane);
      break;
    }
  if (cache_ && !looking_up) cache_->release_prefetch();  // nobody waits for what a prefetch read

  // --- KV pages for the decode rows: every decoding lane grows by one position. When the pool cannot
  // give them, the youngest lane holding pages gives its pages back (it recomputes them later).
  // Speculative decoding: a decoding lane's rows are [last token, proposals...] (drafted once a tick);
  // when the pool is short, proposals go before any lane gives its pages back.
  const int max_proposals = drafter_ ? options_.spec_block - 1 : 0;
  for (auto& lane : lanes_)
    if (lane->decoding()) lane->plan_block(max_proposals);
  bool proposals_dropped = false;
  std::vector<Lane*> decoders;
  int64_t decode_need = 0;
  for (;;) {
    decoders.clear();
    decode_need = 0;
    for (auto& lane : lanes_)
      if (lane->decoding()) {
        decoders.push_back(lane.get());
        decode_need += pages_needed(*lane, static_cast<int64_t>(lane->block().size()));
      }
    if (decode_need <= reclaim(decode_need)) break;
    if (!proposals_dropped) {
      for (Lane* d : decoders) d->drop_proposals();
      proposals_dropped = true;
      continue;
    }
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
  // A prefill lane preempted by the decode rows above looks the cache up again next tick.
  bool run_prefill = prefill != nullptr && !prefill->needs_lookup();
  bool run_decode = !decoders.empty();
  if (run_prefill && run_decode) {
    // Contended: decode-only passes pay what the last prefill passes owe (decode_share), then the
    // next chunk runs, with the decode rows (mixed) or alone (alternating).
    if (decode_pass_owed_ || decode_owed_ms_ > 0) {
      run_prefill = false;
      ++sched_.decode_share_batches;
    } else if (!options_.mix_prefill) {
      run_decode = false;
    }
  }
  int64_t n_chunk = 0;
  if (run_prefill) {
    // Checkpoint group: the chunk ends where a snapshot of the recurrent state is due.
    int64_t chunk = chunk_;
    if (cache_ && cache_->has_checkpoint_group() && prefill->request().cache_prompt) {
      const int64_t at = cache_->next_checkpoint(prefill->resumed_at(), prefill->kv_len(), prefill->n_prompt());
      if (at > prefill->kv_len()) chunk = std::min(chunk, at - prefill->kv_len());
    }
    // Scoring the prompt keeps every row's logits ([chunk, n_vocab] floats): bound that buffer.
    if (prefill->wants_prompt_rows()) chunk = std::min<int64_t>(chunk, kPromptLogprobChunk);
    for (;;) {
      const int64_t reserve = run_decode ? decode_need + static_cast<int64_t>(decoders.size()) : 0;
      const int64_t want = std::min(chunk, prefill->to_feed());
      int64_t spare_pages = std::max<int64_t>(0, reclaim(reserve + pages_needed(*prefill, want)) - reserve);
      const KvPageTable& t = prefill->seq().kv;
      int64_t slack = static_cast<int64_t>(t.pages.size()) * kKvPageTokens - t.n_tokens;
      if (slack > 0 && kv_.refcount(t.pages.back()) > 1) {
        // A shared partial last page (after a rollback) is copied before the first write: one page.
        if (spare_pages > 0) --spare_pages;
        else slack = 0;
      }
      n_chunk = std::min({want, slack + spare_pages * kKvPageTokens});
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
      const bool verify = d->n_proposals() > 0;
      if (verify && model_.recurrent_state_floats() > 0) d->recurrent_snapshot() = d->seq().recurrent;
      runs.push_back({&d->seq(), d->block(), verify ? LogitRows::kAll : LogitRows::kLast});
      run_lanes.push_back(d);
    }
  const size_t n_decode = runs.size();
  if (run_prefill) {
    const bool ends = n_chunk == prefill->to_feed();
    const LogitRows rows = prefill->wants_prompt_rows() ? LogitRows::kAll : ends ? LogitRows::kLast : LogitRows::kNone;
    runs.push_back({&prefill->seq(), prefill->feed(n_chunk), rows});
    run_lanes.push_back(prefill);
  }
  if (runs.empty()) {
    disk_wait_only_ = waiting_disk_ > 0;
    return;
  }

  const EngineClock::time_point t0 = EngineClock::now();
  const Status fwd_status = model_.forward_into(runs, kv_, threads_, out_, fwd_);
  now = EngineClock::now();
  if (!fwd_status.ok()) {
    // The model rolled every run back; only this batch's requests fail.
    const std::string message = str_cat("engine_failed: ", fwd_status.error_message());
    for (Lane* lane : run_lanes)
      for (size_t i = 0; i < lanes_.size(); ++i)
        if (lanes_[i].get() == lane) {
          end_lane_at(i, FinishReason::kError, message, now);
          break;
        }
    return;
  }

  const double dt = ms_between(t0, now);
  if (run_prefill && !decoders.empty()) {
    decode_owed_ms_ = std::max(0.0, decode_owed_ms_) + options_.decode_share * dt;
    decode_pass_owed_ = true;
  } else if (n_decode > 0) {
    decode_owed_ms_ = std::max(0.0, decode_owed_ms_ - dt);
    decode_pass_owed_ = false;
  }
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
    const int64_t n_fed = static_cast<int64_t>(runs[r].tokens.size());
    const int64_t fed_at = lane->kv_len() - n_fed;  // position of the run's first token
    bool sample = runs[r].logits != LogitRows::kNone;
    if (r >= n_decode) {
      cache_publish(*lane);  // whole pages as they complete: a request right behind reuses them
      lane->after_prefill_chunk(now);
      if (runs[r].logits == LogitRows::kAll) lane->on_prompt_rows(out_.logits_at(r, 0), out_.n_vocab, fed_at, n_fed);
      sample = lane->to_feed() == 0;  // the prompt's last chunk (kAll rows come with every chunk)
      if (sample && lane->scores_only()) {
        finished.emplace_back(lane, Lane::Step{});
        finished.back().second.finish = FinishReason::kLength;
        continue;
      }
    }
    // Rows in order; a verify run goes on while the committed token is the proposal (spec/verify.h).
    const int64_t k = r < n_decode ? lane->n_proposals() : 0;
    int64_t n_accepted = 0;
    bool lane_finished = false;
    for (int64_t i = 0; i <= k && sample; ++i) {
      float* row = out_.logits.data() + (k > 0 ? out_.logits_offset[r] + i : out_.logits_offset[r + 1] - 1) * out_.n_vocab;
      const int32_t proposal = i < k ? lane->block()[static_cast<size_t>(i + 1)] : -1;
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
      Status st = rollback_verify(model_, kv_, threads_, lane->seq(), lane->block(), n_accepted + 1, lane->recurrent_snapshot());
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
    // The tick's wall time (drafting, forward, verification) against what this lane committed.
    if (drafter_ && r < n_decode)
      lane->draft_budget().observe_step(k > 0, static_cast<int>(n_accepted + 1),
                                        std::chrono::duration<double>(EngineClock::now() - now).count());
    // The drafter sees the committed tokens (and the hidden rows of the fed ones it keeps).
    if (!lane_finished) (void)lane->sync_drafter(out_, r, 0, r < n_decode ? n_accepted + 1 : n_fed, fed_at);
  }
  if (metrics_.drafted_tokens > 0) {
    metrics_.draft_acceptance_rate = static_cast<double>(metrics_.accepted_draft_tokens) / metrics_.drafted_tokens;
    metrics_.mean_accepted_length =
        static_cast<double>(metrics_.accepted_draft_tokens + metrics_.verify_steps) / metrics_.verify_steps;
  }
  if (n_decode > 0)
    metrics_.decode_tok_s = metrics_.decode_ms > 0 ? metrics_.decode_tokens * 1000.0 / metrics_.decode_ms : 0;
  for (auto& [lane, step] : finished)
    for (size_t i = 0; i < lanes_.size(); ++i)
      if (lanes_[i].get() == lane) {
        end_lane_at(i, *step.finish, std::move(step.error), now);
        break;
      }
}

}  // namespace splash
