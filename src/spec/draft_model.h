// Draft-model drafter (method "draft", --draft-model PATH): a smaller model with the target's
// tokenizer (or a lower-bit copy of the target) proposes greedily, one forward per proposed token.
// Each lane keeps its own KV sequence in the source's pool; it only holds committed tokens plus the
// drafts of the last round, and is truncated to the part still agreeing with the committed tokens
// before the next round (rejected drafts never stay).
//
// Ownership: DraftModelSource owns the draft model's files, weights, KV pool and thread pool; it must
// outlive its drafters (they release their pages into its pool). Engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cache/kv_pages.h"
#include "core/thread_pool.h"
#include "formats/model_files.h"
#include "model/model.h"
#include "spec/drafter.h"

namespace splash {

class DraftModelSource final : public DrafterSource {
 public:
  // Loads `path` and checks it against the target: the same vocabulary size (the tokenizer must be
  // the same; token ids are compared, not text). kv_pages: the draft pool's size in 32-token pages
  // (0 = enough for `lanes` sequences of the draft's context, capped at the target's max_context).
  static Result<std::unique_ptr<DraftModelSource>> load(const std::string& path, const Model& target, int lanes,
                                                        int threads, KvFormat kv_format = KvFormat::kF32,
                                                        int64_t kv_pages = 0);

  std::string_view method() const override { return "draft"; }
  std::unique_ptr<Drafter> make() const override;
  uint64_t memory_bytes() const override;

  const Model& model() const { return model_; }

 private:
  DraftModelSource(ModelFiles files, Model model, KvPagePool kv, int threads);
  friend class DraftModelDrafter;

  ModelFiles files_;
  Model model_;
  mutable KvPagePool kv_;
  mutable ThreadPool threads_;
};

class DraftModelDrafter final : public Drafter {
 public:
  explicit DraftModelDrafter(const DraftModelSource& source) : src_(&source) {}
  ~DraftModelDrafter() override;

  std::string_view method() const override { return "draft"; }
  Status observe(const DraftObservation& obs) override;
  void rollback(int64_t n_committed) override;
  Result<std::vector<int32_t>> propose(int max_tokens) override;

 private:
  const DraftModelSource* src_;
  std::vector<int32_t> tokens_;     // [n_committed]
  std::vector<int32_t> kv_tokens_;  // the tokens whose KV seq_ holds (committed prefix + last drafts)
  SequenceState seq_;
};

}  // namespace splash
