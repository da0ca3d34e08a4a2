#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "formats/hf_config.h"

namespace splash {
namespace {

// Abridged from the published config.json of TinyLlama-1.1B-Chat (llama architecture).
constexpr const char* kLlama = R"({
  "architectures": ["LlamaForCausalLM"], "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 5632, "max_position_embeddings": 2048,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 22, "num_key_value_heads": 4,
  "rms_norm_eps": 1e-05, "rope_scaling": null, "rope_theta": 10000.0, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "vocab_size": 32000})";

// Shaped like Qwen3-0.6B: head_dim (128) is not hidden/heads (64).
constexpr const char* kQwen3 = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "bos_token_id": 151643,
  "eos_token_id": 151645, "head_dim": 128, "hidden_size": 1024, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "num_attention_heads": 16, "num_hidden_layers": 28,
  "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_theta": 1000000, "tie_word_embeddings": true,
  "vocab_size": 151936})";

std::string error_of(const std::string& json) {
  auto r = parse_hf_config(json, "cfg/config.json");
  return r.ok() ? std::string("<ok>") : r.error_message();
}

TEST(HfConfig, Llama) {
  auto c = parse_hf_config(kLlama, "config.json");
  ASSERT_TRUE(c.ok()) << c.error_message();
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->n_vocab, 32000u);
  EXPECT_EQ(c->n_embd, 2048u);
  EXPECT_EQ(c->n_layer, 22u);
  EXPECT_EQ(c->n_head, 32u);
  EXPECT_EQ(c->n_head_kv, 4u);
  EXPECT_EQ(c->head_dim, 64u);
  EXPECT_EQ(c->n_ff, 5632u);
  EXPECT_EQ(c->max_position, 2048u);
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c->rope_theta, 10000.0f);
  EXPECT_EQ(c->rope_scaling.type, "");
  EXPECT_FALSE(c->tie_embeddings);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_TRUE(c->layer_kinds.empty());
  EXPECT_EQ(c->n_expert, 0u);
  EXPECT_EQ(c->bos_token_id, 1);
  EXPECT_EQ(c->eos_token_ids, std::vector<int32_t>{2});
}

TEST(HfConfig, Qwen2AndQwen3Flags) {
  auto q2 = parse_hf_config(R"({"architectures":["Qwen2ForCausalLM"],"vocab_size":151936,"hidden_size":896,
    "num_hidden_layers":24,"num_attention_heads":14,"num_key_value_heads":2,"intermediate_size":4864})",
                            "config.json");
  ASSERT_TRUE(q2.ok()) << q2.error_message();
  EXPECT_EQ(q2->architecture, "qwen2");
  EXPECT_TRUE(q2->attention_bias);
  EXPECT_EQ(q2->head_dim, 64u);
  EXPECT_FALSE(q2->qk_norm);

  auto q3 = parse_hf_config(kQwen3, "config.json");
  ASSERT_TRUE(q3.ok()) << q3.error_message();
  EXPECT_EQ(q3->architecture, "qwen3");
  EXPECT_EQ(q3->head_dim, 128u);
  EXPECT_TRUE(q3->qk_norm);
  EXPECT_FALSE(q3->attention_bias);
  EXPECT_TRUE(q3->tie_embeddings);
  EXPECT_FLOAT_EQ(q3->rope_theta, 1e6f);
}

TEST(HfConfig, Qwen3MoeLayersAndGenerationConfig) {
  auto c = parse_hf_config(R"({"architectures":["Qwen3MoeForCausalLM"],"vocab_size":151936,"hidden_size":2048,
    "num_hidden_layers":6,"num_attention_heads":32,"num_key_value_heads":4,"head_dim":128,"intermediate_size":6144,
    "num_experts":128,"num_experts_per_tok":8,"moe_intermediate_size":768,"norm_topk_prob":true,
    "decoder_sparse_step":1,"mlp_only_layers":[0,5],"eos_token_id":151645,
    "rope_scaling":{"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}})",
                           "config.json",
                           std::string_view(R"({"bos_token_id":151643,"eos_token_id":[151645,151643],
    "temperature":0.6,"top_p":0.95,"top_k":20,"do_sample":true})"));
  ASSERT_TRUE(c.ok()) << c.error_message();
  EXPECT_EQ(c->architecture, "qwen3_moe");
  EXPECT_EQ(c->n_expert, 128u);
  EXPECT_EQ(c->n_expert_used, 8u);
  EXPECT_EQ(c->n_ff_expert, 768u);
  EXPECT_EQ(c->moe_layer, (std::vector<bool>{false, true, true, true, true, false}));
  EXPECT_EQ(c->rope_scaling.type, "yarn");
  EXPECT_FLOAT_EQ(c->rope_scaling.factor, 4.0f);
  EXPECT_EQ(c->rope_scaling.original_max_position, 32768u);
  // generation_config.json wins over config.json.
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{151645, 151643}));
  EXPECT_EQ(c->bos_token_id, 151643);
  ASSERT_TRUE(c->default_temperature.has_value());
  EXPECT_FLOAT_EQ(*c->default_temperature, 0.6f);
  EXPECT_FLOAT_EQ(*c->default_top_p, 0.95f);
  EXPECT_EQ(*c->default_top_k, 20);
}

