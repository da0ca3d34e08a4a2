#include "spec/draft_model.h"

#include <algorithm>

namespace splash {
namespace {

int32_t argmax(const float* row, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;  // lowest id on ties, like the greedy sampler
  return static_cast<int32_t>(best);
}

}  // namespace

Result<std::unique_ptr<DraftModelSource>> DraftModelSource::load(const std::string& path, const Model& target,
                                                                 int lanes, int threads, KvFormat kv_format,
                                                                 int64_t kv_pages) {
  SPLASH_TRY(ModelFiles files, ModelFiles::open(path));
  ModelOptions mo;
  mo.max_context = target.max_context();
  SPLASH_TRY(Model model, Model::load(files, mo));
  if (model.config().n_vocab != target.config().n_vocab)
    return make_error("--draft-model ", path, ": its vocabulary has ", model.config().n_vocab,
                      " tokens, the target's ", target.config().n_vocab,
                      " (a draft model must use the target's tokenizer)");
  if (model.recurrent_state_floats() > 0)
    return make_error("--draft-model ", path, ": hybrid (recurrent-state) draft models are not supported yet");
  if (kv_pages <= 0) {
    const int64_t ctx = std::min(model.max_context(), target.max_context());
    kv_pages = std::max(1, lanes) * ((ctx + kKvPageTokens - 1) / kKvPageTokens + 1);
  }
  SPLASH_TRY(KvPagePool kv, KvPagePool::create(model.kv_cache_config(kv_format, kv_pages)));
  return std::unique_ptr<DraftModelSource>(new DraftModelSource(std::move(files), std::move(model), std::move(kv), threads));
}

DraftModelSource::DraftModelSource(ModelFiles files, Model model, KvPagePool kv, int threads)
    : files_(std::move(files)), model_(std::move(model)), kv_(std::move(kv)), threads_(threads) {}

std::unique_ptr<Drafter> DraftModelSource::make() const { return std::make_unique<DraftModelDrafter>(*this); }

uint64_t DraftModelSource::memory_bytes() const {
  const ModelMemory m = model_.memory();
  return m.weights_owned + m.weights_mapped + m.vectors + static_cast<uint64_t>(kv_.kv_bytes_total());
}

DraftModelDrafter::~DraftModelDrafter() { release_sequence(src_->kv_, seq_); }

Status DraftModelDrafter::observe(const DraftObservation& obs) {
  tokens_.insert(tokens_.end(), obs.tokens.begin(), obs.tokens.end());
  return {};
}

void DraftModelDrafter::rollback(int64_t n_committed) {
  if (n_committed < static_cast<int64_t>(tokens_.size())) tokens_.resize(static_cast<size_t>(std::max<int64_t>(0, n_committed)));
}

Result<std::vector<int32_t>> DraftModelDrafter::propose(int max_tokens) {
  std::vector<int32_t> out;
  const int64_t n = static_cast<int64_t>(tokens_.size());
  const Model& m = src_->model_;
  if (max_tokens <= 0 || n == 0) return out;
  // Keep the KV of the longest prefix shared with the committed tokens; at least the last committed
  // token is fed again so its logits come out.
  const auto mismatch = std::mismatch(kv_tokens_.begin(), kv_tokens_.end(), tokens_.begin(), tokens_.end());
  const int64_t keep = std::min<int64_t>(mismatch.first - kv_tokens_.begin(), n - 1);
  truncate_sequence(src_->kv_, seq_, keep);
  kv_tokens_.resize(static_cast<size_t>(keep));
  // The draft never goes past its own context window: fewer proposals near the end.
  const int64_t room = m.max_context() - n;
  max_tokens = static_cast<int>(std::min<int64_t>(max_tokens, room));
  std::span<const int32_t> feed(tokens_.data() + keep, static_cast<size_t>(n - keep));
  int32_t next = 0;
  for (int i = 0; i < max_tokens; ++i) {
    SequenceRun run{&seq_, feed, LogitRows::kLast};
    auto fwd = m.forward({&run, 1}, src_->kv_, src_->threads_);
    if (!fwd.ok()) {
      // The draft pool is full (or the draft failed): propose what we have; the lane still decodes.
      release_sequence(src_->kv_, seq_);
      kv_tokens_.clear();
      return out;
    }
    kv_tokens_.insert(kv_tokens_.end(), feed.begin(), feed.end());
    next = argmax(fwd->logits_row(0), fwd->n_vocab);
    out.push_back(next);
    feed = std::span<const int32_t>(&out.back(), 1);
  }
  return out;
}

}  // namespace splash
