#include "spec/verify.h"

#include <algorithm>
#include <vector>

namespace splash {

int32_t verify_distribution(Sampler& sampler, std::span<const TokenProb> dist, int32_t proposal) {
  if (proposal < 0) return sampler.draw(dist);
  auto it = std::lower_bound(dist.begin(), dist.end(), proposal,
                             [](const TokenProb& a, int32_t id) { return a.id < id; });
  const double p = it != dist.end() && it->id == proposal ? static_cast<double>(it->p) : 0.0;
  if (p > 0.0 && sampler.uniform() < p) return proposal;
  if (p == 0.0) return sampler.draw(dist);  // nothing to remove: p itself
  // Residual: p with the proposal removed; draw_token renormalizes by the remaining total. A
  // proposal holding all the mass is always accepted above (uniform() < 1), so this is non-empty.
  thread_local std::vector<TokenProb> residual;
  residual.assign(dist.begin(), dist.end());
  residual.erase(residual.begin() + (it - dist.begin()));
  return sampler.draw(residual);
}

Result<int32_t> verify_row(Sampler& sampler, std::span<float> logits, int32_t proposal) {
  // Greedy: the argmax of the processed row (lowest id on ties), exactly what plain decoding commits.
  if (sampler.params().is_greedy()) return sampler.sample(logits);
  SPLASH_TRY(auto dist, sampler.probabilities(logits));
  return verify_distribution(sampler, dist, proposal);
}

}  // namespace splash
