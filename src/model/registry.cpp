#include "model/architecture.h"

namespace splash {

// Every architecture: arch/<name>.cpp defines kArchitecture_<name>. Adding one = one entry here.
#define SPLASH_ARCHITECTURES(X) \
  X(llama)                      \
  X(qwen2)                      \
  X(qwen3)

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

Status check_dense_decoder_config(const ModelConfig& c, std::string_view name) {
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
  SPLASH_TRY_STATUS(positive(c.n_ff, "n_ff (intermediate_size)"));
  if (c.n_head % c.n_head_kv != 0)
    return make_error(name, ": num_attention_heads ", c.n_head, " is not a multiple of num_key_value_heads ",
                      c.n_head_kv);
  if (c.head_dim % 2 != 0) return make_error(name, ": head_dim ", c.head_dim, " is odd (RoPE rotates pairs)");
  if (c.n_expert > 0) return make_error(name, ": config has ", c.n_expert, " experts; this architecture is dense");
  for (LayerKind k : c.layer_kinds)
    if (k != LayerKind::kFullAttention)
      return make_error(name, ": config has linear-attention layers; this architecture has full attention only");
  if (!(c.rms_eps > 0.0f)) return make_error(name, ": rms_norm_eps ", c.rms_eps, " must be > 0");
  return {};
}

}  // namespace splash
