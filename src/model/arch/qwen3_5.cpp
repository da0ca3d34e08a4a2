// qwen3_5 (Qwen3.5): the hybrid layer of arch/qwen3_hybrid.h with split Gated DeltaNet input
// projections (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a; GGUF attn_qkv, attn_gate, ssm_beta,
// ssm_alpha, value heads tiled by llama.cpp's converter). Its multimodal RoPE reduces to plain
// rotate-half RoPE for text (all three position streams equal).
#include "model/arch/qwen3_hybrid.h"

namespace splash {

namespace {

Status check(const ModelConfig& c) { return qwen3_hybrid::check(c, "qwen3_5"); }

}  // namespace

extern const Architecture kArchitecture_qwen3_5{"qwen3_5", check, qwen3_hybrid::load, qwen3_hybrid::forward};

}  // namespace splash
