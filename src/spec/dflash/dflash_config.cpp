#include "spec/dflash/dflash_config.h"

#include <optional>

#include <nlohmann/json.hpp>

namespace splash {

namespace {

using nlohmann::json;

// dflash_config.<name> if present, else the top-level <name>; nullptr when neither.
const json* draft_value(const json& root, const char* name) {
  auto dc = root.find("dflash_config");
  if (dc != root.end() && dc->is_object()) {
    auto it = dc->find(name);
    if (it != dc->end() && !it->is_null()) return &*it;
  }
  auto it = root.find(name);
  return it != root.end() && !it->is_null() ? &*it : nullptr;
}

Result<int64_t> get_int(const json& root, const char* name, const std::string& source, bool nested,
                        std::optional<int64_t> fallback = std::nullopt) {
  const json* v = nested ? draft_value(root, name) : nullptr;
  if (!nested) {
    auto it = root.find(name);
    if (it != root.end() && !it->is_null()) v = &*it;
  }
  if (v == nullptr) {
    if (fallback) return *fallback;
    return make_error(source, ": '", name, "' is missing");
  }
  if (!v->is_number_integer()) return make_error(source, ": '", name, "' must be an integer, got ", v->dump());
  return v->get<int64_t>();
}

Result<double> get_float(const json& root, const char* name, const std::string& source, double fallback) {
  const json* v = draft_value(root, name);
  if (v == nullptr) return fallback;
  if (!v->is_number()) return make_error(source, ": '", name, "' must be a number, got ", v->dump());
  return v->get<double>();
}

Status positive(int64_t v, const char* name, const std::string& source) {
  if (v <= 0 || v > (int64_t{1} << 30)) return make_error(source, ": '", name, "' = ", v, " must be positive");
  return {};
}

}  // namespace

Result<DFlashConfig> parse_dflash_config(std::string_view json_text, const std::string& source) {
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return make_error(source, ": not a JSON object");

  auto archs = root.find("architectures");
  if (archs == root.end() || !archs->is_array() || archs->empty() || !(*archs)[0].is_string())
    return make_error(source, ": 'architectures' is missing (expected [\"DFlashDraftModel\"])");
  const std::string arch = (*archs)[0].get<std::string>();
  if (arch != "DFlashDraftModel") {
    if (arch == "DFlash2DraftModel")
      return make_error(source, ": DFlash2DraftModel (candidate selector, dynamic convolutions) is not supported; "
                                "only DFlashDraftModel checkpoints are");
    return make_error(source, ": architecture '", arch, "' is not a DFlash drafter (expected DFlashDraftModel)");
  }

  DFlashConfig c;
  SPLASH_TRY(int64_t n_embd, get_int(root, "hidden_size", source, false));
  SPLASH_TRY(int64_t n_layer, get_int(root, "num_hidden_layers", source, false));
  SPLASH_TRY(int64_t n_head, get_int(root, "num_attention_heads", source, false));
  SPLASH_TRY(int64_t n_head_kv, get_int(root, "num_key_value_heads", source, false, n_head));
  SPLASH_TRY(int64_t n_ff, get_int(root, "intermediate_size", source, false));
  SPLASH_TRY(int64_t n_vocab, get_int(root, "vocab_size", source, false));
  for (auto [v, name] : {std::pair{n_embd, "hidden_size"}, {n_layer, "num_hidden_layers"},
                         {n_head, "num_attention_heads"}, {n_head_kv, "num_key_value_heads"},
                         {n_ff, "intermediate_size"}, {n_vocab, "vocab_size"}}) {
    SPLASH_TRY_STATUS(positive(v, name, source));
  }
  if (n_head % n_head_kv != 0)
    return make_error(source, ": num_attention_heads ", n_head, " is not a multiple of num_key_value_heads ",
                      n_head_kv);
  SPLASH_TRY(int64_t head_dim, get_int(root, "head_dim", source, false, n_embd / n_head));
  SPLASH_TRY_STATUS(positive(head_dim, "head_dim", source));
  if (head_dim % 2 != 0) return make_error(source, ": head_dim ", head_dim, " must be even (RoPE pairs)");
  c.n_embd = static_cast<int>(n_embd);
  c.n_layer = static_cast<int>(n_layer);
  c.n_head = static_cast<int>(n_head);
  c.n_head_kv = static_cast<int>(n_head_kv);
  c.head_dim = static_cast<int>(head_dim);
  c.n_ff = static_cast<int>(n_ff);
  c.n_vocab = static_cast<int>(n_vocab);

  if (auto it = root.find("rms_norm_eps"); it != root.end() && it->is_number()) c.rms_eps = it->get<float>();
  double theta = 0;
  if (auto it = root.find("rope_theta"); it != root.end() && it->is_number()) theta = it->get<double>();
  if (auto rp = root.find("rope_parameters"); rp != root.end() && rp->is_object()) {
    if (auto it = rp->find("rope_theta"); it != rp->end() && it->is_number()) theta = it->get<double>();
    if (auto it = rp->find("rope_type"); it != rp->end() && it->is_string() && *it != "default")
      return make_error(source, ": rope_parameters.rope_type '", it->get<std::string>(), "' is not supported");
  }
  if (auto it = root.find("rope_scaling"); it != root.end() && !it->is_null())
    return make_error(source, ": rope_scaling is not supported for DFlash drafters");
  if (theta > 0) c.rope_theta = theta;
  SPLASH_TRY(c.max_position, get_int(root, "max_position_embeddings", source, false, int64_t{0}));
  if (auto it = root.find("attention_bias"); it != root.end() && it->is_boolean() && it->get<bool>())
    return make_error(source, ": attention_bias = true is not supported for DFlash drafters");

  SPLASH_TRY(int64_t block, get_int(root, "block_size", source, true, int64_t{16}));
  if (block < 2 || block > 64) return make_error(source, ": block_size ", block, " must be in [2, 64]");  // kDFlashMaxBlock
  c.block_size = static_cast<int>(block);
  SPLASH_TRY(int64_t mask, get_int(root, "mask_token_id", source, true));
  if (mask < 0 || mask >= n_vocab)
    return make_error(source, ": mask_token_id ", mask, " is outside the vocabulary [0, ", n_vocab, ")");
  c.mask_token_id = static_cast<int32_t>(mask);
  SPLASH_TRY(int64_t n_target, get_int(root, "num_target_layers", source, true, int64_t{0}));
  c.num_target_layers = static_cast<int>(n_target);

  const json* ids = draft_value(root, "target_layer_ids");
  if (ids == nullptr || !ids->is_array() || ids->empty())
    return make_error(source, ": dflash_config.target_layer_ids is missing (the target layers the drafter reads)");
  for (const auto& v : *ids) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || (n_target > 0 && v.get<int64_t>() >= n_target))
      return make_error(source, ": target_layer_ids entry ", v.dump(), " is not a layer index in [0, ",
                        n_target > 0 ? n_target : int64_t{1} << 30, ")");
    c.target_layer_ids.push_back(v.get<int>());
  }

  // Causality: the published loader makes a layer causal when `is_causal` says so or, absent that,
  // when it is a sliding-attention layer. Block rows attend to each other both ways here only.
  bool any_sliding = false;
  if (auto lt = root.find("layer_types"); lt != root.end() && lt->is_array()) {
    if (static_cast<int64_t>(lt->size()) != n_layer)
      return make_error(source, ": layer_types has ", lt->size(), " entries for ", n_layer, " layers");
    for (const auto& t : *lt) {
      if (!t.is_string() || (t != "full_attention" && t != "sliding_attention"))
        return make_error(source, ": layer_types entry ", t.dump(), " is not supported");
      any_sliding = any_sliding || t == "sliding_attention";
    }
  }
  bool causal = any_sliding;
  if (auto it = root.find("is_causal"); it != root.end() && it->is_boolean()) causal = it->get<bool>();
  if (causal)
    return make_error(source, ": causal draft attention (is_causal / sliding layers without is_causal: false) "
                              "is not supported; DFlash block rows attend to each other");
  if (any_sliding) {
    SPLASH_TRY(int64_t window, get_int(root, "sliding_window", source, false));
    SPLASH_TRY_STATUS(positive(window, "sliding_window", source));
    c.sliding_window = window;
  }

  SPLASH_TRY(double in_scale, get_float(root, "input_embedding_scale", source, 1.0));
  SPLASH_TRY(double out_mul, get_float(root, "output_multiplier", source, 1.0));
  SPLASH_TRY(double softcap, get_float(root, "final_logit_softcapping", source, 0.0));
  if (out_mul <= 0) return make_error(source, ": output_multiplier ", out_mul, " must be positive");
  c.input_embedding_scale = static_cast<float>(in_scale);
  c.output_multiplier = static_cast<float>(out_mul);
  c.final_logit_softcapping = softcap > 0 ? static_cast<float>(softcap) : 0.0f;
  return c;
}

