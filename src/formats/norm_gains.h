// Whether a checkpoint stores its zero-centred RMSNorm gains (qwen3_next, qwen3_5 and their MoE
// variants: the model scales by 1 + w) as w or already as 1 + w. The converters differ, and the
// file does not say so in its metadata; each converter's layout gives it away instead:
//   * Hugging Face (transformers) original: w. conv1d.weight [C, 1, K]; Qwen3-Next keeps one tensor
//     per expert (mlp.experts.<e>.*); Qwen3.5 ships its MTP head (mtp.*).
//   * mlx-lm conversion: 1 + w. Its sanitize() adds 1 to input/post-attention layernorms, model.norm,
//     q_norm and k_norm when it meets the raw layout (qwen3_next: per-expert tensors; qwen3_5:
//     conv1d not yet [C, K, 1], in some versions also MTP tensors), and in the same pass moves conv1d
//     to [C, K, 1] and stacks the experts into switch_mlp; the saved folder is read as is.
//   * llama.cpp GGUF: 1 + w (convert_hf_to_gguf adds 1 to the same norms).
// linear_attn.norm (the gated norm of the DeltaNet output) is a plain gain in every layout.
// This is the one place Splash decides it; every block that loads such a norm asks ModelFiles.
#pragma once

#include <string_view>

namespace splash {

// What the rule looks at, gathered from the tensors of one checkpoint.
struct NormGainLayout {
  bool gguf = false;            // llama.cpp's converter wrote it
  bool conv_axis_moved = false;  // a linear_attn.conv1d.weight stored [C, K, 1] (K > 1): mlx-lm's layout
  bool conv_axis_raw = false;    // a linear_attn.conv1d.weight stored [C, 1, K] or [C, K] with K > 1
  bool per_expert_tensors = false;  // model.layers.<L>.mlp.experts.<e>.* (Hugging Face Qwen3-Next)
  bool mtp_tensors = false;         // mtp.* (Hugging Face Qwen3.5 ships them; mlx-lm drops them)
};

// True when the file holds 1 + w for the zero-centred norms of `architecture` ("qwen3_next",
// "qwen3_5"); false when it holds w (add 1 at load). Meaningless for other architectures.
bool zero_centred_gains_stored_shifted(std::string_view architecture, const NormGainLayout& layout);

// Whether `hf_name` (a Hugging Face / Splash tensor name) is one of those zero-centred gains:
// input_layernorm, post_attention_layernorm, q_norm, k_norm, model.norm and the MTP head's
// pre_fc_norm_embedding / pre_fc_norm_hidden / mtp.norm (not linear_attn.norm).
bool is_zero_centred_norm_name(std::string_view hf_name);

}  // namespace splash
