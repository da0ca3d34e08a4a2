// Prompt lookup drafter (method "lookup"): no weights. It proposes the tokens that followed the most
// recent earlier occurrence of the longest suffix n-gram (n from ngram_max down to ngram_min) of the
// committed tokens (prompt + output so far). Good on prompts that repeat text (code edits, quoting,
// summaries of a given document); it proposes nothing when no n-gram matches, and the lane then
// decodes plainly.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "spec/drafter.h"

namespace splash {

class PromptLookupDrafter final : public Drafter {
 public:
  PromptLookupDrafter(int ngram_min, int ngram_max) : ngram_min_(ngram_min), ngram_max_(ngram_max) {}

  std::string_view method() const override { return "lookup"; }
  Status observe(const DraftObservation& obs) override;
  void rollback(int64_t n_committed) override;
  Result<std::vector<int32_t>> propose(int max_tokens) override;

  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  int ngram_min_, ngram_max_;
  std::vector<int32_t> tokens_;  // [n_committed] every committed token
};

class PromptLookupSource final : public DrafterSource {
 public:
  explicit PromptLookupSource(const SpecOptions& options)
      : ngram_min_(options.lookup_ngram_min), ngram_max_(options.lookup_ngram_max) {}
  std::string_view method() const override { return "lookup"; }
  std::unique_ptr<Drafter> make() const override {
    return std::make_unique<PromptLookupDrafter>(ngram_min_, ngram_max_);
  }

 private:
  int ngram_min_, ngram_max_;
};

}  // namespace splash
