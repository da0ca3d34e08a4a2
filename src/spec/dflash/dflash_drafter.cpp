#include "spec/dflash/dflash_drafter.h"

#include <algorithm>
#include <filesystem>

#include "formats/quant/quantize.h"
#include "model/model.h"
#include "model/weights.h"

namespace splash {

namespace {

class DFlashDrafter final : public Drafter {
 public:
  DFlashDrafter(std::shared_ptr<const DFlashModel> model, const PackedWeights& embed, const PackedWeights& head,
                ThreadPool& pool)
      : model_(std::move(model)), embed_(embed), head_(head), pool_(pool) {}

  std::string_view method() const override { return "dflash"; }
  std::vector<int> hidden_layers() const override { return model_->config().target_layer_ids; }

  Status observe(const DraftObservation& obs) override {
    tokens_.insert(tokens_.end(), obs.tokens.begin(), obs.tokens.end());
    if (obs.n_hidden_rows <= 0 || obs.hidden == nullptr) return {};
    const int64_t width = model_->config().context_width();
    if (obs.hidden_width != width)
      return make_error(model_->source(), ": hidden rows are ", obs.hidden_width, " wide, the drafter reads ", width,
                        " (layers ", obs.hidden_width / std::max(1, model_->config().n_embd), " x n_embd)");
    if (obs.hidden_position < 0 || obs.hidden_position + obs.n_hidden_rows > static_cast<int64_t>(tokens_.size()))
      return make_error(model_->source(), ": hidden rows for positions [", obs.hidden_position, ", ",
                        obs.hidden_position + obs.n_hidden_rows, ") but only ", tokens_.size(),
                        " tokens were committed");
    if (obs.hidden_position + obs.n_hidden_rows + model_->config().block_size > model_->max_position())
      return {};  // past the drafter's RoPE range: it stops proposing (propose() returns none)
    // Rows wait for the next propose() (or a gap in positions, or kMaxPending rows): while
    // DraftBudget pauses drafting, one add_context over the paused steps' rows replaces a one-row
    // pass per step (stories15M F32 with a drafter that never hits: 0.83-0.87x -> 0.92-0.93x of
    // plain decode; without any context update 0.98x).
    if (pending_rows_ > 0 && (obs.hidden_position != pending_pos_ + pending_rows_ || pending_rows_ >= kMaxPending))
      flush_pending();
    if (pending_rows_ == 0) pending_pos_ = obs.hidden_position;
    pending_.insert(pending_.end(), obs.hidden, obs.hidden + obs.n_hidden_rows * width);
    pending_rows_ += obs.n_hidden_rows;
    return {};
  }

  void rollback(int64_t n_committed) override {
    flush_pending();
    if (n_committed < static_cast<int64_t>(tokens_.size())) tokens_.resize(static_cast<size_t>(n_committed));
    // Rows of tokens that are no longer committed; the last committed token's row goes too, so the
    // anchor never sees itself as context (it is fed again with the next verify).
    ctx_.truncate_from(std::max<int64_t>(0, n_committed - 1));
  }

  Result<std::vector<int32_t>> propose(int max_tokens) override {
    std::vector<int32_t> out;
    flush_pending();
    if (max_tokens <= 0 || tokens_.empty() || ctx_.n_rows() == 0) return out;
    const int64_t anchor_pos = static_cast<int64_t>(tokens_.size()) - 1;
    if (anchor_pos + model_->config().block_size > model_->max_position()) return out;
    // Rows observed for the anchor itself (an engine that fed it already) are not context.
    ctx_.truncate_from(anchor_pos);
    if (ctx_.n_rows() == 0) return out;
    SPLASH_TRY_STATUS(model_->draft(ctx_, tokens_.back(), anchor_pos, embed_, head_, pool_, scratch_, &out));
    if (static_cast<int>(out.size()) > max_tokens) out.resize(static_cast<size_t>(max_tokens));
    return out;
  }

 private:
  static constexpr int64_t kMaxPending = 64;

  void flush_pending() {
    if (pending_rows_ > 0) model_->add_context(ctx_, pending_.data(), pending_rows_, pending_pos_, pool_, scratch_);
    pending_.clear();
    pending_rows_ = 0;
  }

  std::shared_ptr<const DFlashModel> model_;
  const PackedWeights& embed_;
  const PackedWeights& head_;
  ThreadPool& pool_;
  std::vector<int32_t> tokens_;  // committed tokens
  DFlashContext ctx_;
  DFlashScratch scratch_;
  std::vector<float> pending_;  // observed hidden rows not yet in ctx_ (contiguous positions)
  int64_t pending_pos_ = 0;     // position of pending_'s first row
  int64_t pending_rows_ = 0;
};

class DFlashSource final : public DrafterSource {
 public:
  // Borrowed target tensors and pool (tests, tools).
  DFlashSource(std::shared_ptr<const DFlashModel> model, const PackedWeights& embed, const PackedWeights& head,
               ThreadPool& pool)
      : model_(std::move(model)), embed_(&embed), head_(&head), pool_(&pool) {}
  // The target's tensors (borrowed: the target outlives its drafters), an owned drafting head when
  // `own_head` is not empty (a Q8_0 copy of a float head), and an own pool of `threads`.
  DFlashSource(std::shared_ptr<const DFlashModel> model, const PackedWeights& embed, const PackedWeights& head,
               PackedWeights own_head, int threads)
      : model_(std::move(model)),
        own_head_(std::move(own_head)),
        own_pool_(std::make_unique<ThreadPool>(threads)) {
    embed_ = &embed;
    head_ = own_head_.rows() > 0 ? &own_head_ : &head;
    pool_ = own_pool_.get();
  }

