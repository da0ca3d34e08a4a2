#include "sampling/sampler.h"

#include <exception>
#include <random>

namespace splash {

Result<Sampler> Sampler::create(const SamplingParams& params) {
  SPLASH_TRY_STATUS(params.validate());
  uint64_t seed = 0;
  if (params.seed) {
    seed = *params.seed;
  } else {
    // std::random_device throws when the OS has no entropy source; that must not escape the module.
    try {
      std::random_device rd;
      seed = (static_cast<uint64_t>(rd()) << 32) ^ static_cast<uint64_t>(rd());
    } catch (const std::exception& e) {
      return make_error("sampling: no seed was given and std::random_device failed (", e.what(),
                        "); pass a seed");
    }
  }
  return Sampler(params, seed);
}

Sampler::Sampler(const SamplingParams& params, uint64_t seed)
    : params_(params), seed_(seed), rng_(seed), history_(params) {}

Result<std::span<const TokenProb>> Sampler::probabilities(std::span<float> logits) {
  history_.apply(logits);
  SPLASH_TRY_STATUS(filter_logits(logits, params_, scratch_, dist_));
  return std::span<const TokenProb>(dist_);
}

Result<int32_t> Sampler::sample(std::span<float> logits) {
  SPLASH_TRY(auto dist, probabilities(logits));
  if (params_.is_greedy()) return dist.front().id;
  return draw_token(dist, rng_);
}

}  // namespace splash
