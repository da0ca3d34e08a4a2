// llama-quantize's mixed file types (Q4_K_M, Q5_K_M) for GGUF test models: which type each matrix
// gets, so a random-weight file carries the tensor types of the file llama.cpp's quantizer makes from
// a real model of the same shape (benchmarks against llama.cpp's usual files).
//
// Our own implementation of the rules of llama.cpp's llama_tensor_get_type / _impl
// (src/llama-quant.cpp as of ggml-org/llama.cpp 007dbbf3), for these two mixes:
//   - base type Q4_K (Q4_K_M) or Q5_K (Q5_K_M);
//   - output.weight, and token_embd.weight when there is no output.weight (tied embeddings): Q6_K
//     (Q8_0 when its rows are not a multiple of 256); an untied token_embd keeps the base type;
//   - attn_v / attn_qkv / attn_kv_b: Q6_K where use_more_bits(i, n) holds, i counting these tensors
//     in llama.cpp's order (by layer, then name) and n their number; Q8_0 when n_expert == 8;
//   - ffn_down (also _exps, _shexp): Q6_K where use_more_bits(i, n_block) holds, i its own counter
//     for dense models, the block number of its name when n_expert > 1;
//   - attn_k: Q8_0 when n_expert == 8; attn_output: Q5_K when n_expert == 8 (Q4_K_M only).
//   use_more_bits(i, n) = i < n/8 || i >= 7n/8 || (i - n/8) % 3 == 2.
// Not reproduced: llama.cpp's bump of attn_v to Q5_K for its LLM_TYPE_70B models (80-layer llama),
// Falcon's rules, and the fallback for rows that are not a multiple of 256 (Q4_K -> Q5_0, Q5_K ->
// Q5_1: types Splash's matmul does not run), which is refused with an error instead. Older
// llama.cpp (before the tensor_category rewrite) gave attn_qkv Q5_K (Q4_K_M) / Q6_K (Q5_K_M) in every
// layer instead of the attn_v rule; only the hybrids' GGUF files have attn_qkv.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "testmodel/test_model.h"

namespace splash::testmodel {

struct MixMatrix {
  std::string name;  // GGUF name, "blk.3.attn_v.weight"
  uint64_t cols = 0; // row length (GGUF ne[0])
};

// The matrix type the mix starts from (Q4_K, Q5_K); gguf_type of a pure spec otherwise.
DType gguf_mix_base_type(GgufMix mix);

// llama.cpp's general.file_type (llama_ftype): 15 MOSTLY_Q4_K_M, 17 MOSTLY_Q5_K_M.
uint32_t gguf_mix_file_type(GgufMix mix);

// Types of `matrices` (every tensor a pure file would quantize: 2-D and stacked-expert weights,
// routers excluded; in any order) under `mix` (not kPure), in the same order. n_block: the file's
// block_count (MTP blocks included); n_expert: expert_count, 0 for dense models.
Result<std::vector<DType>> gguf_mix_types(GgufMix mix, std::span<const MixMatrix> matrices, uint32_t n_block,
                                          uint32_t n_expert);

}  // namespace splash::testmodel
