// The multi-token-prediction (MTP) head of Qwen3-Next / Qwen3.5 checkpoints (docs/SPECULATIVE.md
// "MTP head"), used as a drafter. Tensors (safetensors): mtp.fc [n_embd, 2 n_embd],
// mtp.pre_fc_norm_embedding, mtp.pre_fc_norm_hidden, mtp.norm (zero-centred RMSNorms, 1 + w) and
// mtp.layers.0.* (one gated full-attention decoder layer named as the target's layers; its MLP is
// a dense SwiGLU, or, when the model has experts (Qwen3-Next, Qwen3.5-MoE), the same sparse MoE
// block as the target's layers: router mlp.gate, experts, shared expert + shared_expert_gate).
// GGUF (llama.cpp's layout): one more block after the model's layers,
// blk.<n_layer>.nextn.{eh_proj, enorm, hnorm, shared_head_norm} and that block's layer tensors
// (MoE: ffn_gate_inp, ffn_{gate,up,down}_exps, ffn_*_shexp, ffn_gate_inp_shexp).
// It has no embedding or head of its own: it uses the target's.
//
// One row i (position i, the target's position of token x_i):
//   e = norm_e(embed(x_{i+1}))          the token that follows x_i
//   h = norm_h(g_i)                     g_i: the target's final hidden state of x_i (after the
//                                       target's final norm), or the MTP's own output when chained
//   x = fc([e | h]); x = layer(x)       attention over the MTP's own K/V of rows 0..i (RoPE at i),
//                                       then the dense or MoE MLP
//   g' = norm(x); logits = target_head(g')  -> x_{i+2}
// Chaining feeds (argmax token, g') as the next row at position i + 1.
//
// Ownership and thread-safety: an MtpModel is immutable after load() and borrows the target Model
// (its token table, head and RoPE table) and the ModelFiles the weights view: both must outlive it.
// step() is const and may run concurrently on different MtpState objects.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "cache/kv_pages.h"
#include "core/result.h"
#include "core/thread_pool.h"
#include "model/layer_context.h"
#include "model/weights.h"

namespace splash {

class Model;

// One lane's MTP attention cache: K/V of rows [0, n_rows()) in a one-layer page pool that grows
// (doubling, pages copied) as rows are added, and the scratch of a step.
struct MtpState {
  KvPagePool pool;
  KvPageTable table;
  Workspace ws;
  std::vector<float> in, x;  // [n, 2 d] fc input, [n, d] residual stream
  std::vector<int32_t> pos;
  MtpState() = default;
  MtpState(const MtpState&) = delete;
  MtpState& operator=(const MtpState&) = delete;
  ~MtpState() { pool.release(table); }
  int64_t n_rows() const { return table.n_tokens; }
  // Drops rows at positions >= n.
  void truncate(int64_t n) {
    if (n < table.n_tokens) pool.truncate(table, n);
  }
};

class MtpModel {
 public:
  // The MTP head of `target`, loaded from the files it was loaded from. Errors: an architecture
  // without MTP support, config n_mtp_layers == 0, a missing or misshaped mtp.* tensor (named).
  static Result<std::unique_ptr<MtpModel>> load(const ModelFiles& files, const Model& target,
                                                IsaLevel isa = IsaLevel::kAvx512);

  const Model& target() const { return *target_; }
  int64_t n_embd() const;
  // Bytes of the head's own matrices: all it holds (memory plan, /status), and what one step reads
  // (a MoE layer: the router, n_expert_used experts and the shared expert; equal for a dense one).
  uint64_t weight_bytes() const { return weight_bytes_; }
  uint64_t step_bytes() const { return step_bytes_; }

  // Applies the target's final norm to `n` rows of the target's last-layer output in place (what
  // the hidden rows of DraftObservation hold for hidden_layers() = {n_layer - 1}).
  void target_final_norm(float* rows, int64_t n) const;

  // Runs rows i = 0..n-1 at positions pos0 + i (pos0 must equal st.n_rows(): the rows append to the
  // cache): token tokens[i], hidden hidden[i] ([n, n_embd]). Writes the normed outputs g' to out
  // ([n, n_embd]) and, when logits != nullptr, the logits of the last row ([n_vocab]).
  Status step(MtpState& st, const int32_t* tokens, const float* hidden, int64_t n, int64_t pos0, ThreadPool& pool,
              float* out, float* logits) const;

 private:
  MtpModel() = default;

  const Model* target_ = nullptr;
  IsaLevel isa_ = IsaLevel::kAvx512;
  PackedWeights fc_;                                      // [n_embd, 2 n_embd]
  std::vector<float> norm_embed_, norm_hidden_, norm_;    // folded (1 + w)
  LayerWeights layer_;                                    // attn + dense mlp or moe
  uint64_t weight_bytes_ = 0, step_bytes_ = 0;
};

}  // namespace splash