TEST(HfConfig, Qwen3NextUsesFullAttentionInterval) {
  auto c = parse_hf_config(R"({"architectures":["Qwen3NextForCausalLM"],"vocab_size":151936,"hidden_size":2048,
    "num_hidden_layers":8,"num_attention_heads":16,"num_key_value_heads":2,"head_dim":256,"intermediate_size":5120,
    "full_attention_interval":4,"linear_num_key_heads":16,"linear_key_head_dim":128,"linear_num_value_heads":32,
    "linear_value_head_dim":128,"linear_conv_kernel_dim":4,"num_experts":512,"num_experts_per_tok":10,
    "moe_intermediate_size":512,"shared_expert_intermediate_size":512,"partial_rotary_factor":0.25})",
                           "config.json");
  ASSERT_TRUE(c.ok()) << c.error_message();
  EXPECT_EQ(c->architecture, "qwen3_next");
  using K = LayerKind;
  EXPECT_EQ(c->layer_kinds, (std::vector<K>{K::kLinearAttention, K::kLinearAttention, K::kLinearAttention,
                                            K::kFullAttention, K::kLinearAttention, K::kLinearAttention,
                                            K::kLinearAttention, K::kFullAttention}));
  EXPECT_EQ(c->linear_n_value_heads, 32u);
  EXPECT_EQ(c->linear_conv_kernel, 4u);
  EXPECT_EQ(c->n_ff_shared_expert, 512u);
  EXPECT_TRUE(c->attn_output_gate);
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FLOAT_EQ(c->partial_rotary_factor, 0.25f);
  EXPECT_TRUE(c->moe_layer.empty());  // every layer MoE
}

TEST(HfConfig, Qwen35NestedTextConfigWithLayerTypes) {
  auto c = parse_hf_config(R"({"architectures":["Qwen3_5ForConditionalGeneration"],"model_type":"qwen3_5",
    "tie_word_embeddings":true,"vision_config":{"depth":2},
    "text_config":{"model_type":"qwen3_5_text","vocab_size":248320,"hidden_size":1024,"num_hidden_layers":4,
      "num_attention_heads":8,"num_key_value_heads":2,"head_dim":256,"intermediate_size":3584,
      "layer_types":["linear_attention","linear_attention","linear_attention","full_attention"],
      "linear_num_key_heads":16,"linear_key_head_dim":128,"linear_num_value_heads":16,"linear_value_head_dim":128,
      "rope_parameters":{"rope_type":"default","rope_theta":10000000,"partial_rotary_factor":0.25},
      "max_position_embeddings":262144,"mtp_num_hidden_layers":1,"eos_token_id":248044}})",
                           "config.json");
  ASSERT_TRUE(c.ok()) << c.error_message();
  EXPECT_EQ(c->architecture, "qwen3_5");
  EXPECT_EQ(c->n_vocab, 248320u);
  EXPECT_EQ(c->n_layer, 4u);
  EXPECT_TRUE(c->tie_embeddings);  // from the top level
  EXPECT_EQ(c->layer_kinds.size(), 4u);
  EXPECT_EQ(c->layer_kinds[3], LayerKind::kFullAttention);
  EXPECT_EQ(c->layer_kinds[0], LayerKind::kLinearAttention);
  EXPECT_FLOAT_EQ(c->rope_theta, 1e7f);
  EXPECT_EQ(c->rope_scaling.type, "");
  EXPECT_FLOAT_EQ(c->partial_rotary_factor, 0.25f);
  EXPECT_EQ(c->n_mtp_layers, 1u);
  EXPECT_EQ(c->max_position, 262144u);
  EXPECT_EQ(c->eos_token_ids, std::vector<int32_t>{248044});
}

