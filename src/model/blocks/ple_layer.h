// The math of qwen4_exp's n-gram PLE layer (transformers' Qwen4ExpTextNGramEmbedding after the
// gather), given the table rows of each token: the hash and the table store live in src/ple/.
//   emb = the token's n_ple_heads gathered rows side by side, head order     [ple_dim]
//   kn  = rms_norm per stream of key(emb) * norm_key                          [hc, n_embd]
//   v   = value(emb)                                                          [n_embd], every stream
//   qn  = rms_norm per stream of the bank * norm_query                        [hc, n_embd]
//   a_s = <kn[s], qn[s]> / sqrt(n_embd); a_s = sign(a_s) sqrt(max(|a_s|, 1e-6))
//   gv  = concat_s sigmoid(a_s) v                                             [hc n_embd]
//   u   = rms_norm per stream of gv * norm_conv
//   c   = silu(depthwise conv of u over time, kernel K, dilation d): tap j of token t reads
//         u[t - d (K - 1 - j)], zeros before the sequence start
//   out = gv + c     (the caller adds it to the bank before the layer's attention hyper-connection)
// Per-sequence state: the last (K - 1) d rows of u ([9, hc n_embd] in the shipped config), zeros
// at the start, not reset at an EOS. A chunk continues from it, so a prefill equals one token at a time.
//
// Thread-safety: pure over caller-owned buffers (state included); matmuls run on the given pool.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/matmul.h"
#include "core/thread_pool.h"
#include "model/blocks/hyper_connection.h"

namespace splash {

struct PleLayerShape {
  HyperConnectionShape bank;  // n_embd, hc, eps
  int64_t ple_dim = 0;        // ple_embed_dim: n_ple_heads * table head dim
  int64_t kernel = 4;         // ple_conv_kernel_size
  int64_t dilation = 3;       // ngram_size
  int64_t state_rows() const { return (kernel - 1) * dilation; }
  int64_t state_floats() const { return state_rows() * bank.bank(); }
};

struct PleLayerWeights {
  PackedWeights key;              // [hc n_embd, ple_dim] key_proj
  PackedWeights value;            // [n_embd, ple_dim] value_proj
  std::vector<float> norm_key;    // [hc n_embd] effective gains (1 + w folded at load)
  std::vector<float> norm_query;  // [hc n_embd]
  std::vector<float> norm_conv;   // [hc n_embd]
  std::vector<float> conv;        // [hc n_embd, kernel] depthwise conv1d
};

struct PleLayerScratch {
  std::vector<float> kn;    // [n, hc n_embd]
  std::vector<float> qn;    // [n, hc n_embd]
  std::vector<float> v;     // [n, n_embd]
  std::vector<float> hist;  // [state_rows + n, hc n_embd] conv history then this chunk's u
};

// rows: [n, ple_dim] the gathered table rows (any fp8 scale applied); bank: [n, hc n_embd] the
// layer's input bank; state: [state_rows, hc n_embd], updated; out: [n, hc n_embd].
void ple_layer(const PleLayerWeights& w, const PleLayerShape& s, const float* rows, const float* bank, int64_t n,
               float* state, float* out, PleLayerScratch& scratch, ThreadPool& pool, IsaLevel isa);

}  // namespace splash