Status check_dflash_target(const DFlashConfig& d, const ModelConfig& t, const std::string& src) {
  if (static_cast<uint32_t>(d.n_embd) != t.n_embd)
    return make_error(src, ": drafter hidden_size ", d.n_embd, " differs from the target's ", t.n_embd);
  if (d.num_target_layers > 0 && static_cast<uint32_t>(d.num_target_layers) != t.n_layer)
    return make_error(src, ": drafter was trained for a ", d.num_target_layers, "-layer target, this one has ",
                      t.n_layer, " layers");
  for (int il : d.target_layer_ids) {
    if (static_cast<uint32_t>(il) >= t.n_layer)
      return make_error(src, ": target_layer_ids entry ", il, " is past the target's ", t.n_layer, " layers");
  }
  if (static_cast<uint32_t>(d.mask_token_id) >= t.n_vocab)
    return make_error(src, ": mask_token_id ", d.mask_token_id, " is outside the target's vocabulary of ",
                      t.n_vocab);
  if (static_cast<uint32_t>(d.n_vocab) != t.n_vocab)
    return make_error(src, ": drafter vocab_size ", d.n_vocab, " differs from the target's ", t.n_vocab,
                      " (a drafter pairs with one tokenizer)");
  return {};
}

}  // namespace splash