TEST(HfConfig, Qwen35MropeSectionIsKeptForGguf) {
  // Qwen3.5's multimodal RoPE sections: no effect on text, but llama.cpp's qwen35 loader needs them.
  const std::string head = R"({"architectures":["Qwen3_5ForCausalLM"],"vocab_size":64,"hidden_size":64,
    "num_hidden_layers":4,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"intermediate_size":96,
    "linear_num_key_heads":2,"linear_key_head_dim":16,"linear_num_value_heads":4,"linear_value_head_dim":16,
    "rope_parameters":{"rope_theta":10000,"mrope_section":)";
  auto c = parse_hf_config(head + "[11,11,10]}}", "config.json");
  ASSERT_TRUE(c.ok()) << c.error_message();
  EXPECT_EQ(c->rope_sections, (std::vector<uint32_t>{11, 11, 10}));
  auto bad = parse_hf_config(head + "[11,-1]}}", "config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error_message().find("rope_parameters.mrope_section"), std::string::npos) << bad.error_message();
}

TEST(HfConfig, ErrorsNameKeyAndFile) {
  std::string e = error_of(R"({"architectures":["GPT2LMHeadModel"],"vocab_size":10})");
  EXPECT_NE(e.find("cfg/config.json"), std::string::npos);
  EXPECT_NE(e.find("GPT2LMHeadModel"), std::string::npos);
  EXPECT_NE(e.find("LlamaForCausalLM"), std::string::npos);  // lists the supported ones
  EXPECT_NE(e.find("Qwen3NextForCausalLM"), std::string::npos);

  e = error_of(R"({"architectures":["LlamaForCausalLM"],"vocab_size":10,"hidden_size":8,"num_attention_heads":2})");
  EXPECT_NE(e.find("missing required key 'num_hidden_layers'"), std::string::npos) << e;
  EXPECT_NE(e.find("cfg/config.json"), std::string::npos);

  e = error_of(R"({"architectures":["LlamaForCausalLM"],"vocab_size":"32000","hidden_size":8,"num_hidden_layers":1,
    "num_attention_heads":2})");
  EXPECT_NE(e.find("key 'vocab_size' must be a non-negative integer"), std::string::npos) << e;

  e = error_of(R"({"architectures":["LlamaForCausalLM"],"vocab_size":10,"hidden_size":8,"num_hidden_layers":1,
    "num_attention_heads":2,"rope_scaling":{"type":"linear","factor":"x"}})");
  EXPECT_NE(e.find("key 'rope_scaling.factor' must be a number"), std::string::npos) << e;

  e = error_of(R"({"architectures":["LlamaForCausalLM"],"vocab_size":10,"hidden_size":8,"num_hidden_layers":1,
    "num_attention_heads":2,"tie_word_embeddings":1})");
  EXPECT_NE(e.find("'tie_word_embeddings' must be true or false"), std::string::npos) << e;

  e = error_of(R"({"architectures":["LlamaForCausalLM"],"vocab_size":10,"hidden_size":8,"num_hidden_layers":1,
    "num_attention_heads":2,"num_key_value_heads":3})");
  EXPECT_NE(e.find("num_key_value_heads 3"), std::string::npos) << e;

  e = error_of(R"({"architectures":["Qwen3NextForCausalLM"],"vocab_size":10,"hidden_size":8,"num_hidden_layers":2,
    "num_attention_heads":2,"layer_types":["full_attention"]})");
  EXPECT_NE(e.find("'layer_types' has 1 entries"), std::string::npos) << e;

  e = error_of(R"({"architectures":["Qwen3NextForCausalLM"],"vocab_size":10,"hidden_size":8,"num_hidden_layers":2,
    "num_attention_heads":2,"layer_types":["full_attention","mamba"]})");
  EXPECT_NE(e.find("layer_types[1]"), std::string::npos) << e;

  e = error_of(R"({"architectures":["LlamaForCausalLM"],"vocab_size":10,"hidden_size":8,"num_hidden_layers":1,
    "num_attention_heads":2,"eos_token_id":[1,"x"]})");
  EXPECT_NE(e.find("'eos_token_id'"), std::string::npos) << e;

  EXPECT_NE(error_of("{not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("{}").find("'architectures'"), std::string::npos);
}

TEST(HfConfig, LoadsFromDirectory) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("splash_hfcfg_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << kLlama;
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id":[2,32000],"temperature":0.7})";
  auto c = load_hf_config(dir.string());
  ASSERT_TRUE(c.ok()) << c.error_message();
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{2, 32000}));
  EXPECT_FLOAT_EQ(*c->default_temperature, 0.7f);
  std::ofstream(dir / "generation_config.json") << R"({"temperature":"hot"})";
  auto bad = load_hf_config(dir.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error_message().find("generation_config.json"), std::string::npos);
  EXPECT_NE(bad.error_message().find("'temperature'"), std::string::npos);
  fs::remove_all(dir);
  EXPECT_FALSE(load_hf_config(dir.string()).ok());
}

}  // namespace
}  // namespace splash
