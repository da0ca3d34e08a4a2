#include "formats/hf_config.h"

#include <array>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "formats/architecture_facts.h"

namespace splash {

namespace {

using nlohmann::json;

// Typed, error-reporting access to one JSON object. A key holding null counts as absent (HF
// writes `"head_dim": null` for "use the default").
class Fields {
 public:
  // `prefix` names the enclosing object in messages ("rope_scaling." -> key 'rope_scaling.factor').
  Fields(const json& j, const std::string& source, std::string prefix = "")
      : j_(j), source_(source), prefix_(std::move(prefix)) {}

  const json* get(const char* key) const {
    auto it = j_.find(key);
    return (it == j_.end() || it->is_null()) ? nullptr : &*it;
  }
  bool has(const char* key) const { return get(key) != nullptr; }

  Result<uint32_t> u32(const char* key) const {
    const json* v = get(key);
    if (v == nullptr) return make_error(source_, ": missing required key '", prefix_, key, "'");
    return to_u32(*v, key);
  }
  Result<uint32_t> u32_or(const char* key, uint32_t def) const {
    const json* v = get(key);
    return v == nullptr ? Result<uint32_t>(def) : to_u32(*v, key);
  }
  Result<float> f32_or(const char* key, float def) const {
    const json* v = get(key);
    if (v == nullptr) return def;
    if (!v->is_number()) return type_error(key, "a number", *v);
    return v->get<float>();
  }
  Result<bool> bool_or(const char* key, bool def) const {
    const json* v = get(key);
    if (v == nullptr) return def;
    if (!v->is_boolean()) return type_error(key, "true or false", *v);
    return v->get<bool>();
  }
  Result<std::string> str_or(const char* key, const std::string& def) const {
    const json* v = get(key);
    if (v == nullptr) return def;
    if (!v->is_string()) return type_error(key, "a string", *v);
    return v->get<std::string>();
  }
  Error type_error(const std::string& key, const char* want, const json& got) const {
    std::string shown = got.dump();
    if (shown.size() > 60) shown = shown.substr(0, 60) + "...";
    return make_error(source_, ": key '", prefix_, key, "' must be ", want, " (got ", shown, ")");
  }
  const std::string& source() const { return source_; }

 private:
  Result<uint32_t> to_u32(const json& v, const char* key) const {
    if (!v.is_number_unsigned() || v.get<uint64_t>() > UINT32_MAX)
      return type_error(key, "a non-negative integer", v);
    return static_cast<uint32_t>(v.get<uint64_t>());
  }
  const json& j_;
  const std::string& source_;
  std::string prefix_;
};

Result<json> parse_object(std::string_view text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    return make_error(source, ": not valid JSON: ", e.what());
  }
  if (!j.is_object()) return make_error(source, ": not a JSON object");
  return j;
}

// Token ids: an int or a list of ints.
Result<std::vector<int32_t>> token_ids(const Fields& f, const char* key) {
  const json* v = f.get(key);
  std::vector<int32_t> out;
  if (v == nullptr) return out;
  auto one = [&](const json& x) -> Status {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX)
      return f.type_error(key, "a token id or a list of token ids", *v);
    out.push_back(static_cast<int32_t>(x.get<int64_t>()));
    return {};
  };
  if (v->is_array()) {
    for (const auto& x : *v) SPLASH_TRY_STATUS(one(x));
  } else {
    SPLASH_TRY_STATUS(one(*v));
  }
  return out;
}

