#include "formats/tensor_names.h"

#include <array>
#include <cstring>
#include <vector>

namespace splash {

namespace {

struct NamePair {
  std::string_view hf;    // suffix after "model.layers.N." for per-layer tensors
  std::string_view gguf;  // suffix after "blk.N."
};

// Per-layer tensors of the dense llama/qwen2/qwen3 families and of MoE layers (hybrid layers add
// theirs with their architectures), without the trailing ".weight" / ".bias" (kept as is on both
// sides). Stacked expert tensors ([n_expert, rows, cols]) carry MLX-LM's `switch_mlp` names inside
// Splash; Hugging Face checkpoints with one tensor per expert (`mlp.experts.<e>.gate_proj`) have no
// GGUF counterpart (llama.cpp stacks them).
constexpr std::array<NamePair, 31> kLayerNames = {{
    {"input_layernorm", "attn_norm"},
    {"post_attention_layernorm", "ffn_norm"},
    {"self_attn.q_proj", "attn_q"},
    {"self_attn.k_proj", "attn_k"},
    {"self_attn.v_proj", "attn_v"},
    {"self_attn.o_proj", "attn_output"},
    {"self_attn.q_norm", "attn_q_norm"},
    {"self_attn.k_norm", "attn_k_norm"},
    {"mlp.gate_proj", "ffn_gate"},
    {"mlp.up_proj", "ffn_up"},
    {"mlp.down_proj", "ffn_down"},
    {"mlp.gate", "ffn_gate_inp"},                     // router [n_expert, n_embd]
    {"mlp.switch_mlp.gate_proj", "ffn_gate_exps"},    // [n_expert, n_ff_expert, n_embd]
    {"mlp.switch_mlp.up_proj", "ffn_up_exps"},        // [n_expert, n_ff_expert, n_embd]
    {"mlp.switch_mlp.down_proj", "ffn_down_exps"},    // [n_expert, n_embd, n_ff_expert]
    {"mlp.shared_expert.gate_proj", "ffn_gate_shexp"},
    {"mlp.shared_expert.up_proj", "ffn_up_shexp"},
    {"mlp.shared_expert.down_proj", "ffn_down_shexp"},
    {"mlp.shared_expert_gate", "ffn_gate_inp_shexp"},  // [1, n_embd] (GGUF: [n_embd])
    // Hybrid Gated-DeltaNet models (qwen3next / qwen35). llama.cpp names post_attention_layernorm
    // "post_attention_norm" there (HF -> GGUF keeps ffn_norm above; the test-model writer names
    // hybrids' itself). GGUF ssm_a holds A = -exp(A_log) and the zero-centred norms hold 1 + w:
    // the loader, not this map, accounts for the values.
    {"post_attention_layernorm", "post_attention_norm"},
    {"linear_attn.in_proj_qkvz", "ssm_in"},
    {"linear_attn.in_proj_ba", "ssm_ba"},
    {"linear_attn.in_proj_qkv", "attn_qkv"},
    {"linear_attn.in_proj_z", "attn_gate"},
    {"linear_attn.in_proj_b", "ssm_beta"},
    {"linear_attn.in_proj_a", "ssm_alpha"},
    {"linear_attn.conv1d", "ssm_conv1d"},
    {"linear_attn.dt_bias", "ssm_dt.bias"},  // whole names: no .weight/.bias suffix on the HF side
    {"linear_attn.A_log", "ssm_a"},
    {"linear_attn.norm", "ssm_norm"},
    {"linear_attn.out_proj", "ssm_out"},
}};

constexpr std::array<NamePair, 3> kGlobalNames = {{
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
}};

// Splits "<prefix><digits>.<rest>" into layer index and rest.
bool split_layer(std::string_view name, std::string_view prefix, std::string& index, std::string_view& rest) {
  if (name.substr(0, prefix.size()) != prefix) return false;
  size_t i = prefix.size();
  size_t start = i;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
  if (i == start || i >= name.size() || name[i] != '.') return false;
  index = std::string(name.substr(start, i - start));
  rest = name.substr(i + 1);
  return true;
}

// Splits "a.b.weight" into "a.b" and ".weight"/".bias"; empty suffix when neither.
std::pair<std::string_view, std::string_view> split_suffix(std::string_view s) {
  for (std::string_view suffix : {std::string_view(".weight"), std::string_view(".bias")}) {
    if (s.size() > suffix.size() && s.substr(s.size() - suffix.size()) == suffix)
      return {s.substr(0, s.size() - suffix.size()), suffix};
  }
  return {s, {}};
}

}  // namespace

std::optional<std::string> hf_to_gguf_name(std::string_view hf_name) {
  for (const auto& p : kGlobalNames)
    if (p.hf == hf_name) return std::string(p.gguf);
  std::string index;
  std::string_view rest;
  if (!split_layer(hf_name, "model.layers.", index, rest)) return std::nullopt;
  auto [base, suffix] = split_suffix(rest);
  for (const auto& p : kLayerNames)
    if (p.hf == base) return "blk." + index + "." + std::string(p.gguf) + std::string(suffix);
  return std::nullopt;
}

std::optional<std::string> gguf_to_hf_name(std::string_view gguf_name) {
  for (const auto& p : kGlobalNames)
    if (p.gguf == gguf_name) return std::string(p.hf);
  std::string index;
  std::string_view rest;
  if (!split_layer(gguf_name, "blk.", index, rest)) return std::nullopt;
  for (const auto& p : kLayerNames)
    if (p.gguf == rest) return "model.layers." + index + "." + std::string(p.hf);
  auto [base, suffix] = split_suffix(rest);
  for (const auto& p : kLayerNames)
    if (p.gguf == base) return "model.layers." + index + "." + std::string(p.hf) + std::string(suffix);
  return std::nullopt;
}

void permute_rope_rows(void* data, size_t row_bytes, int n_head, int head_dim, bool to_interleaved) {
  // Within each head, rotate-half row r pairs with r + head_dim/2; interleaved row 2i pairs with
  // 2i + 1. Interleaved position 2i holds rotate-half row i, position 2i+1 holds row i + half.
  auto* bytes = static_cast<uint8_t*>(data);
  const int half = head_dim / 2;
  std::vector<uint8_t> head(static_cast<size_t>(head_dim) * row_bytes);
  for (int h = 0; h < n_head; ++h) {
    uint8_t* base = bytes + static_cast<size_t>(h) * head_dim * row_bytes;
    std::memcpy(head.data(), base, head.size());
    for (int i = 0; i < half; ++i) {
      for (int j = 0; j < 2; ++j) {
        size_t rh = static_cast<size_t>(i + j * half);  // rotate-half row
        size_t il = static_cast<size_t>(2 * i + j);     // interleaved row
        size_t dst = to_interleaved ? il : rh;
        size_t src = to_interleaved ? rh : il;
        std::memcpy(base + dst * row_bytes, head.data() + src * row_bytes, row_bytes);
      }
    }
  }
}

}  // namespace splash
