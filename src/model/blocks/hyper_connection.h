// Hyper-connections of qwen4_exp (Flash-Next): the residual is a bank of hc streams of n_embd
// ([n, hc, n_embd], stream-major per row) instead of one vector, and every norm of the decoder is a
// learned mix of the streams (transformers' Qwen4ExpTextGatedResidual):
//   xn     = rms_norm of each stream with its slice of the 1-centred gain   [hc n_embd]
//   w      = sigmoid(up(silu(down(xn) / hc)))                                [hc n_embd] (low rank)
//   m      = mean over the streams of w * xn                                 [n_embd]  the block's input
//   inject = 2 sigmoid(inject(xn) / hc)                                      [hc]
// and after the block, stream s of the bank gets inject[s] * block(m) added (hc_add). The final
// mixer is hc_mix without inject: qwen4_exp has no final RMSNorm, the mixer's m feeds the lm_head.
//
// Thread-safety: pure functions over caller-owned buffers; the matmuls run on the given pool.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/matmul.h"
#include "core/thread_pool.h"

namespace splash {

struct HyperConnectionShape {
  int64_t n_embd = 0;  // width of one stream (hidden_size)
  int64_t hc = 0;      // streams (hc_count)
  float eps = 1e-6f;
  int64_t bank() const { return hc * n_embd; }
};

struct HyperConnectionWeights {
  std::vector<float> norm;  // [hc n_embd] hc_norm, effective gain (1 + w folded at load)
  PackedWeights down;       // [hc_lowrank, hc n_embd] input_mix_weight_down
  PackedWeights up;         // [hc n_embd, hc_lowrank] input_mix_weight_up
  PackedWeights inject;     // [hc, hc n_embd] block_inject_weight; rows() == 0 on the final mixer
  bool has_inject() const { return inject.rows() > 0; }
};

// Working memory of hc_mix, grown to the largest n seen.
struct HyperConnectionScratch {
  std::vector<float> xn;   // [n, hc n_embd] normed bank
  std::vector<float> low;  // [n, hc_lowrank]
  std::vector<float> w;    // [n, hc n_embd] mix weights
  std::vector<float> inj;  // [n, hc] inject logits
};

// bank: [n, hc n_embd]; m: [n, n_embd]; inject: [n, hc], written when w.has_inject() (may be
// nullptr otherwise). m and inject must not overlap bank.
void hc_mix(const HyperConnectionWeights& w, const HyperConnectionShape& s, const float* bank, int64_t n, float* m,
            float* inject, HyperConnectionScratch& scratch, ThreadPool& pool, IsaLevel isa);

// bank[r, s, :] += inject[r, s] * y[r, :]. bank: [n, hc n_embd], y: [n, n_embd], inject: [n, hc].
void hc_add(float* bank, const float* y, const float* inject, int64_t n, const HyperConnectionShape& s);

// rms_norm of each n_embd-wide stream of rows [n, hc n_embd] with the flat gain [hc n_embd] (the
// grouped norm hyper-connections and the PLE layer use). out may alias x.
void rms_norm_streams(const float* x, const float* gain, float eps, float* out, int64_t n,
                      const HyperConnectionShape& s, IsaLevel isa);

}  // namespace splash
