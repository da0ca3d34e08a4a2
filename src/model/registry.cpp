#include "model/architecture.h"

namespace splash {

// Every architecture: arch/<name>.cpp defines kArchitecture_<name>. Adding one = one entry here.
#define SPLASH_ARCHITECTURES(X) \
  X(llama)                      \
  X(qwen2)                      \
  X(qwen3)                      \
  X(qwen3_moe)                  \
  X(qwen3_next)                 \
  X(qwen3_5)

#define SPLASH_DECLARE_ARCH(name) extern const Architecture kArchitecture_##name;
SPLASH_ARCHITECTURES(SPLASH_DECLARE_ARCH)
#undef SPLASH_DECLARE_ARCH

namespace {

#define SPLASH_LIST_ARCH(name) &kArchitecture_##name,
const Architecture* const kArchitectures[] = {SPLASH_ARCHITECTURES(SPLASH_LIST_ARCH)};
#undef SPLASH_LIST_ARCH

}  // namespace

const Architecture* find_architecture(std::string_view name) {
  for (const Architecture* a : kArchitectures)
    if (a->name == name) return a;
  return nullptr;
}

std::vector<std::string_view> architecture_names() {
  std::vector<std::string_view> names;
  for (const Architecture* a : kArchitectures) names.push_back(a->name);
  return names;
}

namespace {

bool any_dense_layer(const ModelConfig& c) {
  if (c.n_expert == 0) return true;  // dense model
  // moe_layer empty: every layer is MoE.
  for (bool moe : c.moe_layer)
    if (!moe) return true;
  return false;
}

Status check_decoder_config(const ModelConfig& c, std::string_view name, bool moe) {
  auto positive = [&](uint32_t v, const char* field) -> Status {
    if (v == 0) return make_error(name, ": config field ", field, " is 0");
    return {};
  };
  SPLASH_TRY_STATUS(positive(c.n_vocab, "n_vocab (vocab_size)"));
  SPLASH_TRY_STATUS(positive(c.n_embd, "n_embd (hidden_size)"));
  SPLASH_TRY_STATUS(positive(c.n_layer, "n_layer (num_hidden_layers)"));
  SPLASH_TRY_STATUS(positive(c.n_head, "n_head (num_attention_heads)"));
  SPLASH_TRY_STATUS(positive(c.n_head_kv, "n_head_kv (num_key_value_heads)"));
  SPLASH_TRY_STATUS(positive(c.head_dim, "head_dim"));
  if (any_dense_layer(c)) SPLASH_TRY_STATUS(positive(c.n_ff, "n_ff (intermediate_size)"));
  if (c.n_head % c.n_head_kv != 0)
    return make_error(name, ": num_attention_heads ", c.n_head, " is not a multiple of num_key_value_heads ",
                      c.n_head_kv);
  if (c.head_dim % 2 != 0) return make_error(name, ": head_dim ", c.head_dim, " is odd (RoPE rotates pairs)");
  if (!moe && c.n_expert > 0) return make_error(name, ": config has ", c.n_expert, " experts; this architecture is dense");
  if (moe) {
    if (c.n_expert == 0) return make_error(name, ": config field n_expert (num_experts) is 0");
    if (c.n_expert_used == 0 || c.n_expert_used > c.n_expert)
      return make_error(name, ": num_experts_per_tok ", c.n_expert_used, " must be in [1, num_experts = ", c.n_expert,
                        "]");
    SPLASH_TRY_STATUS(positive(c.n_ff_expert, "n_ff_expert (moe_intermediate_size)"));
    if (!c.moe_layer.empty() && c.moe_layer.size() != c.n_layer)
      return make_error(name, ": ", c.moe_layer.size(), " MoE layer flags for ", c.n_layer, " layers");
  }
  for (LayerKind k : c.layer_kinds)
    if (k != LayerKind::kFullAttention)
      return make_error(name, ": config has linear-attention layers; this architecture has full attention only");
  if (!(c.rms_eps > 0.0f)) return make_error(name, ": rms_norm_eps ", c.rms_eps, " must be > 0");
  return {};
}

}  // namespace

Status check_dense_decoder_config(const ModelConfig& c, std::string_view name) {
  return check_decoder_config(c, name, false);
}

Status check_moe_decoder_config(const ModelConfig& c, std::string_view name) {
  return check_decoder_config(c, name, true);
}

}  // namespace splash