// rope_scaling (transformers 4.x) and rope_parameters (5.x) share field names.
Status read_rope(const Fields& f, ModelConfig& c) {
  for (const char* key : {"rope_scaling", "rope_parameters"}) {
    const json* r = f.get(key);
    if (r == nullptr) continue;
    if (!r->is_object()) return f.type_error(key, "an object", *r);
    Fields rf(*r, f.source(), std::string(key) + ".");
    SPLASH_TRY(std::string t, rf.str_or("rope_type", ""));
    if (t.empty()) {
      SPLASH_TRY(t, rf.str_or("type", ""));
    }
    if (t != "default") c.rope_scaling.type = t;
    SPLASH_TRY(c.rope_scaling.factor, rf.f32_or("factor", c.rope_scaling.factor));
    SPLASH_TRY(c.rope_scaling.low_freq_factor, rf.f32_or("low_freq_factor", c.rope_scaling.low_freq_factor));
    SPLASH_TRY(c.rope_scaling.high_freq_factor, rf.f32_or("high_freq_factor", c.rope_scaling.high_freq_factor));
    SPLASH_TRY(c.rope_scaling.original_max_position,
               rf.u32_or("original_max_position_embeddings", c.rope_scaling.original_max_position));
    SPLASH_TRY(c.rope_theta, rf.f32_or("rope_theta", c.rope_theta));
    SPLASH_TRY(c.partial_rotary_factor, rf.f32_or("partial_rotary_factor", c.partial_rotary_factor));
    if (const json* m = rf.get("mrope_section")) {
      if (!m->is_array()) return rf.type_error("mrope_section", "a list of non-negative integers", *m);
      c.rope_sections.clear();
      for (const json& e : *m) {
        if (!e.is_number_unsigned() || e.get<uint64_t>() > UINT32_MAX)
          return rf.type_error("mrope_section", "a list of non-negative integers", *m);
        c.rope_sections.push_back(static_cast<uint32_t>(e.get<uint64_t>()));
      }
    }
  }
  return {};
}

Status read_layer_kinds(const Fields& f, const ArchitectureFacts& arch, ModelConfig& c) {
  const bool hybrid = arch.hybrid;
  if (const json* lt = f.get("layer_types")) {
    if (!lt->is_array()) return f.type_error("layer_types", "a list of layer type names", *lt);
    if (lt->size() != c.n_layer)
      return make_error(f.source(), ": key 'layer_types' has ", lt->size(), " entries but num_hidden_layers is ",
                        c.n_layer);
    std::vector<LayerKind> kinds;
    bool any_linear = false;
    for (size_t il = 0; il < lt->size(); ++il) {
      const json& e = (*lt)[il];
      if (e == "full_attention" || e == "sliding_attention") {
        kinds.push_back(LayerKind::kFullAttention);
      } else if (e == "linear_attention") {
        kinds.push_back(LayerKind::kLinearAttention);
        any_linear = true;
      } else {
        return f.type_error(str_cat("layer_types[", il, "]"), "\"full_attention\" or \"linear_attention\"", e);
      }
    }
    if (any_linear || hybrid) c.layer_kinds = std::move(kinds);
    return {};
  }
  if (!hybrid) return {};
  SPLASH_TRY(uint32_t interval, f.u32_or("full_attention_interval", 4));
  if (interval == 0) return make_error(f.source(), ": key 'full_attention_interval' must be at least 1");
  for (uint32_t il = 0; il < c.n_layer; ++il)
    c.layer_kinds.push_back((il + 1) % interval == 0 ? LayerKind::kFullAttention : LayerKind::kLinearAttention);
  return {};
}

Status read_moe(const Fields& f, ModelConfig& c) {
  SPLASH_TRY(c.n_expert, f.u32_or("num_experts", 0));
  if (c.n_expert == 0) return {};
  SPLASH_TRY(c.n_expert_used, f.u32("num_experts_per_tok"));
  SPLASH_TRY(c.n_ff_expert, f.u32("moe_intermediate_size"));
  SPLASH_TRY(c.n_ff_shared_expert, f.u32_or("shared_expert_intermediate_size", 0));
  SPLASH_TRY(c.norm_topk_prob, f.bool_or("norm_topk_prob", true));
  if (c.n_expert_used == 0 || c.n_expert_used > c.n_expert)
    return make_error(f.source(), ": num_experts_per_tok ", c.n_expert_used, " must be in [1, num_experts = ",
                      c.n_expert, "]");
  // qwen3_moe: MoE on layers where (il + 1) % decoder_sparse_step == 0 and il not in mlp_only_layers.
  SPLASH_TRY(uint32_t step, f.u32_or("decoder_sparse_step", 1));
  std::vector<bool> moe(c.n_layer, true);
  bool any_dense = false;
  for (uint32_t il = 0; il < c.n_layer; ++il) {
    moe[il] = step != 0 && (il + 1) % step == 0;
    any_dense |= !moe[il];
  }
  if (const json* only = f.get("mlp_only_layers")) {
    if (!only->is_array()) return f.type_error("mlp_only_layers", "a list of layer indices", *only);
    for (const auto& x : *only) {
      if (!x.is_number_unsigned() || x.get<uint64_t>() >= c.n_layer)
        return f.type_error("mlp_only_layers", "a list of layer indices below num_hidden_layers", *only);
      moe[x.get<size_t>()] = false;
      any_dense = true;
    }
  }
  if (any_dense) c.moe_layer = std::move(moe);
  return {};
}

