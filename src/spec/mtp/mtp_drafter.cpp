#include "spec/mtp/mtp_drafter.h"

#include <algorithm>

#include "core/thread_pool.h"
#include "model/model.h"
#include "spec/mtp/mtp_model.h"

namespace splash {

namespace {

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

class MtpDrafter final : public Drafter {
 public:
  MtpDrafter(std::shared_ptr<const MtpModel> model, ThreadPool& pool)
      : model_(std::move(model)), pool_(pool), d_(model_->n_embd()), st_(std::make_unique<MtpState>()) {
    const ModelConfig& c = model_->target().config();
    logits_.resize(c.n_vocab);
  }

  std::string_view method() const override { return "mtp"; }
  std::vector<int> hidden_layers() const override {
    return {static_cast<int>(model_->target().config().n_layer) - 1};
  }

  Status observe(const DraftObservation& obs) override {
    tokens_.insert(tokens_.end(), obs.tokens.begin(), obs.tokens.end());
    if (obs.n_hidden_rows <= 0 || obs.hidden == nullptr) return run_ready();
    if (obs.hidden_width != d_)
      return make_error("mtp: hidden rows are ", obs.hidden_width, " wide, the MTP head reads ", d_,
                        " (the target's last layer)");
    const int64_t p0 = obs.hidden_position, n = obs.n_hidden_rows;
    if (p0 < 0 || p0 + n > n_committed())
      return make_error("mtp: hidden rows for positions [", p0, ", ", p0 + n, ") but only ", n_committed(),
                        " tokens were committed");
    // Rows from an earlier position replace what was there (and the MTP rows built on them).
    drop_rows_from(p0);
    // A gap (positions restored without a forward): zero hidden rows.
    const int64_t gap = p0 - pend_end();
    pend_.resize(pend_.size() + static_cast<size_t>((gap + n) * d_), 0.0f);
    float* dst = pend_.data() + (p0 - pend_pos0_) * d_;
    std::copy_n(obs.hidden, n * d_, dst);
    model_->target_final_norm(dst, n);
    return run_ready();
  }

  void rollback(int64_t n_committed) override {
    if (n_committed < static_cast<int64_t>(tokens_.size())) tokens_.resize(static_cast<size_t>(n_committed));
    // Hidden rows of tokens no longer committed go; so does the last committed token's (it is fed
    // again with the next verify, as after any verify step).
    drop_rows_from(std::max<int64_t>(0, n_committed - 1));
  }

  Result<std::vector<int32_t>> propose(int max_tokens) override {
    std::vector<int32_t> out;
    const int64_t n = n_committed();
    if (max_tokens <= 0 || n < 2) return out;
    const int64_t last_row = n - 2;  // MTP row of (x_{n-2}, x_{n-1}) predicts x_n
    SPLASH_TRY_STATUS(run_ready());
    // Not run: its hidden row has not arrived, or went with a rollback. None this time.
    if (last_out_row_ != last_row) return out;
    const int64_t max_pos = model_->target().max_context();
    matmul(model_->target().weights().output_matrix(), last_out_.data(), logits_.data(), 1, pool_);
    out.push_back(argmax(logits_));
    // Chain: (proposal, own output) at positions n-1, n, ...; those K/V are dropped afterwards.
    std::vector<float> g = last_out_;
    for (int k = 1; k < max_tokens && n - 2 + k < max_pos; ++k) {
      const int32_t tok = out.back();
      const int64_t pos = n - 2 + k;
      SPLASH_TRY_STATUS(model_->step(*st_, &tok, g.data(), 1, pos, pool_, g.data(), logits_.data()));
      out.push_back(argmax(logits_));
    }
    st_->truncate(last_row + 1);
    return out;
  }

 private:
  int64_t n_committed() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t pend_end() const { return pend_pos0_ + static_cast<int64_t>(pend_.size()) / d_; }

