// Rng: the sampler's random generator, fixed so that a seed gives the same tokens on every machine
// and every standard library (std::uniform_real_distribution's output is implementation-defined).
//
// Algorithm: xoshiro256** 1.0 (Blackman & Vigna, https://prng.di.unimi.it/), state seeded from the
// 64-bit seed by four successive outputs of SplitMix64 (the seeding the authors recommend).
// uniform() = (next() >> 11) * 2^-53: the top 53 bits as a double in [0, 1).
// Copyable on purpose: a copy is a checkpoint of the stream (speculative decoding replays from one).
#pragma once

#include <array>
#include <cstdint>

namespace splash {

class Rng {
 public:
  explicit Rng(uint64_t seed);

  uint64_t next();
  // Uniform double in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  std::array<uint64_t, 4> s_;
};

// SplitMix64 step (Steele, Lea, Flood 2014): advances `state` and returns the mixed output.
uint64_t splitmix64_next(uint64_t& state);

}  // namespace splash