  std::string_view method() const override { return "dflash"; }
  std::unique_ptr<Drafter> make() const override {
    return std::make_unique<DFlashDrafter>(model_, *embed_, *head_, *pool_);
  }
  uint64_t memory_bytes() const override {
    uint64_t own = 0;
    if (own_head_.owns_data()) own += static_cast<uint64_t>(own_head_.packed_bytes());
    return model_->weight_bytes() + own;
  }

 private:
  std::shared_ptr<const DFlashModel> model_;
  PackedWeights own_head_;
  std::unique_ptr<ThreadPool> own_pool_;
  const PackedWeights* embed_ = nullptr;
  const PackedWeights* head_ = nullptr;
  ThreadPool* pool_ = nullptr;
};

// A Q8_0 copy of a float output head for drafting: the pass reads a quarter of the bytes, and a
// proposal that flips its argmax only costs acceptance (verification is exact). Quantized heads
// and widths that are not a multiple of 32 are kept as they are (empty result).
Result<PackedWeights> quantize_head_q8(const PackedWeights& h, IsaLevel isa) {
  if (!is_float_format(h.format()) || h.cols() % 32 != 0) return PackedWeights{};
  const int64_t row_bytes = h.cols() / 32 * 34;
  std::vector<uint8_t> q(static_cast<size_t>(h.rows() * row_bytes));
  std::vector<float> row(static_cast<size_t>(h.cols()));
  for (int64_t r = 0; r < h.rows(); ++r) {
    dequantize_packed_row(h, r, row.data());
    quant::quantize_row(DType::kQ8_0, row.data(), q.data() + r * row_bytes, h.cols());
  }
  SPLASH_TRY(PackedWeights packed, pack_weights(DType::kQ8_0, q.data(), h.rows(), h.cols(), isa, "dflash head (Q8_0)"));
  if (!packed.owns_data()) {
    // Below AVX2 the Q8_0 matrix would view `q`, which dies here: keep the float head instead.
    return PackedWeights{};
  }
  return packed;
}

}  // namespace

Result<std::unique_ptr<DrafterSource>> make_dflash_source(const std::string& dir, const Model& target, int threads,
                                                          const DFlashSourceOptions& options) {
  DFlashLoadOptions lo;
  lo.isa = options.isa;
  lo.max_context_rows = options.max_context_rows;
  lo.max_position = target.max_context() + kDFlashMaxBlock;  // the target's context plus one block past it
  SPLASH_TRY(DFlashModel model, DFlashModel::load(dir, lo));
  const ModelConfig& tc = target.config();
  SPLASH_TRY_STATUS(check_dflash_target(model.config(), tc, dir + "/config.json"));
  // The target's token table and output head as the target holds them: loading them again from its
  // files made a second copy of every repacked table (151,936 x 1,024 BF16: 311 MB).
  const ModelWeights& tw = target.weights();
  PackedWeights head;
  if (options.quantize_head) {
    SPLASH_TRY(PackedWeights q8, quantize_head_q8(tw.output_matrix(), options.isa));
    head = std::move(q8);
  }
  auto shared = std::make_shared<const DFlashModel>(std::move(model));
  return std::unique_ptr<DrafterSource>(std::make_unique<DFlashSource>(std::move(shared), tw.embed,
                                                                       tw.output_matrix(), std::move(head), threads));
}

std::unique_ptr<DrafterSource> make_dflash_source(std::shared_ptr<const DFlashModel> model, const PackedWeights& embed,
                                                  const PackedWeights& head, ThreadPool& pool) {
  return std::make_unique<DFlashSource>(std::move(model), embed, head, pool);
}

std::optional<std::string> find_dflash_drafter(const std::string& model_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p(model_path);
  while (!p.empty() && !p.has_filename()) p = p.parent_path();  // "dir/" -> "dir"
  std::string stem = fs::is_directory(p, ec) ? p.filename().string() : p.stem().string();
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  // "stories15M-Q4_0" -> stories15M-Q4_0-dflash, then stories15M-dflash.
  while (!stem.empty()) {
    const fs::path cand = dir / (stem + "-dflash");
    if (fs::is_regular_file(cand / "config.json", ec)) return cand.string();
    const size_t dash = stem.rfind('-');
    if (dash == std::string::npos || dash == 0) break;
    stem.resize(dash);
  }
  return std::nullopt;
}

}  // namespace splash
