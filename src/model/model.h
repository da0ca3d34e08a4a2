// The model runtime: a decoder-only transformer (llama / qwen2 / qwen3, see arch/ and registry.h)
// loaded from ModelFiles, and a forward pass over a batch of sequences.
//
//   ModelFiles files = ...;                     // must outlive the Model (weights view its mapping)
//   Model model = *Model::load(files, {});
//   KvPagePool kv = *KvPagePool::create(model.kv_cache_config(KvFormat::kF32, n_pages));
//   SequenceState a, b;                          // per sequence, owned by the caller
//   SequenceRun runs[] = {{&a, prompt_a}, {&b, {&next_b, 1}}};   // a prefill and a decode step
//   ForwardOutput out = *model.forward(runs, kv, threads);
//   out.logits_row(0)  -> [n_vocab] of a's last token; out.logits_row(1) -> b's
//   release_sequence(kv, a);                    // before dropping a state
//
// One pass: every sequence contributes a run of new tokens at its own position (its KV length); the
// matmuls run once over the concatenated rows, attention runs per sequence over its KV pages. Long
// runs are processed in chunks of at most `chunk_tokens` tokens per sequence and pass (results do not
// depend on the chunk size beyond rounding).
//
// Ownership and thread-safety: a Model is immutable after load() (STYLE rule 1); forward() is const
// and may run concurrently from several threads as long as each call uses its own sequences, its
// own KvPagePool (or serializes access to a shared one) and each ThreadPool serializes its jobs.
// The weights view the ModelFiles mapping (zero-copy where the kernels take the file's layout), so
// the ModelFiles must outlive the Model. Per-sequence state lives in SequenceState, owned by the
// caller; its pages belong to the KvPagePool it was filled from and must be released there.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/cpu/cpu_features.h"
#include "cache/kv_pages.h"
#include "core/result.h"
#include "core/thread_pool.h"
#include "formats/model_config.h"
#include "formats/model_files.h"
#include "model/forward_profile.h"

namespace splash {

struct ModelWeights;
struct Architecture;

struct ModelOptions {
  IsaLevel isa = IsaLevel::kAvx512;  // clamped to the CPU; lower it to force a kernel tier
  // Positions the RoPE tables cover, i.e. the longest sequence forward() accepts; 0 = the model's
  // own context window (config.max_position), or 4096 when the file does not say.
  int64_t max_context = 0;
  // Fuse q/k/v into one matrix and gate/up into one at load (a copy of those weights, one matmul
  // instead of three / two per layer). Falls back to separate matrices when the parts' storage
  // types differ.
  bool fuse_projections = true;
  // Default prefill chunk: the most new tokens one pass takes from one sequence.
  int64_t chunk_tokens = 256;
};

// What a sequence carries between forward calls: its KV pages (positions [0, n_tokens)) and, for
// hybrid models, the state of its recurrent layers. Plain data, owned by the caller (engine lane,
// speculative branch, test).
struct SequenceState {
  KvPageTable kv;
  // Recurrent layers' state after the first n_tokens() tokens (conv windows and delta-rule
  // matrices, fp32, layout owned by the architecture); empty for attention-only models
  // (Model::recurrent_state_floats() == 0). This is the prefix cache's checkpoint group (spec 5.1):
  // it cannot be truncated, so a checkpoint is a copy of this vector taken at a token boundary, and
  // resuming from it = truncate the KV to that length and assign the copy back.
  std::vector<float> recurrent;
  int64_t n_tokens() const { return kv.n_tokens; }
};

// Drops positions >= n_tokens (speculative rollback): the next forward continues at n_tokens.
// Only the KV: with recurrent state, the caller must also put back a snapshot taken at n_tokens
// (or replay tokens from an earlier one).
inline void truncate_sequence(KvPagePool& pool, SequenceState& seq, int64_t n_tokens) {
  pool.truncate(seq.kv, n_tokens);
}
inline void release_sequence(KvPagePool& pool, SequenceState& seq) {
  pool.release(seq.kv);
  seq.recurrent.clear();
}

enum class LogitRows : uint8_t {
  kLast,  // logits of the run's last token (decode, end of prefill)
  kAll,   // logits of every token of the run (verifying several proposed tokens in one pass)
  kNone,  // none (a prefill chunk that is not the last)
};

// One sequence's share of a batch: new tokens appended at position seq->n_tokens().
struct SequenceRun {
  SequenceState* seq = nullptr;
  std::span<const int32_t> tokens;  // [n_new], n_new >= 1
  LogitRows logits = LogitRows::kLast;
};

struct ForwardOptions {
  // Layers whose output (the residual stream after layer il, il in [0, n_layer)) is returned for
  // every token of the batch.
  std::vector<int> hidden_layers;
  int64_t chunk_tokens = 0;  // 0 = ModelOptions::chunk_tokens
  // Per-op timing (forward_profile.h), accumulated across calls; nullptr = off (no clock reads).
  ForwardProfile* profile = nullptr;
};

struct ForwardScratch;  // forward()'s buffers (model/forward.cpp)

struct ForwardOutput {
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  std::vector<float> logits;           // [n_logit_rows, n_vocab]: runs in batch order, tokens in order
  std::vector<int64_t> logits_offset;  // [n_runs + 1]: run i owns rows [offset[i], offset[i + 1])
  std::vector<int64_t> token_offset;   // [n_runs + 1]: run i's tokens are rows [offset[i], offset[i + 1]) of hidden
  std::vector<float> hidden;           // [hidden_layers.size(), n_tokens_total, n_embd]