  // Runs every MTP row that can run (hidden row i and token i + 1 both known), in passes of at most
  // kChunk rows; only the last row's output is kept (the first proposal reads it). Running them as
  // they arrive keeps at most a few hidden rows waiting (a long prompt's rows are not held).
  static constexpr int64_t kChunk = 256;
  Status run_ready() {
    const int64_t end = std::min(pend_end(), n_committed() - 1);
    while (st_->n_rows() < end) {
      const int64_t first = st_->n_rows();
      const int64_t rows = std::min(end - first, kChunk);
      out_.resize(static_cast<size_t>(rows * d_));
      SPLASH_TRY_STATUS(model_->step(*st_, tokens_.data() + first + 1, pend_.data() + (first - pend_pos0_) * d_, rows,
                                     first, pool_, out_.data(), nullptr));
      last_out_.assign(out_.end() - d_, out_.end());
      last_out_row_ = first + rows - 1;
      forget_before(first + rows);
    }
    return {};
  }

  // Forgets hidden rows at positions >= p and the MTP rows that read them. Invariant: the hidden
  // rows kept are those of the rows not run yet (pend_pos0_ == st_->n_rows()).
  void drop_rows_from(int64_t p) {
    if (p >= pend_end()) return;
    if (p >= pend_pos0_) {
      pend_.resize(static_cast<size_t>((p - pend_pos0_) * d_));
      return;
    }
    pend_.clear();
    st_->truncate(p);
    pend_pos0_ = p;
    if (last_out_row_ >= p) last_out_row_ = -1;
  }

  // Drops hidden rows before position p (their MTP rows are in the cache).
  void forget_before(int64_t p) {
    if (p <= pend_pos0_) return;
    pend_.erase(pend_.begin(), pend_.begin() + (p - pend_pos0_) * d_);
    pend_pos0_ = p;
  }

  std::shared_ptr<const MtpModel> model_;
  ThreadPool& pool_;
  int64_t d_;
  std::unique_ptr<MtpState> st_;
  std::vector<int32_t> tokens_;   // committed tokens
  std::vector<float> pend_;       // hidden rows (final-normed) of positions [pend_pos0_, pend_end())
  int64_t pend_pos0_ = 0;
  std::vector<float> out_, last_out_, logits_;
  int64_t last_out_row_ = -1;  // the cache row whose output last_out_ holds
};

class MtpSource final : public DrafterSource {
 public:
  MtpSource(std::shared_ptr<const MtpModel> model, ThreadPool& pool) : model_(std::move(model)), pool_(&pool) {}
  MtpSource(std::shared_ptr<const MtpModel> model, int threads)
      : model_(std::move(model)), own_pool_(std::make_unique<ThreadPool>(threads)) {
    pool_ = own_pool_.get();
  }
  std::string_view method() const override { return "mtp"; }
  std::unique_ptr<Drafter> make() const override { return std::make_unique<MtpDrafter>(model_, *pool_); }
  uint64_t memory_bytes() const override { return model_->weight_bytes(); }

 private:
  std::shared_ptr<const MtpModel> model_;
  std::unique_ptr<ThreadPool> own_pool_;
  ThreadPool* pool_ = nullptr;
};

}  // namespace

bool has_mtp_head(const ModelFiles& files, const Model& target) {
  const ModelConfig& c = target.config();
  if (c.n_mtp_layers == 0) return false;
  return files.find("mtp.fc.weight") != nullptr || files.find(str_cat("blk.", c.n_layer, ".nextn.eh_proj.weight")) != nullptr;
}

Result<std::unique_ptr<DrafterSource>> make_mtp_source(const ModelFiles& files, const Model& target, int threads) {
  SPLASH_TRY(std::unique_ptr<MtpModel> m, MtpModel::load(files, target, target.options().isa));
  return std::unique_ptr<DrafterSource>(std::make_unique<MtpSource>(std::move(m), threads));
}

Result<std::unique_ptr<DrafterSource>> make_mtp_source(const ModelFiles& files, const Model& target, ThreadPool& pool) {
  SPLASH_TRY(std::unique_ptr<MtpModel> m, MtpModel::load(files, target, target.options().isa));
  return std::unique_ptr<DrafterSource>(std::make_unique<MtpSource>(std::move(m), pool));
}

}  // namespace splash
