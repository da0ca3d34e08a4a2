#include "spec/prompt_lookup.h"

#include <algorithm>

namespace splash {

Status PromptLookupDrafter::observe(const DraftObservation& obs) {
  tokens_.insert(tokens_.end(), obs.tokens.begin(), obs.tokens.end());
  return {};
}

void PromptLookupDrafter::rollback(int64_t n_committed) {
  if (n_committed < static_cast<int64_t>(tokens_.size())) tokens_.resize(static_cast<size_t>(std::max<int64_t>(0, n_committed)));
}

Result<std::vector<int32_t>> PromptLookupDrafter::propose(int max_tokens) {
  std::vector<int32_t> out;
  const int64_t n = static_cast<int64_t>(tokens_.size());
  if (max_tokens <= 0) return out;
  // A backwards scan per step: O(n * ngram) with n the context so far, negligible next to a forward
  // pass for the contexts a lane holds (a hash index would pay off only for very long prompts).
  for (int64_t g = std::min<int64_t>(ngram_max_, n - 1); g >= ngram_min_; --g) {
    const int32_t* suffix = tokens_.data() + (n - g);
    // Most recent earlier occurrence: start positions s with s + g < n (something follows it).
    for (int64_t s = n - g - 1; s >= 0; --s) {
      if (!std::equal(suffix, suffix + g, tokens_.data() + s)) continue;
      const int64_t from = s + g;
      const int64_t take = std::min<int64_t>(max_tokens, n - from);
      out.assign(tokens_.begin() + from, tokens_.begin() + from + take);
      return out;
    }
  }
  return out;
}

}  // namespace splash