  // Logits of run i's last requested row (kLast: its only row).
  const float* logits_row(size_t run) const { return logits.data() + (logits_offset[run + 1] - 1) * n_vocab; }
  // Logits of run i, token t (kAll).
  const float* logits_at(size_t run, int64_t t) const { return logits.data() + (logits_offset[run] + t) * n_vocab; }

  // forward_into's scratch (activations, per-layer workspace), kept with the output so that a caller
  // reusing one ForwardOutput per step allocates nothing per step. Copies share it.
  std::shared_ptr<ForwardScratch> scratch;
};

// What a loaded model holds, in bytes (memory accounting: splash bench, the resident-memory test).
struct ModelMemory {
  uint64_t weights_owned = 0;   // matrices repacked or stacked into the heap (x8, MLX, fused projections)
  uint64_t weights_mapped = 0;  // matrices read in place from the file mapping (resident once touched)
  uint64_t vectors = 0;         // f32 norm weights and biases
  uint64_t rope = 0;            // RoPE rows filled so far (RopeTable::resident_bytes)
  // Weight bytes one decode step reads: every matrix (MoE routers included), but of the routed
  // experts only n_expert_used / n_expert, and the embedding table only when it is also the output
  // head (otherwise a lookup reads one row).
  uint64_t decode_read = 0;
  // Recurrent-state bytes one decode step moves per sequence: the hybrid layers' fp32 conv windows
  // and delta-rule matrices, read and written once each.
  uint64_t decode_state = 0;
};

class Model {
 public:
  Model();
  ~Model();
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Builds the weights of config().architecture from the files. Errors name the file, tensor and
  // field (missing tensor, wrong shape, unsupported storage type, unknown architecture ...).
  static Result<Model> load(const ModelFiles& files, const ModelOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const ModelOptions& options() const { return options_; }
  int64_t max_context() const { return max_context_; }
  const std::string& describe_weights() const { return weights_summary_; }  // e.g. "Q8_0, fused qkv"
  // Bytes held by the weights, by kind. Attention and dense MLP weights only: MoE experts and
  // linear-attention (Gated DeltaNet) weights are not counted yet.
  ModelMemory memory() const;

  // The KV pool shape this model needs; the caller picks format and size (memory plan).
  KvCacheConfig kv_cache_config(KvFormat format, int64_t n_pages) const;

  // Size of SequenceState::recurrent for one sequence (hybrid models); 0 = attention-only, no
  // checkpoint group (spec 5.1). forward() sizes an empty `recurrent` (a new sequence: zeros) and
  // refuses one of another size. The KV pool (kv_cache_config) then has layers for the
  // full-attention layers only.
  int64_t recurrent_state_floats() const { return recurrent_state_floats_; }

  // The loaded weights (model/weights.h): token table, folded final norm, output head, RoPE table.
  // Drafters that share the target's embedding and head (MTP) read them here.
  const ModelWeights& weights() const { return *weights_; }

  // Runs the batch: reserves KV positions for every run's tokens in `kv`, stores their K/V, and
  // returns the requested logits and hidden states. Errors (nothing changed): a token id outside
  // the vocabulary, an empty run, the same sequence twice, a position past max_context(), a pool
  // whose shape differs from kv_cache_config(), or the pool running out of pages (every run is
  // then truncated back to its length before the call).
  Result<ForwardOutput> forward(std::span<const SequenceRun> batch, KvPagePool& kv, ThreadPool& threads,
                                const ForwardOptions& options = {}) const;
  // The same into `out`, whose buffers (and scratch) are reused: a decode loop that keeps one
  // ForwardOutput allocates nothing per step. Fresh buffers per call cost page faults on every step
  // once logits reach malloc's mmap threshold (8 verify rows of stories15M: 1 MB, ~half a step's
  // time; one row of a 151,936-token vocabulary: 600 KB). After an error `out` holds nothing useful.
  Status forward_into(std::span<const SequenceRun> batch, KvPagePool& kv, ThreadPool& threads, ForwardOutput& out,
                      const ForwardOptions& options = {}) const;

 private:
  ModelConfig config_;
  ModelOptions options_;
  int64_t max_context_ = 0;
  int64_t recurrent_state_floats_ = 0;
  // Hybrid models: only full-attention layers have KV (kv_layer_[il] = their index in the pool,
  // -1 for linear-attention layers); recurrent_offset_[il] = a linear layer's state in
  // SequenceState::recurrent. Attention-only models: kv_layer_[il] = il.
  std::vector<int> kv_layer_;
  std::vector<int64_t> recurrent_offset_;
  int n_kv_layers_ = 0;
  const Architecture* arch_ = nullptr;
  std::unique_ptr<ModelWeights> weights_;
  std::string weights_summary_;
};

}  // namespace splash
