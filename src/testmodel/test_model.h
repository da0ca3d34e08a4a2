// Tiny (and benchmark-sized) random-weight models for tests and benchmarks, written in the same
// formats real models come in: GGUF (llama.cpp names and metadata, q/k rows permuted for `llama`)
// and Hugging Face / MLX safetensors directories (config.json, tokenizer.json,
// tokenizer_config.json, generation_config.json, optional MLX affine quantization).
//
// Weights are a pure function of (seed, Hugging Face tensor name): the same spec gives the same
// weights in every format, so the numpy reference (tests/reference) can check a GGUF file against
// the safetensors directory of the same seed. Tensors are generated row block by row block while
// the file is written, so a 0.6B-parameter file streams to disk without holding the model in memory.
//
// Thread-safety: every function here is reentrant; nothing is shared between calls.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "formats/architecture_facts.h"
#include "core/dtype.h"
#include "core/result.h"

namespace splash {

enum class TestModelFormat : uint8_t {
  kGguf,         // one .gguf file at out_path
  kSafetensors,  // a directory at out_path (created if missing)
};

// GGUF matrix types: one type for every matrix, or one of llama-quantize's mixes over a base type
// (gguf_mix.h has the rules).
enum class GgufMix : uint8_t {
  kPure,    // every 2-D matrix in gguf_type, embeddings and output included
  kQ4_K_M,  // llama.cpp's Q4_K_M: Q4_K, Q6_K for output / tied embeddings and half of attn_v, ffn_down
  kQ5_K_M,  // the same rules over Q5_K
};

struct TestModelSpec {
  // "llama", "qwen2" (q/k/v biases), "qwen3" (q/k norms, head_dim), or the hybrid Gated-DeltaNet
  // "qwen3_next" (fused in_proj_qkvz / in_proj_ba) and "qwen3_5" (split in_proj_qkv/z/b/a)
  std::string arch = "llama";
  TestModelFormat format = TestModelFormat::kGguf;

  uint32_t n_vocab = 0;      // 0 = the tokenizer's size; larger pads the vocabulary with [PADi] tokens
  uint32_t n_embd = 64;
  uint32_t n_layer = 2;
  uint32_t n_head = 4;
  uint32_t n_head_kv = 2;
  uint32_t head_dim = 16;    // qwen3 may use n_head * head_dim != n_embd; llama/qwen2 need equality
  uint32_t n_ff = 192;       // a multiple of 64 so MLX groups of 32/64 and Q8_0/Q4_0 blocks fit
  uint32_t context_length = 2048;
  float rope_theta = 10000.0f;
  float rms_eps = 1e-6f;
  bool tie_embeddings = false;  // no separate output matrix
  uint64_t seed = 1;

  // Mixture of experts (qwen3_moe, and the hybrids with hybrid_moe: Qwen3-Next / Qwen3.5-MoE):
  // every layer not in mlp_only_layers has a router over n_expert
  // SwiGLU experts of n_ff_expert, n_expert_used of them per token, and a shared expert with a
  // sigmoid gate when n_ff_shared_expert > 0 (the Qwen3-Next layout; Qwen3-MoE has none).
  // Experts are stacked tensors in GGUF and MLX files, one tensor per expert in plain safetensors.
  uint32_t n_expert = 8;
  uint32_t n_expert_used = 2;
  uint32_t n_ff_expert = 64;
  uint32_t n_ff_shared_expert = 0;
  bool norm_topk_prob = true;
  std::vector<uint32_t> mlp_only_layers;  // dense SwiGLU MLP layers of a MoE model

  // Hybrids (qwen3_next, qwen3_5): MoE MLPs instead of dense ones (GGUF qwen35 becomes
  // qwen35moe, config.json Qwen3_5MoeForCausalLM / qwen3_5_moe).
  bool hybrid_moe = false;
  // Plain safetensors: experts as transformers 5 / Qwen3.5-MoE store them (mlp.experts.gate_up_proj
  // [E, 2f, d], mlp.experts.down_proj [E, d, f]) instead of one tensor per expert.
  bool hf_fused_experts = false;

  bool moe() const { return facts().experts_required || (hybrid() && hybrid_moe); }
  bool moe_layer(uint32_t il) const {
    if (!moe()) return false;
    for (uint32_t l : mlp_only_layers)
      if (l == il) return false;
    return true;
  }

  // Hybrid models (qwen3_next, qwen3_5): every full_attention_interval-th layer is gated full
  // attention, the others Gated DeltaNet. config.json gets `layer_types` when use_layer_types,
  // else `full_attention_interval`; GGUF always the interval (llama.cpp's key).
  uint32_t full_attention_interval = 4;
  bool use_layer_types = false;
  uint32_t linear_n_key_heads = 2;
  uint32_t linear_key_head_dim = 16;
  uint32_t linear_n_value_heads = 4;  // a multiple of linear_n_key_heads
  uint32_t linear_value_head_dim = 16;
  uint32_t linear_conv_kernel = 4;
  float partial_rotary_factor = 0.25f;
  // MLX mixed bits: the linear-attention projections use these bits instead of mlx_bits (0 = same),
  // declared per module in config.json's "quantization" as mlx-lm writes mixed checkpoints.
  uint32_t mlx_linear_bits = 0;
  // Multi-token-prediction head (qwen3_next / qwen3_5; not MLX): n_mtp_layers > 0 writes mtp.fc,
  // mtp.pre_fc_norm_embedding / _hidden, mtp.norm and mtp.layers.0.* (a gated attention layer with
  // a dense MLP, or the MoE block when moe()) and config.json mtp_num_hidden_layers; in GGUF
  // llama.cpp's layout: block_count + 1, <arch>.nextn_predict_layers, blk.<n_layer>.nextn.* and
  // the layer's blk.<n_layer>.* tensors (spec/mtp/mtp_model.h).
  uint32_t n_mtp_layers = 0;

