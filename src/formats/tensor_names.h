// Tensor naming across formats. Inside Splash a model's tensors carry their Hugging Face names
// (`model.layers.3.self_attn.q_proj.weight`); GGUF files use llama.cpp's names
// (`blk.3.attn_q.weight`). This is the one place that maps between them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace splash {

// HF name -> GGUF name, e.g. "model.layers.3.mlp.gate_proj.weight" -> "blk.3.ffn_gate.weight".
// nullopt for names this mapping does not know (the caller reports them).
std::optional<std::string> hf_to_gguf_name(std::string_view hf_name);
// GGUF name -> HF name; the inverse of hf_to_gguf_name.
std::optional<std::string> gguf_to_hf_name(std::string_view gguf_name);

// Rotary layouts of the q/k projection rows. HF checkpoints of the llama family store q/k rows for
// rotate-half RoPE (pairs (i, i + d/2)); GGUF `llama` files and llama2.c checkpoints store them
// interleaved (pairs (2i, 2i + 1)). qwen2/qwen3 GGUF files keep the HF layout (NEOX RoPE).
// Permutes the rows of a [n_head * head_dim, cols] matrix (or a [n_head * head_dim] bias/vector
// when cols == 1) in place, from rotate-half to interleaved or back. Element size in bytes lets it
// move rows of any unquantized or row-quantized type.
void permute_rope_rows(void* data, size_t row_bytes, int n_head, int head_dim, bool to_interleaved);

}  // namespace splash
