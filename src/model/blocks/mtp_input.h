// The input bank of qwen4_exp's MTP head (vLLM Qwen4ExpMultiTokenPredictor, SGLang NextN):
//   e  = fc_embedding(rms_norm(embed(token)) * pre_fc_norm_embedding)       [n_embd]
//   hn = rms_norm(bank) * pre_fc_norm_hidden, ONE norm over all hc n_embd    [hc n_embd]
//   X  = concat_s(fc_hidden(hn[s]) + e)                                      [hc n_embd]
// The bank is the trunk's pre-mixer bank of the previous token (or the head's own on chained
// draft steps). llama.cpp norms each stream separately: a different model (docs/FLASH_NEXT.md).
//
// Thread-safety: pure over caller-owned buffers; matmuls run on the given pool.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/matmul.h"
#include "core/thread_pool.h"
#include "model/blocks/hyper_connection.h"

namespace splash {

struct MtpInputWeights {
  std::vector<float> norm_embedding;  // [n_embd] pre_fc_norm_embedding, effective gain
  std::vector<float> norm_hidden;     // [hc n_embd] pre_fc_norm_hidden, effective gain
  PackedWeights fc_embedding;         // [n_embd, n_embd]
  PackedWeights fc_hidden;            // [n_embd, n_embd], shared by the streams
};

struct MtpInputScratch {
  std::vector<float> en;  // [n, n_embd] normed embeddings
  std::vector<float> e;   // [n, n_embd]
  std::vector<float> hn;  // [n, hc n_embd]
};

// embedded: [n, n_embd] the tokens' embedding rows; bank: [n, hc n_embd]; out: [n, hc n_embd].
void mtp_input(const MtpInputWeights& w, const HyperConnectionShape& s, const float* embedded, const float* bank,
               int64_t n, float* out, MtpInputScratch& scratch, ThreadPool& pool, IsaLevel isa);

}  // namespace splash
