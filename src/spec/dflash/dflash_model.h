// The DFlash block drafter (docs/SPECULATIVE.md "DFlash block drafter"): a few Qwen3-style decoder
// layers conditioned on the target's hidden states, proposing block_size - 1 tokens in one pass.
//
//   context c = RMSNorm_hidden(fc(concat of the target's layer outputs at target_layer_ids))
//   block     = [anchor (last committed token), mask x (B-1)], embedded with the target's table,
//               at positions [p, p + B) where p is the anchor's position
//   layer     : h = RMSNorm_in(x); Q = q_norm(Wq h) (block rows only); K = k_norm(Wk [c; h]),
//               V = Wv [c; h] (context rows then block rows, RoPE at their true positions);
//               attention NOT causal (every block row sees every context row and all block rows);
//               x += Wo att; x += down(silu(gate h') * up h'), h' = RMSNorm_post(x)
//   logits    = target_head(RMSNorm_final(x)) of rows 1..B-1
// Context rows' K/V depend only on c (not on any layer's output), so they are computed once when
// the rows arrive (add_context) and kept in a DFlashContext; block rows' K/V are never kept.
//
// Ownership and thread-safety: a DFlashModel is immutable after load() and owns the mapping of its
// safetensors file (weights are zero-copy views for F32/F16/BF16). draft()/add_context() are const
// and may run concurrently on different DFlashContext/DFlashScratch objects. The target's embedding
// table and output matrix are passed in by the caller (the drafter has none of its own).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul.h"
#include "backend/cpu/rope.h"
#include "core/result.h"
#include "core/thread_pool.h"
#include "spec/dflash/dflash_config.h"

namespace splash {

class SafeTensorsModel;

// Most context rows a lane keeps (spec 6: draft context window 2048); a checkpoint's own
// sliding_window, when smaller, wins.
constexpr int64_t kDFlashDefaultContextRows = 2048;
// Largest block_size a checkpoint may declare.
constexpr int kDFlashMaxBlock = 64;

struct DFlashLoadOptions {
  IsaLevel isa = IsaLevel::kAvx512;
  // Positions the RoPE table covers: [0, max_position); must exceed the target's context by the
  // block size. 0 = the checkpoint's max_position_embeddings, or 4096.
  int64_t max_position = 0;
  int64_t max_context_rows = kDFlashDefaultContextRows;
};

// One lane's context rows: the K/V of every draft layer for the target hidden rows seen so far.
struct DFlashContext {
  std::vector<int32_t> pos;            // [n_rows] position of each row, increasing
  std::vector<std::vector<float>> k;   // [n_layer] x [n_rows, n_head_kv, head_dim] (k_norm + RoPE applied)
  std::vector<std::vector<float>> v;   // [n_layer] x [n_rows, n_head_kv, head_dim]
  int64_t n_rows() const { return static_cast<int64_t>(pos.size()); }
  void clear();
  // Drops rows at positions >= p.
  void truncate_from(int64_t p);
};

// Per-call working memory, reused across calls.
struct DFlashScratch {
  std::vector<float> x, h, q, kb, vb, att, out, ff, act, ctx, logits, scores;
};

class DFlashModel {
 public:
  DFlashModel();
  ~DFlashModel();
  DFlashModel(DFlashModel&&) noexcept;
  DFlashModel& operator=(DFlashModel&&) noexcept;

  // `dir` holds config.json and model.safetensors (or an index with shards). Errors name the file,
  // the tensor and what was wrong (missing, wrong shape, unsupported dtype).
  static Result<DFlashModel> load(const std::string& dir, const DFlashLoadOptions& options = {});

  const DFlashConfig& config() const { return config_; }
  const std::string& source() const { return source_; }
  int64_t max_position() const { return max_position_; }
  int64_t max_context_rows() const { return max_context_rows_; }
  uint64_t weight_bytes() const { return weight_bytes_; }

  // Projects `n_rows` target hidden rows ([n_rows, config().context_width()]: the layers of
  // target_layer_ids concatenated per row) at positions [pos0, pos0 + n_rows) into every layer's
  // context K/V and appends them (rows at positions >= pos0 are dropped first). Old rows beyond the
  // context window are trimmed.
  void add_context(DFlashContext& ctx, const float* hidden, int64_t n_rows, int64_t pos0, ThreadPool& pool,
                   DFlashScratch& scratch) const;

  // One drafting pass for the anchor token at position `anchor_pos` (context rows must sit before
  // it). embed: the target's token table [n_vocab, n_embd]; head: its output matrix [n_vocab, n_embd].
  // Writes logits [block_size - 1, n_vocab] into scratch.logits (output_multiplier and softcapping
  // applied) and, when `tokens` is given, their argmax (greedy proposals).
  Status draft(const DFlashContext& ctx, int32_t anchor, int64_t anchor_pos, const PackedWeights& embed,
               const PackedWeights& head, ThreadPool& pool, DFlashScratch& scratch,
               std::vector<int32_t>* tokens = nullptr) const;

 private:
  struct Layer {
    std::vector<float> in_norm, post_norm, q_norm, k_norm;  // [n_embd], [n_embd], [head_dim], [head_dim]
    PackedWeights wq, wk, wv, wo;     // [q_dim, n_embd], [kv_dim, n_embd] x2, [n_embd, q_dim]
    PackedWeights gate, up, down;     // [n_ff, n_embd] x2, [n_embd, n_ff]
  };

  void attention(const DFlashContext& ctx, const int32_t* block_pos, DFlashScratch& s, int il, ThreadPool& pool) const;

  DFlashConfig config_;
  std::string source_;
  int64_t max_position_ = 0;
  int64_t max_context_rows_ = 0;
  uint64_t weight_bytes_ = 0;
  IsaLevel isa_ = IsaLevel::kAvx512;
  std::unique_ptr<SafeTensorsModel> files_;  // the mapping the weights view
  PackedWeights fc_;                         // [n_embd, n_taps * n_embd]
  std::vector<float> hidden_norm_, norm_;    // [n_embd]
  std::vector<Layer> layers_;
  RopeTable rope_;
};

}  // namespace splash
