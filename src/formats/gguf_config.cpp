#include "formats/gguf_config.h"

#include "formats/architecture_facts.h"

namespace splash {

namespace {

std::string supported_list() {
  std::string s;
  for (const ArchitectureFacts& a : all_architecture_facts()) {
    if (a.gguf_name.empty()) continue;
    s += str_cat(s.empty() ? "" : ", ", a.gguf_name);
    if (!a.gguf_moe_name.empty()) s += str_cat(", ", a.gguf_moe_name);
  }
  return s;
}

// Optional integer key: keeps `out` when absent, errors when present with the wrong type.
Status opt_u32(const gguf::GgufFile& f, const std::string& key, uint32_t& out) {
  if (!f.has(key)) return {};
  SPLASH_TRY(out, f.get_u32(key));
  return {};
}
Status opt_f32(const gguf::GgufFile& f, const std::string& key, float& out) {
  if (!f.has(key)) return {};
  SPLASH_TRY(out, f.get_f32(key));
  return {};
}

}  // namespace

std::optional<gguf::Value> gguf_rope_sections(const std::string& gguf_arch, const std::vector<uint32_t>& sections) {
  const ArchitectureFacts* a = architecture_facts_for_gguf(gguf_arch);
  if (a == nullptr || !a->gguf_rope_sections) return std::nullopt;
  std::vector<int64_t> v(sections.begin(), sections.end());
  if (v.empty()) v = {11, 11, 10};
  v.resize(4, 0);
  return gguf::Value::array_of_ints(gguf::ValueType::kI32, std::move(v));
}

Result<std::string> gguf_arch_name(const std::string& architecture, bool moe) {
  const ArchitectureFacts& a = architecture_facts(architecture);
  if (!a.gguf_name.empty()) return std::string(gguf_arch_name_of(a, moe));
  return make_error("architecture '", architecture, "' has no GGUF name (supported: ", supported_list(), ")");
}

Result<std::string> architecture_from_gguf_arch(const std::string& gguf_arch, const std::string& source) {
  if (const ArchitectureFacts* a = architecture_facts_for_gguf(gguf_arch)) return std::string(a->name);
  return make_error(source, ": general.architecture '", gguf_arch, "' is not supported (supported: ",
                    supported_list(), ")");
}

Result<ModelConfig> model_config_from_gguf(const gguf::GgufFile& f) {
  SPLASH_TRY(std::string arch, f.get_string("general.architecture"));
  SPLASH_TRY(std::string ours, architecture_from_gguf_arch(arch, f.source()));
  ModelConfig c;
  c.architecture = ours;
  const std::string p = arch + ".";
  SPLASH_TRY(c.n_embd, f.get_u32(p + "embedding_length"));
  SPLASH_TRY(c.n_layer, f.get_u32(p + "block_count"));
  SPLASH_TRY(c.n_head, f.get_u32(p + "attention.head_count"));
  c.n_head_kv = c.n_head;
  SPLASH_TRY_STATUS(opt_u32(f, p + "attention.head_count_kv", c.n_head_kv));
  SPLASH_TRY_STATUS(opt_u32(f, p + "feed_forward_length", c.n_ff));
  SPLASH_TRY_STATUS(opt_u32(f, p + "context_length", c.max_position));
  SPLASH_TRY_STATUS(opt_f32(f, p + "attention.layer_norm_rms_epsilon", c.rms_eps));
  SPLASH_TRY_STATUS(opt_f32(f, p + "rope.freq_base", c.rope_theta));
  if (c.n_head == 0 || c.n_embd == 0 || c.n_layer == 0)
    return make_error(f.source(), ": ", p, "embedding_length, block_count and attention.head_count must be non-zero");
  if (c.n_head_kv == 0 || c.n_head % c.n_head_kv != 0)
    return make_error(f.source(), ": ", p, "attention.head_count_kv (", c.n_head_kv,
                      ") must divide attention.head_count (", c.n_head, ")");
  c.head_dim = c.n_embd / c.n_head;
  SPLASH_TRY_STATUS(opt_u32(f, p + "attention.key_length", c.head_dim));
  uint32_t rope_dims = c.head_dim;
  SPLASH_TRY_STATUS(opt_u32(f, p + "rope.dimension_count", rope_dims));
  if (c.head_dim == 0 || rope_dims > c.head_dim)
    return make_error(f.source(), ": ", p, "rope.dimension_count (", rope_dims, ") exceeds the head size (", c.head_dim, ")");
  c.partial_rotary_factor = static_cast<float>(rope_dims) / static_cast<float>(c.head_dim);
  if (f.has(p + "rope.dimension_sections")) {
    SPLASH_TRY(auto sections, f.get_i32_array(p + "rope.dimension_sections"));
    for (int32_t s : sections) {
      if (s < 0) return make_error(f.source(), ": ", p, "rope.dimension_sections has a negative entry (", s, ")");
      c.rope_sections.push_back(static_cast<uint32_t>(s));
    }
  }
  if (f.has(p + "rope.scaling.type")) {
    SPLASH_TRY(c.rope_scaling.type, f.get_string(p + "rope.scaling.type"));
    if (c.rope_scaling.type == "none") c.rope_scaling.type.clear();
    SPLASH_TRY_STATUS(opt_f32(f, p + "rope.scaling.factor", c.rope_scaling.factor));
    SPLASH_TRY_STATUS(opt_u32(f, p + "rope.scaling.original_context_length", c.rope_scaling.original_max_position));
  }
  SPLASH_TRY_STATUS(opt_u32(f, p + "expert_count", c.n_expert));
  SPLASH_TRY_STATUS(opt_u32(f, p + "expert_used_count", c.n_expert_used));
  SPLASH_TRY_STATUS(opt_u32(f, p + "expert_feed_forward_length", c.n_ff_expert));
  SPLASH_TRY_STATUS(opt_u32(f, p + "expert_shared_feed_forward_length", c.n_ff_shared_expert));
  SPLASH_TRY_STATUS(opt_u32(f, p + "nextn_predict_layers", c.n_mtp_layers));
  // llama.cpp counts MTP (nextn) blocks in block_count and stores them after the model's layers
  // (blk.<n_layer>.nextn.eh_proj ...): the model's own layers are the first block_count - nextn.
  if (c.n_mtp_layers > 0 && c.n_mtp_layers < c.n_layer &&
      f.find_tensor(str_cat("blk.", c.n_layer - c.n_mtp_layers, ".nextn.eh_proj.weight")) != nullptr)
    c.n_layer -= c.n_mtp_layers;
  if (c.n_expert > 0) {
    // llama.cpp's key; its qwen3moe graph always renormalizes the top-k weights.
    if (f.has(p + "expert_weights_norm")) {
      SPLASH_TRY(c.norm_topk_prob, f.get_bool(p + "expert_weights_norm"));
    }
    // Which layers are sparse is implicit in GGUF: a layer without a router is a dense MLP.
    std::vector<bool> moe(c.n_layer);
    bool any_dense = false;
    for (uint32_t il = 0; il < c.n_layer; ++il) {
      moe[il] = f.find_tensor(str_cat("blk.", il, ".ffn_gate_inp.weight")) != nullptr;
      any_dense |= !moe[il];
    }
    if (any_dense) c.moe_layer = std::move(moe);
  }
  if (architecture_facts(ours).hybrid) {
    // Hybrid Gated DeltaNet: llama.cpp's ssm.* keys (state_size = key head dim, group_count = key
    // heads, time_step_rank = value heads, inner_size = value heads x value head dim).
    uint32_t interval = 4, inner = 0;
    SPLASH_TRY_STATUS(opt_u32(f, p + "full_attention_interval", interval));
    if (interval == 0) return make_error(f.source(), ": ", p, "full_attention_interval must be at least 1");
    for (uint32_t il = 0; il < c.n_layer; ++il)
      c.layer_kinds.push_back((il + 1) % interval == 0 ? LayerKind::kFullAttention : LayerKind::kLinearAttention);
    SPLASH_TRY(c.linear_key_head_dim, f.get_u32(p + "ssm.state_size"));
    SPLASH_TRY(c.linear_n_key_heads, f.get_u32(p + "ssm.group_count"));
    SPLASH_TRY(c.linear_n_value_heads, f.get_u32(p + "ssm.time_step_rank"));
    SPLASH_TRY(inner, f.get_u32(p + "ssm.inner_size"));
    SPLASH_TRY(c.linear_conv_kernel, f.get_u32(p + "ssm.conv_kernel"));
    if (c.linear_n_value_heads == 0 || inner % c.linear_n_value_heads != 0)
      return make_error(f.source(), ": ", p, "ssm.inner_size ", inner, " is not a multiple of ssm.time_step_rank ",
                        c.linear_n_value_heads);
    c.linear_value_head_dim = inner / c.linear_n_value_heads;
    c.attn_output_gate = true;
  }

  // Vocabulary size: the explicit key, else the token list, else the embedding's row count.
  if (f.has(p + "vocab_size")) {
    SPLASH_TRY(c.n_vocab, f.get_u32(p + "vocab_size"));
  } else if (f.has("tokenizer.ggml.tokens")) {
    SPLASH_TRY(auto tokens, f.get_string_array("tokenizer.ggml.tokens"));
    c.n_vocab = static_cast<uint32_t>(tokens.size());
  } else if (const auto* emb = f.find_tensor("token_embd.weight"); emb != nullptr && emb->shape.size() == 2) {
    c.n_vocab = static_cast<uint32_t>(emb->shape[1]);
  }
  if (c.n_vocab == 0) return make_error(f.source(), ": cannot tell the vocabulary size (no ", p, "vocab_size, tokens or token_embd.weight)");

  // Structure the metadata leaves implicit is read off the tensors present.
  c.tie_embeddings = f.find_tensor("output.weight") == nullptr;
  c.attention_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.qk_norm = f.find_tensor("blk.0.attn_q_norm.weight") != nullptr;

  if (f.has("tokenizer.ggml.bos_token_id")) {
    SPLASH_TRY(int32_t bos, f.get_i32("tokenizer.ggml.bos_token_id"));
    c.bos_token_id = bos;
  }
  if (f.has("tokenizer.ggml.eos_token_id")) {
    SPLASH_TRY(int32_t eos, f.get_i32("tokenizer.ggml.eos_token_id"));
    c.eos_token_ids.push_back(eos);
  }
  if (f.has("tokenizer.ggml.eot_token_id")) {
    SPLASH_TRY(int32_t eot, f.get_i32("tokenizer.ggml.eot_token_id"));
    if (c.eos_token_ids.empty() || c.eos_token_ids[0] != eot) c.eos_token_ids.push_back(eot);
  }
  return c;
}

Result<std::vector<std::pair<std::string, gguf::Value>>> gguf_metadata_for(const ModelConfig& c) {
  SPLASH_TRY(const std::string arch, gguf_arch_name(c.architecture, c.n_expert > 0));
  using gguf::Value;
  std::vector<std::pair<std::string, Value>> kv;
  const std::string p = arch + ".";
  kv.emplace_back("general.architecture", Value::from_string(arch));
  kv.emplace_back(p + "vocab_size", Value::from_u32(c.n_vocab));
  kv.emplace_back(p + "context_length", Value::from_u32(c.max_position));
  kv.emplace_back(p + "embedding_length", Value::from_u32(c.n_embd));
  kv.emplace_back(p + "block_count", Value::from_u32(c.n_layer));
  kv.emplace_back(p + "feed_forward_length", Value::from_u32(c.n_ff));
  kv.emplace_back(p + "attention.head_count", Value::from_u32(c.n_head));
  kv.emplace_back(p + "attention.head_count_kv", Value::from_u32(c.n_head_kv));
  kv.emplace_back(p + "attention.key_length", Value::from_u32(c.head_dim));
  kv.emplace_back(p + "attention.value_length", Value::from_u32(c.head_dim));
  kv.emplace_back(p + "attention.layer_norm_rms_epsilon", Value::from_f32(c.rms_eps));
  kv.emplace_back(p + "rope.freq_base", Value::from_f32(c.rope_theta));
  kv.emplace_back(p + "rope.dimension_count",
                  Value::from_u32(static_cast<uint32_t>(static_cast<float>(c.head_dim) * c.partial_rotary_factor + 0.5f)));
  if (auto sections = gguf_rope_sections(arch, c.rope_sections)) kv.emplace_back(p + "rope.dimension_sections", std::move(*sections));
  if (!c.rope_scaling.type.empty()) {
    kv.emplace_back(p + "rope.scaling.type", Value::from_string(c.rope_scaling.type));
    kv.emplace_back(p + "rope.scaling.factor", Value::from_f32(c.rope_scaling.factor));
    if (c.rope_scaling.original_max_position > 0)
      kv.emplace_back(p + "rope.scaling.original_context_length", Value::from_u32(c.rope_scaling.original_max_position));
  }
  if (c.n_expert > 0) {
    kv.emplace_back(p + "expert_count", Value::from_u32(c.n_expert));
    kv.emplace_back(p + "expert_used_count", Value::from_u32(c.n_expert_used));
    kv.emplace_back(p + "expert_feed_forward_length", Value::from_u32(c.n_ff_expert));
    if (c.n_ff_shared_expert > 0)
      kv.emplace_back(p + "expert_shared_feed_forward_length", Value::from_u32(c.n_ff_shared_expert));
    kv.emplace_back(p + "expert_weights_norm", Value::from_bool(c.norm_topk_prob));
  }
  if (!c.layer_kinds.empty()) {  // hybrid Gated DeltaNet: the keys the reader above takes
    uint32_t interval = 0;  // GGUF says which layers are full attention only by an interval
    for (uint32_t n = 1; n <= c.layer_kinds.size() && interval == 0; ++n) {
      bool fits = true;
      for (size_t il = 0; il < c.layer_kinds.size(); ++il)
        fits &= (c.layer_kinds[il] == LayerKind::kFullAttention) == ((il + 1) % n == 0);
      if (fits) interval = n;
    }
    if (interval == 0) return make_error(arch, ": the layer types follow no full_attention_interval, which GGUF needs");
    kv.emplace_back(p + "full_attention_interval", Value::from_u32(interval));
    kv.emplace_back(p + "ssm.conv_kernel", Value::from_u32(c.linear_conv_kernel));
    kv.emplace_back(p + "ssm.state_size", Value::from_u32(c.linear_key_head_dim));
    kv.emplace_back(p + "ssm.group_count", Value::from_u32(c.linear_n_key_heads));
    kv.emplace_back(p + "ssm.time_step_rank", Value::from_u32(c.linear_n_value_heads));
    kv.emplace_back(p + "ssm.inner_size", Value::from_u32(c.linear_n_value_heads * c.linear_value_head_dim));
  }
  return kv;
}

}  // namespace splash
