// Drafters for speculative-decoding tests: an oracle that proposes a known continuation (optionally
// corrupting every `wrong_every`-th proposal) and a seeded random drafter that proposes garbage.
#pragma once

#include <memory>
#include <random>
#include <vector>

#include "spec/drafter.h"
#include "test_gate.h"

namespace splash::spec_test {

class OracleDrafter final : public Drafter {
 public:
  OracleDrafter(std::vector<int32_t> full, int wrong_every, int32_t n_vocab)
      : full_(std::move(full)), wrong_every_(wrong_every), n_vocab_(n_vocab) {}
  std::string_view method() const override { return "oracle"; }
  Status observe(const DraftObservation& obs) override {
    n_ += static_cast<int64_t>(obs.tokens.size());
    return {};
  }
  void rollback(int64_t n) override { n_ = std::min(n_, n); }
  Result<std::vector<int32_t>> propose(int max_tokens) override {
    std::vector<int32_t> out;
    for (int64_t i = n_; i < static_cast<int64_t>(full_.size()) && static_cast<int>(out.size()) < max_tokens; ++i) {
      int32_t t = full_[static_cast<size_t>(i)];
      if (wrong_every_ > 0 && (++count_ % wrong_every_) == 0) t = (t + 1) % n_vocab_;
      out.push_back(t);
    }
    return out;
  }

 private:
  std::vector<int32_t> full_;  // prompt + the expected output
  int wrong_every_;
  int32_t n_vocab_;
  int64_t n_ = 0;
  int64_t count_ = 0;
};

class RandomDrafter final : public Drafter {
 public:
  RandomDrafter(int32_t n_vocab, uint64_t seed) : n_vocab_(n_vocab), rng_(seed) {}
  std::string_view method() const override { return "random"; }
  Status observe(const DraftObservation&) override { return {}; }
  void rollback(int64_t) override {}
  Result<std::vector<int32_t>> propose(int max_tokens) override {
    std::vector<int32_t> out;
    std::uniform_int_distribution<int32_t> u(0, n_vocab_ - 1);
    for (int i = 0; i < max_tokens; ++i) out.push_back(u(rng_));
    return out;
  }

 private:
  int32_t n_vocab_;
  std::mt19937_64 rng_;
};

// A source for either drafter (a new drafter per lane / generate call).
class TestSource final : public DrafterSource {
 public:
  enum Kind { kOracle, kRandom };
  TestSource(Kind kind, std::vector<int32_t> full, int wrong_every, int32_t n_vocab)
      : kind_(kind), full_(std::move(full)), wrong_every_(wrong_every), n_vocab_(n_vocab) {}
  std::string_view method() const override { return kind_ == kOracle ? "oracle" : "random"; }
  // Closed: make() (a lane's admission on the engine thread) waits until it opens (test_gate.h).
  // Close it after the engine is created (its constructor makes a drafter too).
  engine_test::TestGate& admission_gate() const { return gate_; }
  std::unique_ptr<Drafter> make() const override {
    gate_.pass();
    if (kind_ == kOracle) return std::make_unique<OracleDrafter>(full_, wrong_every_, n_vocab_);
    return std::make_unique<RandomDrafter>(n_vocab_, 42);
  }

 private:
  Kind kind_;
  std::vector<int32_t> full_;
  int wrong_every_;
  int32_t n_vocab_;
  mutable engine_test::TestGate gate_;
};

}  // namespace splash::spec_test
