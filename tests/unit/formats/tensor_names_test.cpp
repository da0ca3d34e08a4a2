#include <gtest/gtest.h>

#include <vector>

#include "formats/tensor_names.h"

namespace splash {
namespace {

TEST(TensorNames, MapsBothWays) {
  EXPECT_EQ(*hf_to_gguf_name("model.layers.12.self_attn.q_proj.weight"), "blk.12.attn_q.weight");
  EXPECT_EQ(*hf_to_gguf_name("model.layers.0.self_attn.k_proj.bias"), "blk.0.attn_k.bias");
  EXPECT_EQ(*hf_to_gguf_name("model.layers.3.mlp.down_proj.weight"), "blk.3.ffn_down.weight");
  EXPECT_EQ(*hf_to_gguf_name("model.layers.3.post_attention_layernorm.weight"), "blk.3.ffn_norm.weight");
  EXPECT_EQ(*hf_to_gguf_name("model.embed_tokens.weight"), "token_embd.weight");
  EXPECT_EQ(*hf_to_gguf_name("lm_head.weight"), "output.weight");
  EXPECT_EQ(*gguf_to_hf_name("blk.7.attn_k_norm.weight"), "model.layers.7.self_attn.k_norm.weight");
  EXPECT_EQ(*gguf_to_hf_name("output_norm.weight"), "model.norm.weight");
  EXPECT_FALSE(hf_to_gguf_name("model.layers.x.mlp.up_proj.weight").has_value());
  EXPECT_FALSE(hf_to_gguf_name("model.layers.1.mlp.unknown.weight").has_value());
  EXPECT_FALSE(gguf_to_hf_name("blk.1").has_value());
}

TEST(TensorNames, MixtureOfExperts) {
  EXPECT_EQ(*hf_to_gguf_name("model.layers.2.mlp.gate.weight"), "blk.2.ffn_gate_inp.weight");
  EXPECT_EQ(*gguf_to_hf_name("blk.2.ffn_gate_exps.weight"), "model.layers.2.mlp.switch_mlp.gate_proj.weight");
  EXPECT_EQ(*gguf_to_hf_name("blk.0.ffn_down_exps.weight"), "model.layers.0.mlp.switch_mlp.down_proj.weight");
  EXPECT_EQ(*hf_to_gguf_name("model.layers.1.mlp.shared_expert.up_proj.weight"), "blk.1.ffn_up_shexp.weight");
  EXPECT_EQ(*gguf_to_hf_name("blk.1.ffn_gate_inp_shexp.weight"), "model.layers.1.mlp.shared_expert_gate.weight");
  // One tensor per expert (Hugging Face checkpoints) has no GGUF name: llama.cpp stacks experts.
  EXPECT_FALSE(hf_to_gguf_name("model.layers.1.mlp.experts.3.gate_proj.weight").has_value());
}

TEST(TensorNames, RopePermutationMatchesDefinitionAndInverts) {
  // 2 heads of head_dim 4, one float per row: rotate-half head rows [a0 a1 b0 b1] pair (a0,b0),
  // (a1,b1); interleaved must be [a0 b0 a1 b1].
  std::vector<float> rows = {0, 1, 2, 3, 10, 11, 12, 13};
  permute_rope_rows(rows.data(), sizeof(float), 2, 4, true);
  EXPECT_EQ(rows, (std::vector<float>{0, 2, 1, 3, 10, 12, 11, 13}));
  permute_rope_rows(rows.data(), sizeof(float), 2, 4, false);
  EXPECT_EQ(rows, (std::vector<float>{0, 1, 2, 3, 10, 11, 12, 13}));
}

}  // namespace
}  // namespace splash