Status read_generation(const json& g, const std::string& source, ModelConfig& c) {
  Fields f(g, source);
  if (f.has("bos_token_id")) {
    SPLASH_TRY(auto bos, token_ids(f, "bos_token_id"));
    if (bos.size() != 1) return f.type_error("bos_token_id", "one token id", *f.get("bos_token_id"));
    c.bos_token_id = bos[0];
  }
  if (f.has("eos_token_id")) {
    SPLASH_TRY(c.eos_token_ids, token_ids(f, "eos_token_id"));
  }
  if (f.has("temperature")) {
    SPLASH_TRY(float t, f.f32_or("temperature", 1.0f));
    c.default_temperature = t;
  }
  if (f.has("top_p")) {
    SPLASH_TRY(float p, f.f32_or("top_p", 1.0f));
    c.default_top_p = p;
  }
  if (f.has("top_k")) {
    SPLASH_TRY(uint32_t k, f.u32_or("top_k", 0));
    c.default_top_k = static_cast<int32_t>(std::min<uint32_t>(k, INT32_MAX));
  }
  return {};
}

}  // namespace

std::string hf_supported_architectures() {
  std::string s;
  for (const ArchitectureFacts& a : all_architecture_facts())
    for (std::string_view cls : a.hf_classes) {
      if (!s.empty()) s += ", ";
      s += cls;
    }
  return s;
}

