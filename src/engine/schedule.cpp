// EngineImpl::schedule(): the first part of a step. Apply cancels and deadlines, admit queued requests
// into free lanes, make sure the batch's KV pages exist (dropping proposals first, then giving the
// youngest lane's pages back when the pool is dry), and describe ONE forward batch: every decoding
// lane's block (its last token plus its proposals) and at most one prefill chunk of the oldest
// prefilling lane.
#include <algorithm>
#include <optional>

#include "engine/scheduler_impl.h"

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

void EngineImpl::end_capacity_exhausted(const Lane* lane, EngineClock::time_point now) {
  for (size_t i = 0; i < lanes_.size(); ++i)
    if (lanes_[i].get() == lane) {
      end_lane_at(
          i, FinishReason::kError,
          str_cat("capacity_exhausted: the KV pool (", kv_pages_total_, " pages) is full with this request alone"),
          now);
      return;
    }
}

void EngineImpl::apply_cancels(const std::vector<uint64_t>& cancels, EngineClock::time_point now) {
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
}

void EngineImpl::admit(EngineClock::time_point now) {
  while (static_cast<int>(lanes_.size()) < options_.lanes && !queue_.empty()) {
    queue_.front()->set_admitted(now);
    if (drafter_ && !queue_.front()->drafter()) queue_.front()->set_drafter(drafter_->make());
    lanes_.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
}

bool EngineImpl::reserve_decode_pages(std::vector<Lane*>& decoders, int64_t& need, EngineClock::time_point now) {
  // Every decoding lane grows by its block: [last token, proposals...] under speculative decoding,
  // drafted once a step. When the pool cannot give the pages, proposals go first, then the youngest
  // lane holding pages gives its pages back (it recomputes them later).
  const int max_proposals = drafter_ ? options_.spec_block - 1 : 0;
  for (auto& lane : lanes_)
    if (lane->decoding()) lane->plan_block(max_proposals);
  bool proposals_dropped = false;
  for (;;) {
    decoders.clear();
    need = 0;
    for (auto& lane : lanes_)
      if (lane->decoding()) {
        decoders.push_back(lane.get());
        need += pages_needed(*lane, static_cast<int64_t>(lane->block().size()));
      }
    if (need <= reclaim(need)) return true;
    if (!proposals_dropped) {
      for (Lane* d : decoders) d->drop_proposals();
      proposals_dropped = true;
      continue;
    }
    if (!preempt_youngest(decoders.front())) {
      // Only the oldest decoder holds pages and still cannot grow: it cannot fit even alone.
      end_capacity_exhausted(decoders.front(), now);
      return false;
    }
  }
}

std::optional<int64_t> EngineImpl::prefill_chunk(Lane& prefill, int64_t reserve, bool has_decoders,
                                                 EngineClock::time_point now) {
  // Checkpoint group: the chunk ends where a snapshot of the recurrent state is due.
  int64_t chunk = chunk_;
  if (cache_ && cache_->has_checkpoint_group() && prefill.request().cache_prompt) {
    const int64_t at = cache_->next_checkpoint(prefill.resumed_at(), prefill.kv_len(), prefill.n_prompt());
    if (at > prefill.kv_len()) chunk = std::min(chunk, at - prefill.kv_len());
  }
  // Scoring the prompt keeps every row's logits ([chunk, n_vocab] floats): bound that buffer.
  if (prefill.wants_prompt_rows()) chunk = std::min<int64_t>(chunk, kPromptLogprobChunk);
  for (;;) {
    const int64_t want = std::min(chunk, prefill.to_feed());
    int64_t spare_pages = std::max<int64_t>(0, reclaim(reserve + pages_needed(prefill, want)) - reserve);
    const KvPageTable& t = prefill.seq().kv;
    int64_t slack = static_cast<int64_t>(t.pages.size()) * kKvPageTokens - t.n_tokens;
    if (slack > 0 && kv_.refcount(t.pages.back()) > 1) {
      // A shared partial last page (after a rollback) is copied before the first write: one page.
      if (spare_pages > 0) --spare_pages;
      else slack = 0;
    }
    const int64_t n_chunk = std::min({want, slack + spare_pages * kKvPageTokens});
    if (n_chunk > 0 || has_decoders) return n_chunk;  // with decoders, the prompt just waits this step
    // Nothing can run: pages are held by lanes that are not running. Take them back, youngest first.
    if (!preempt_youngest(&prefill)) {
      end_capacity_exhausted(&prefill, now);
      return std::nullopt;
    }
  }
}

Batch EngineImpl::schedule(std::vector<uint64_t> cancels) {
  Batch batch;
  const EngineClock::time_point now = EngineClock::now();
  batch.planned_at = now;

  // --- cancels and deadlines: lanes and their pages go before anything else runs; then admission, FIFO
  apply_cancels(cancels, now);
  admit(now);
  waiting_resources_ = 0;
  waiting_prefix_ = 0;
  waiting_disk_ = 0;
  disk_wait_only_ = false;
  if (lanes_.empty()) {
    if (cache_) cache_->release_prefetch();
    return batch;
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

  // --- KV pages for the decode rows (dropping proposals, then preempting, when the pool is short)
  std::vector<Lane*> decoders;
  int64_t decode_need = 0;
  if (!reserve_decode_pages(decoders, decode_need, now)) return batch;

  // --- the prefill chunk: oldest prefilling lane, within the pages left after the decode rows (and one
  // page of headroom per decoder, so a prompt does not take the page a decoder needs next and get
  // preempted for it right away).
  Lane* prefill = nullptr;
  for (auto& lane : lanes_)
    if (lane->prefilling()) {
      prefill = lane.get();
      break;
    }
  // A prefill lane preempted by the decode rows above looks the cache up again next step.
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
    const int64_t reserve = run_decode ? decode_need + static_cast<int64_t>(decoders.size()) : 0;
    const std::optional<int64_t> n = prefill_chunk(*prefill, reserve, !decoders.empty(), now);
    if (!n) return batch;
    n_chunk = *n;
    if (n_chunk == 0) {
      ++waiting_resources_;
      run_prefill = false;
    }
  }
  if (!run_decode && !run_prefill && !decoders.empty()) run_decode = true;  // alternating fallback

  // --- the batch
  if (run_decode)
    for (Lane* d : decoders) {
      const int64_t k = d->n_proposals();
      // Hybrids: the recurrent state cannot be truncated, so a verify pass starts from a snapshot.
      if (k > 0 && model_.recurrent_state_floats() > 0) d->recurrent_snapshot() = d->seq().recurrent;
      batch.runs.push_back({d, d->kv_len(), d->block(), k > 0 ? LogitRows::kAll : LogitRows::kLast, k, true});
    }
  batch.n_decode = batch.runs.size();
  if (run_prefill) {
    const bool ends = n_chunk == prefill->to_feed();
    const LogitRows rows = prefill->wants_prompt_rows() ? LogitRows::kAll : ends ? LogitRows::kLast : LogitRows::kNone;
    batch.runs.push_back({prefill, prefill->kv_len(), prefill->feed(n_chunk), rows, 0, false});
    batch.n_prefill = n_chunk;
    batch.prefill_contended = !decoders.empty();
  }
  if (batch.empty()) disk_wait_only_ = waiting_disk_ > 0;
  return batch;
}

}  // namespace splash
