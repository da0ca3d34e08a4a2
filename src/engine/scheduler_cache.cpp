// The engine's use of the prefix cache: a lane's lookup before its prefill, the lanes waiting behind
// a prompt that is computing their shared prefix, and publication of a lane's pages and checkpoints.
#include <algorithm>

#include "engine/scheduler_impl.h"

namespace splash {

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
    const size_t shared = static_cast<size_t>(
        std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(len), b.begin()).first - a.begin());
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
  // Prefill stops at checkpoint boundaries (schedule() sizes the chunk so); this is one of them when
  // the previous position's plan lands here.
  const int64_t replay = (lane.n_prompt() - 1) / kKvPageTokens * kKvPageTokens;
  const int64_t at = lane.kv_len();
  if (at % kKvPageTokens != 0 || at > replay) return;
  const bool rolling = at != replay;
  if (rolling && cache_->next_checkpoint(lane.resumed_at(), at - 1, lane.n_prompt()) != at) return;
  cache_->publish_checkpoint(lane.ctx(), at, lane.seq().recurrent, lane.cache_chain(), rolling);
  cache_->note_restore_point(lane.cache_chain(), at, EngineClock::now());
}

}  // namespace splash