  bool hybrid() const { return facts().hybrid; }
  const ArchitectureFacts& facts() const { return architecture_facts(arch); }

  // GGUF: type of every 2-D matrix ("pure": embeddings and output too); 1-D tensors are F32.
  // F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K. Block types need rows (n_embd, n_ff,
  // n_head * head_dim) that are multiples of the block size (32, or 256 for the K-quants).
  DType gguf_type = DType::kF32;
  // GGUF: kPure, or a llama-quantize mix whose base type is gguf_type (Q4_K for kQ4_K_M, Q5_K for
  // kQ5_K_M). 1-D tensors stay F32 either way.
  GgufMix gguf_mix = GgufMix::kPure;

  // safetensors: dtype of every tensor when not MLX-quantized (F32, F16, BF16).
  DType safetensors_dtype = DType::kF32;
  // MLX affine quantization of every 2-D matrix (embeddings included); 0 = none. Scales and biases
  // are stored in `safetensors_dtype` (F32 -> F16, as mlx-lm does for f32 checkpoints). Hybrids are
  // laid out as mlx-lm's sanitize() leaves them: zero-centred norm gains stored as 1 + w, conv1d
  // [C, K, 1], experts stacked (switch_mlp), router and shared-expert gate at 8 bits, Qwen3.5 under
  // language_model.* (docs/ADDING_A_MODEL.md, "Layout conventions per format").
  uint32_t mlx_bits = 0;
  uint32_t mlx_group_size = 64;

  // Path of a real Hugging Face tokenizer.json (byte-level BPE, e.g. Qwen3's); empty = a small
  // synthetic tokenizer (byte-level BPE for qwen*, SentencePiece-style with byte fallback for llama).
  // A tokenizer_config.json next to it supplies the chat template and special tokens.
  std::string tokenizer_json;
};

// Named presets:
//   tiny-llama, tiny-qwen2, tiny-qwen3      dim 64 (qwen3: head_dim 32, 4 heads -> 128 != 64)
//   tiny-llama-k, tiny-qwen3-k              dim 256, ffn 512, head_dim 64: every row fits K-quants
//   qwen3-0.6b, qwen3-1.7b                  the benchmark shapes (28 layers, tied embeddings,
//                                           vocab 151936), Q8_0 unless changed by the caller
//   tiny-qwen3-moe                          qwen3_moe: dim 64, 3 layers (layer 1 dense), 8 experts
//                                           of 64, top 2
//   qwen3-moe-bench                         the Qwen3-30B-A3B layer shape (dim 2048, 128 experts of
//                                           768, top 8) with 8 layers instead of 48: 2.9 GB in
//                                           Q4_0, about 15% of it read per token (MoE decode bench)
//   tiny-qwen3-next, tiny-qwen3-5           hybrids: dim 64, 4 layers (3 Gated DeltaNet + 1 gated
//                                           attention), 2 key / 4 value heads of 16 in the DeltaNet
//   tiny-qwen3-next-mtp                     tiny-qwen3-next in safetensors with an MTP head
//   tiny-qwen3-next-moe, tiny-qwen3-5-moe   the hybrids' MoE variants: 8 experts of 64, top 2, a
//                                           gated shared expert of 64 (next: layer 1 dense,
//                                           mlp_only_layers; 3.5: every layer sparse)
//   tiny-qwen3-next-moe-mtp                 tiny-qwen3-next-moe in safetensors with an MTP head
//                                           whose layer has the MoE block
//   qwen3-next-bench                        a Qwen3-Next-like hybrid MoE for the GDN prefill and
//                                           MoE decode benchmarks (scripts/bench-hybrid): dim 1024,
//                                           12 layers (9 GDN), 64 experts of 256, top 8, shared
//                                           512, vocab 151936 tied: 0.9B parameters, Q4_0
//   hybrid-0.6b                             a Qwen3.5-like hybrid of about 0.6B parameters for the
//                                           GDN prefill benchmark (24 layers, dim 1024), Q8_0
//   hybrid-1.7b                             hybrid-0.6b at dim 2048, FFN 6144 (about 1.6B
//                                           parameters; the hybrid side-by-side, scripts/bench-peer)
Result<TestModelSpec> test_model_preset(std::string_view name);
std::vector<std::string> test_model_preset_names();

// A GGUF --type value, case-insensitive: a matrix type ("q8_0" -> {Q8_0, kPure}) or a mix ("Q4_K_M" ->
// {Q4_K, kQ4_K_M}, "Q5_K_M" -> {Q5_K, kQ5_K_M}); nullopt for anything else.
std::optional<std::pair<DType, GgufMix>> gguf_type_from_name(std::string_view name);

// Checks shapes and types against the chosen format; the message names the offending field.
Status validate_test_model_spec(const TestModelSpec& spec);

// Writes the model (file for GGUF, directory for safetensors). Atomic for each file written.
Status write_test_model(const TestModelSpec& spec, const std::string& out_path);

}  // namespace splash
