// What one layer's forward sees during a batch pass: the residual stream of every row, where each
// sequence's rows sit and at which positions, the KV pool, scratch buffers and the thread pool.
// Built by Model::forward for each pass; blocks (blocks/) read and update it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/cpu/attention.h"
#include "backend/cpu/cpu_features.h"
#include "backend/cpu/matmul_batch.h"
#include "backend/cpu/rope.h"
#include "cache/kv_pages.h"
#include "core/thread_pool.h"
#include "formats/model_config.h"
#include "model/forward_profile.h"

namespace splash {

// One sequence's rows inside the pass.
struct RowRun {
  const KvPageTable* kv = nullptr;  // already reserved up to pos0 + n_rows
  int64_t row0 = 0;                 // first row in the pass
  int64_t n_rows = 0;
  int64_t pos0 = 0;                 // position of row0 in its sequence
  float* recurrent = nullptr;       // the sequence's SequenceState::recurrent (hybrid models)
};

// Scratch of the Gated DeltaNet block (blocks/gated_deltanet_block.cpp), grown by the block.
struct GdnScratch {
  std::vector<float> proj;   // [n_rows, all input projection rows] (separate projections copied in)
  std::vector<float> part;   // [n_rows, rows of one projection] when the projections are separate
  std::vector<float> mixed;  // [n_rows, conv_dim] q | k | v before the conv
  std::vector<float> conv;   // [n_rows, conv_dim] after conv + SiLU, then q/k normalized in place
  std::vector<float> z;      // [n_rows, nv dv] output gate
  std::vector<float> g;      // [n_rows, nv] log decay
  std::vector<float> beta;   // [n_rows, nv]
  std::vector<float> o;      // [n_rows, nv dv] delta-rule output, then gated-normed
  std::vector<std::vector<float>> chunk;  // per thread: chunked delta rule scratch
};

// Scratch of the MoE block (blocks/moe_block.cpp), grown by the block itself.
struct MoeScratch {
  std::vector<float> probs;       // [n_rows, n_expert] router logits, then probabilities
  std::vector<int32_t> expert;    // [n_rows, n_expert_used] selected experts
  std::vector<float> weight;      // [n_rows, n_expert_used] their weights
  std::vector<int64_t> offset;    // [n_expert + 1] start of each expert's slots (counting sort)
  std::vector<int32_t> slot_row;  // [n_rows * n_expert_used] rows, grouped by expert
  std::vector<float> slot_weight; // [n_rows * n_expert_used] matching weights
  // One expert's rows at a time, or in decode every slot's (in slot order) at once:
  std::vector<float> xs;          // [rows, n_embd] gathered inputs
  std::vector<float> ff;          // [rows, 2 f] gate | up; decode: [2, slots, f] gate, then up
  std::vector<float> act;         // [rows, f]
  std::vector<float> ys;          // [rows, n_embd]
  std::vector<float> shared_ff;   // [n_rows, 2 f_shared] shared expert gate | up (or gate, then up)
  std::vector<float> shared_act;  // [n_rows, f_shared]
  std::vector<float> shared_ys;   // [n_rows, n_embd]
  std::vector<MatmulJob> jobs;    // products run together (decode: one matmul_batch per phase)
};

// Scratch for one pass, sized by Model::forward (grown, never shrunk, across passes of one call).
struct Workspace {
  std::vector<float> h;     // [n_rows, n_embd] normalized input of a block
  std::vector<float> qkv;   // [n_rows, q_dim + 2 kv_dim] fused projection output
  std::vector<float> q;     // [n_rows, n_head, head_dim]
  std::vector<float> k;     // [n_rows, n_head_kv, head_dim]
  std::vector<float> v;     // [n_rows, n_head_kv, head_dim]
  std::vector<float> att;   // [n_rows, n_head, head_dim] attention output
  std::vector<float> ff;    // [n_rows, 2 n_ff] gate and up
  std::vector<float> act;   // [n_rows, n_ff] swiglu output
  std::vector<float> out;   // [n_rows, n_embd] block output before the residual add
  AttentionScratch attn;    // attention's tiles, reused by every layer and pass
  MoeScratch moe;           // MoE routing and per-expert buffers
  GdnScratch gdn;           // Gated DeltaNet buffers
  std::vector<float> gate;  // [n_rows, n_head, head_dim] gated attention's output gate
};

struct LayerContext {
  const ModelConfig* config = nullptr;
  const RopeTable* rope = nullptr;
  KvPagePool* kv = nullptr;
  ThreadPool* threads = nullptr;
  IsaLevel isa = IsaLevel::kAvx512;
  int il = 0;
  int kv_layer = 0;                   // il's layer in the KV pool (only full-attention layers have one)
  int64_t recurrent_offset = 0;       // il's state in SequenceState::recurrent (linear-attention layers)
  int64_t n_rows = 0;
  float* x = nullptr;                 // [n_rows, n_embd] residual stream, updated in place
  const int32_t* positions = nullptr; // [n_rows]
  std::span<const RowRun> runs;
  Workspace* ws = nullptr;
  ForwardProfile* profile = nullptr;  // nullptr: no timing
};

}  // namespace splash