Result<ModelConfig> parse_hf_config(std::string_view config_json, const std::string& config_source,
                                    std::optional<std::string_view> generation_json,
                                    const std::string& generation_source) {
  SPLASH_TRY(json top, parse_object(config_json, config_source));

  // Architecture from the top level.
  const ArchitectureFacts* facts = nullptr;
  auto archs = top.find("architectures");
  if (archs == top.end() || !archs->is_array() || archs->empty())
    return make_error(config_source, ": key 'architectures' must be a non-empty list (supported: ",
                      hf_supported_architectures(), ")");
  std::string names;
  for (const auto& a : *archs) {
    if (!a.is_string()) return make_error(config_source, ": key 'architectures' must hold strings");
    if (facts == nullptr) facts = architecture_facts_for_hf_class(a.get_ref<const std::string&>());
    names += (names.empty() ? "" : ", ") + a.get<std::string>();
  }
  if (facts == nullptr)
    return make_error(config_source, ": unsupported architecture ", names, " (supported: ",
                      hf_supported_architectures(), ")");

  // Text config overlays the top level: multimodal wrappers keep tie_word_embeddings etc. outside.
  json merged = top;
  if (auto tc = top.find("text_config"); tc != top.end() && !tc->is_null()) {
    if (!tc->is_object()) return make_error(config_source, ": key 'text_config' must be an object");
    for (const auto& [k, v] : tc->items()) merged[k] = v;
  }
  Fields f(merged, config_source);
  ModelConfig c;
  c.architecture = std::string(facts->name);
  SPLASH_TRY(c.n_vocab, f.u32("vocab_size"));
  SPLASH_TRY(c.n_embd, f.u32("hidden_size"));
  SPLASH_TRY(c.n_layer, f.u32("num_hidden_layers"));
  SPLASH_TRY(c.n_head, f.u32("num_attention_heads"));
  if (c.n_vocab == 0 || c.n_embd == 0 || c.n_layer == 0 || c.n_head == 0)
    return make_error(config_source, ": vocab_size, hidden_size, num_hidden_layers and num_attention_heads must be > 0");
  SPLASH_TRY(c.n_head_kv, f.u32_or("num_key_value_heads", c.n_head));
  if (c.n_head_kv == 0 || c.n_head % c.n_head_kv != 0)
    return make_error(config_source, ": num_key_value_heads ", c.n_head_kv, " must divide num_attention_heads ",
                      c.n_head);
  if (!f.has("head_dim") && c.n_embd % c.n_head != 0)
    return make_error(config_source, ": hidden_size ", c.n_embd, " is not a multiple of num_attention_heads ",
                      c.n_head, " and no head_dim is given");
  SPLASH_TRY(c.head_dim, f.u32_or("head_dim", c.n_embd / c.n_head));
  if (c.head_dim == 0) return make_error(config_source, ": key 'head_dim' must be > 0");
  SPLASH_TRY(c.n_ff, f.u32_or("intermediate_size", 0));
  SPLASH_TRY(c.max_position, f.u32_or("max_position_embeddings", 0));
  SPLASH_TRY(c.rms_eps, f.f32_or("rms_norm_eps", 1e-6f));
  SPLASH_TRY(c.rope_theta, f.f32_or("rope_theta", 10000.0f));
  const ArchitectureFacts& arch = *facts;
  SPLASH_TRY(c.partial_rotary_factor, f.f32_or("partial_rotary_factor", arch.partial_rotary_factor));
  SPLASH_TRY_STATUS(read_rope(f, c));
  if (!(c.partial_rotary_factor > 0.0f && c.partial_rotary_factor <= 1.0f))
    return make_error(config_source, ": partial_rotary_factor ", c.partial_rotary_factor, " must be in (0, 1]");
  SPLASH_TRY(c.tie_embeddings, f.bool_or("tie_word_embeddings", false));
  SPLASH_TRY(c.attention_bias, f.bool_or("attention_bias", arch.attention_bias));
  c.qk_norm = arch.qk_norm;
  SPLASH_TRY(c.attn_output_gate, f.bool_or("attn_output_gate", arch.hybrid));

  SPLASH_TRY_STATUS(read_moe(f, c));
  SPLASH_TRY_STATUS(read_layer_kinds(f, arch, c));
  if (!c.layer_kinds.empty()) {
    SPLASH_TRY(c.linear_n_key_heads, f.u32_or("linear_num_key_heads", 0));
    SPLASH_TRY(c.linear_key_head_dim, f.u32_or("linear_key_head_dim", 0));
    SPLASH_TRY(c.linear_n_value_heads, f.u32_or("linear_num_value_heads", 0));
    SPLASH_TRY(c.linear_value_head_dim, f.u32_or("linear_value_head_dim", 0));
    SPLASH_TRY(c.linear_conv_kernel, f.u32_or("linear_conv_kernel_dim", 4));
    bool any_linear = false;
    for (auto k : c.layer_kinds) any_linear |= k == LayerKind::kLinearAttention;
    if (any_linear && (c.linear_n_key_heads == 0 || c.linear_key_head_dim == 0 || c.linear_n_value_heads == 0 ||
                       c.linear_value_head_dim == 0))
      return make_error(config_source, ": linear-attention layers need linear_num_key_heads, linear_key_head_dim, ",
                        "linear_num_value_heads and linear_value_head_dim");
  }
  if (f.has("mtp_num_hidden_layers")) {
    SPLASH_TRY(c.n_mtp_layers, f.u32("mtp_num_hidden_layers"));
  } else {
    SPLASH_TRY(c.n_mtp_layers, f.u32_or("num_nextn_predict_layers", 0));
  }

  // Special tokens: config.json first (text_config over top level), generation_config.json wins.
  SPLASH_TRY_STATUS(read_generation(json{{"bos_token_id", merged.value("bos_token_id", json())},
                                         {"eos_token_id", merged.value("eos_token_id", json())}},
                                    config_source, c));
  if (generation_json) {
    SPLASH_TRY(json g, parse_object(*generation_json, generation_source));
    SPLASH_TRY_STATUS(read_generation(g, generation_source, c));
  }
  return c;
}

Result<ModelConfig> load_hf_config(const std::string& dir) {
  namespace fs = std::filesystem;
  std::string cpath = (fs::path(dir) / "config.json").string();
  SPLASH_TRY(auto text, read_text_file(cpath));
  std::string gpath = (fs::path(dir) / "generation_config.json").string();
  std::error_code ec;
  if (fs::exists(gpath, ec)) {
    SPLASH_TRY(auto gtext, read_text_file(gpath));
    return parse_hf_config(text, cpath, std::string_view(gtext), gpath);
  }
  return parse_hf_config(text, cpath);
}

}  // namespace splash
