// A drafter that proposes uniformly random tokens (method "random"): the worst case for speculative
// decoding, used to measure what rejected proposals cost (`splash bench --spec random`) and in tests.
// Seeded, so a run repeats.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sampling/rng.h"
#include "spec/drafter.h"

namespace splash {

class RandomDrafter final : public Drafter {
 public:
  RandomDrafter(int32_t n_vocab, uint64_t seed) : n_vocab_(n_vocab), rng_(seed) {}
  std::string_view method() const override { return "random"; }
  Status observe(const DraftObservation&) override { return {}; }
  void rollback(int64_t) override {}
  Result<std::vector<int32_t>> propose(int max_tokens) override {
    std::vector<int32_t> out;
    for (int i = 0; i < max_tokens; ++i) out.push_back(static_cast<int32_t>(rng_.next() % static_cast<uint64_t>(n_vocab_)));
    return out;
  }

 private:
  int32_t n_vocab_;
  Rng rng_;
};

class RandomDrafterSource final : public DrafterSource {
 public:
  RandomDrafterSource(int32_t n_vocab, uint64_t seed) : n_vocab_(n_vocab), seed_(seed) {}
  std::string_view method() const override { return "random"; }
  std::unique_ptr<Drafter> make() const override { return std::make_unique<RandomDrafter>(n_vocab_, seed_); }

 private:
  int32_t n_vocab_;
  uint64_t seed_;
};

}  // namespace splash
