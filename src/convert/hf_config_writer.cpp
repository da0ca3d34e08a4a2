#include "convert/hf_config_writer.h"

#include "formats/architecture_facts.h"

namespace splash {

Result<nlohmann::json> hf_config_json(const ModelConfig& c) {
  const ArchitectureFacts& arch = architecture_facts(c.architecture);
  const bool moe = c.n_expert > 0;
  if (arch.hf_classes.empty()) {
    std::string known;
    for (const ArchitectureFacts& a : all_architecture_facts())
      if (!a.hf_classes.empty()) known += str_cat(known.empty() ? "" : ", ", a.name);
    return make_error("cannot write config.json for architecture '", c.architecture, "' yet (supported: ", known, ")");
  }
  nlohmann::json j;
  j["architectures"] = {std::string(hf_class_of(arch, moe))};  // the text model's; wrapped below
  j["model_type"] = std::string(moe && !arch.hf_moe_model_type.empty() ? arch.hf_moe_model_type : arch.hf_model_type);
  j["vocab_size"] = c.n_vocab;
  j["hidden_size"] = c.n_embd;
  j["intermediate_size"] = c.n_ff;
  j["num_hidden_layers"] = c.n_layer;
  j["num_attention_heads"] = c.n_head;
  j["num_key_value_heads"] = c.n_head_kv;
  j["head_dim"] = c.head_dim;
  j["max_position_embeddings"] = c.max_position;
  j["rms_norm_eps"] = c.rms_eps;
  j["rope_theta"] = c.rope_theta;
  j["tie_word_embeddings"] = c.tie_embeddings;
  j["hidden_act"] = "silu";
  if (arch.hf_bias_keys) {
    j["attention_bias"] = c.attention_bias;
    j["mlp_bias"] = false;
  }
  if (c.n_expert > 0) {
    j["num_experts"] = c.n_expert;
    j["num_experts_per_tok"] = c.n_expert_used;
    j["moe_intermediate_size"] = c.n_ff_expert;
    j["norm_topk_prob"] = c.norm_topk_prob;
    j["decoder_sparse_step"] = 1;
    nlohmann::json dense = nlohmann::json::array();
    for (size_t il = 0; il < c.moe_layer.size(); ++il)
      if (!c.moe_layer[il]) dense.push_back(il);
    j["mlp_only_layers"] = dense;
    if (c.n_ff_shared_expert > 0) j["shared_expert_intermediate_size"] = c.n_ff_shared_expert;
  }
  if (!c.layer_kinds.empty()) {  // hybrid Gated-DeltaNet models
    nlohmann::json kinds = nlohmann::json::array();
    for (LayerKind k : c.layer_kinds) kinds.push_back(k == LayerKind::kLinearAttention ? "linear_attention" : "full_attention");
    j["layer_types"] = kinds;
    // mlx-lm's qwen3_next reads only the interval: write it when the layers follow one.
    for (uint32_t n = 1; n <= c.layer_kinds.size(); ++n) {
      bool fits = true;
      for (size_t il = 0; il < c.layer_kinds.size(); ++il)
        fits &= (c.layer_kinds[il] == LayerKind::kFullAttention) == ((il + 1) % n == 0);
      if (fits) {
        j["full_attention_interval"] = n;
        break;
      }
    }
    j["linear_num_key_heads"] = c.linear_n_key_heads;
    j["linear_key_head_dim"] = c.linear_key_head_dim;
    j["linear_num_value_heads"] = c.linear_n_value_heads;
    j["linear_value_head_dim"] = c.linear_value_head_dim;
    j["linear_conv_kernel_dim"] = c.linear_conv_kernel;
    j["partial_rotary_factor"] = c.partial_rotary_factor;
    j["attn_output_gate"] = c.attn_output_gate;
    j["attention_bias"] = false;
    if (c.n_expert == 0 && arch.hf_moe_keys_always) {  // mlx-lm's ModelArgs requires these
      j["num_experts"] = 0;
      j["num_experts_per_tok"] = 0;
      j["decoder_sparse_step"] = 1;
      j["mlp_only_layers"] = nlohmann::json::array();
      j["moe_intermediate_size"] = 0;
      j["shared_expert_intermediate_size"] = 0;
    }
  }
  if (!c.rope_scaling.type.empty()) {
    nlohmann::json rs = {{"type", c.rope_scaling.type}, {"rope_type", c.rope_scaling.type}, {"factor", c.rope_scaling.factor}};
    if (c.rope_scaling.original_max_position > 0)
      rs["original_max_position_embeddings"] = c.rope_scaling.original_max_position;
    if (c.rope_scaling.low_freq_factor > 0) rs["low_freq_factor"] = c.rope_scaling.low_freq_factor;
    if (c.rope_scaling.high_freq_factor > 0) rs["high_freq_factor"] = c.rope_scaling.high_freq_factor;
    j["rope_scaling"] = rs;
  } else {
    j["rope_scaling"] = nullptr;
  }
  if (c.bos_token_id) j["bos_token_id"] = *c.bos_token_id;
  if (c.eos_token_ids.size() == 1) j["eos_token_id"] = c.eos_token_ids[0];
  else if (!c.eos_token_ids.empty()) j["eos_token_id"] = c.eos_token_ids;
  j["torch_dtype"] = "float32";
  if (!arch.hf_wrapper_class.empty()) {
    // Shipped as a multimodal class whose config nests the text model's under text_config
    // (transformers' and mlx-lm's folders both carry it so); the text weights sit under
    // model.language_model.* / language_model.model.* accordingly (convert/safetensors_layout.cpp).
    j.erase("architectures");
    nlohmann::json top;
    top["architectures"] = {std::string(moe ? arch.hf_moe_wrapper_class : arch.hf_wrapper_class)};
    top["model_type"] = std::string(moe ? arch.hf_moe_wrapper_model_type : arch.hf_wrapper_model_type);
    top["tie_word_embeddings"] = c.tie_embeddings;
    for (const char* k : {"bos_token_id", "eos_token_id"})
      if (j.contains(k)) top[k] = j[k];
    top["text_config"] = std::move(j);
    return top;
  }
  return j;
}

nlohmann::json hf_generation_config_json(const ModelConfig& c) {
  nlohmann::json j = nlohmann::json::object();
  if (c.bos_token_id) j["bos_token_id"] = *c.bos_token_id;
  if (c.eos_token_ids.size() == 1) j["eos_token_id"] = c.eos_token_ids[0];
  else if (!c.eos_token_ids.empty()) j["eos_token_id"] = c.eos_token_ids;
  if (c.default_temperature) j["temperature"] = *c.default_temperature;
  if (c.default_top_p) j["top_p"] = *c.default_top_p;
  if (c.default_top_k) j["top_k"] = *c.default_top_k;
  return j;
}

}  // namespace splash
