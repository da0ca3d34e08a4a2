#include "convert/hf_config_writer.h"

namespace splash {

Result<nlohmann::json> hf_config_json(const ModelConfig& c) {
  const char* arch = nullptr;
  if (c.architecture == "llama") arch = "LlamaForCausalLM";
  else if (c.architecture == "qwen2") arch = "Qwen2ForCausalLM";
  else if (c.architecture == "qwen3") arch = "Qwen3ForCausalLM";
  else if (c.architecture == "qwen3_moe") arch = "Qwen3MoeForCausalLM";
  else if (c.architecture == "qwen3_next") arch = "Qwen3NextForCausalLM";
  else if (c.architecture == "qwen3_5") arch = "Qwen3_5ForCausalLM";  // the text model; wrapped below
  else return make_error("cannot write config.json for architecture '", c.architecture,
                         "' yet (supported: llama, qwen2, qwen3, qwen3_moe, qwen3_next, qwen3_5)");
  nlohmann::json j;
  j["architectures"] = {arch};
  j["model_type"] = c.architecture;
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
  if (c.architecture == "llama") {
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
    if (c.n_expert == 0 && c.architecture == "qwen3_next") {  // mlx-lm's ModelArgs requires these
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
  if (c.architecture == "qwen3_5") {
    // Qwen3.5 ships as a multimodal class whose config nests the text model's under text_config
    // (transformers' and mlx-lm's folders both carry it so); the text weights sit under
    // model.language_model.* / language_model.model.* accordingly (convert/safetensors_layout.cpp).
    const bool moe = c.n_expert > 0;
    j["model_type"] = moe ? "qwen3_5_moe_text" : "qwen3_5_text";
    j.erase("architectures");
    nlohmann::json top;
    top["architectures"] = {moe ? "Qwen3_5MoeForConditionalGeneration" : "Qwen3_5ForConditionalGeneration"};
    top["model_type"] = moe ? "qwen3_5_moe" : "qwen3_5";
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
