// llama-quantize's Q4_K_M / Q5_K_M mixes in GGUF test models: every tensor's type, read back with
// our GGUF reader, against the types llama.cpp's llama_tensor_get_type (src/llama-quant.cpp) gives
// the same tensors. The expected layer sets are worked out by hand from its use_more_bits rule,
// not with gguf_mix.cpp's code.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

#include "formats/gguf.h"
#include "testmodel/gguf_mix.h"
#include "testmodel/test_model.h"
#include "testmodel/test_model_args.h"

#include "testmodel_test_util.h"

namespace splash {
namespace {

namespace fs = std::filesystem;

using test::TempDir;

// A qwen3 model whose rows fit the K-quants (dim 256, ffn 512, 4 heads x 128) with n_layer layers.
TestModelSpec mix_spec(GgufMix mix, uint32_t n_layer, bool tied) {
  TestModelSpec s = *test_model_preset("tiny-qwen3-k");
  s.n_layer = n_layer;
  s.tie_embeddings = tied;
  s.gguf_mix = mix;
  s.gguf_type = mix == GgufMix::kQ5_K_M ? DType::kQ5_K : DType::kQ4_K;
  return s;
}

// use_more_bits(i, 16): i < 2, i >= 14, (i - 2) % 3 == 2.
const std::set<int> kMoreBits16 = {0, 1, 4, 7, 10, 13, 14, 15};

// Checks every tensor of `path`: 1-D F32; Q6_K for output.weight, token_embd.weight when tied, and
// attn_v / ffn_down of the layers in more_bits; `base` for every other matrix.
void expect_mix_types(const std::string& path, DType base, bool tied, const std::set<int>& more_bits,
                      uint32_t file_type) {
  auto f = gguf::GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error_message();
  EXPECT_EQ(*f->get_u32("general.file_type"), file_type);
  EXPECT_EQ(f->find_tensor("output.weight") == nullptr, tied);
  std::set<std::string> q6;
  q6.insert(tied ? "token_embd.weight" : "output.weight");
  for (int il : more_bits) {
    q6.insert("blk." + std::to_string(il) + ".attn_v.weight");
    q6.insert("blk." + std::to_string(il) + ".ffn_down.weight");
  }
  int n_q6 = 0;
  for (const gguf::TensorInfo& t : f->tensors()) {
    DType want = base;
    if (t.shape.size() == 1) want = DType::kF32;
    else if (q6.count(t.name)) want = DType::kQ6_K;
    EXPECT_EQ(t.type, want) << t.name << " is " << dtype_name(t.type) << ", expected " << dtype_name(want);
    n_q6 += t.type == DType::kQ6_K;
  }
  EXPECT_EQ(n_q6, static_cast<int>(q6.size()));
}

TEST(TestModelGgufMix, Q4KMTiedEmbeddingsSixteenLayers) {
  TempDir d;
  const TestModelSpec s = mix_spec(GgufMix::kQ4_K_M, 16, /*tied=*/true);
  Status st = write_test_model(s, d.file("q4km.gguf"));
  ASSERT_TRUE(st.ok()) << st.error_message();
  expect_mix_types(d.file("q4km.gguf"), DType::kQ4_K, true, kMoreBits16, 15);
}

TEST(TestModelGgufMix, Q5KMUntiedKeepsEmbeddingsInBaseType) {
  TempDir d;
  const TestModelSpec s = mix_spec(GgufMix::kQ5_K_M, 16, /*tied=*/false);
  Status st = write_test_model(s, d.file("q5km.gguf"));
  ASSERT_TRUE(st.ok()) << st.error_message();
  expect_mix_types(d.file("q5km.gguf"), DType::kQ5_K, false, kMoreBits16, 17);
}

TEST(TestModelGgufMix, PureTypeUnchanged) {
  // The single-type path: every matrix (embeddings too) in gguf_type, file type Q4_K_S as before.
  TempDir d;
  TestModelSpec s = mix_spec(GgufMix::kPure, 16, /*tied=*/true);
  ASSERT_TRUE(write_test_model(s, d.file("q4k.gguf")).ok());
  auto f = gguf::GgufFile::open(d.file("q4k.gguf"));
  ASSERT_TRUE(f.ok()) << f.error_message();
  EXPECT_EQ(*f->get_u32("general.file_type"), 14u);
  for (const gguf::TensorInfo& t : f->tensors())
    EXPECT_EQ(t.type, t.shape.size() == 1 ? DType::kF32 : DType::kQ4_K) << t.name;
  EXPECT_EQ(f->find_tensor("token_embd.weight")->type, DType::kQ4_K);
}

TEST(TestModelGgufMix, QwenSixHundredMillionShapeLayers) {
  // The Qwen3-0.6B benchmark shape: 28 layers, tied embeddings. The names only (no file):
  // use_more_bits(i, 28): i < 3, i >= 24, (i - 3) % 3 == 2.
  const std::set<int> more = {0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27};
  std::vector<testmodel::MixMatrix> m = {{"token_embd.weight", 1024}};
  for (int il = 0; il < 28; ++il)
    for (const char* t : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})
      m.push_back({"blk." + std::to_string(il) + "." + t + ".weight", std::string(t) == "ffn_down" ? 3072u : 1024u});
  auto types = testmodel::gguf_mix_types(GgufMix::kQ4_K_M, m, 28, 0);
  ASSERT_TRUE(types.ok()) << types.error_message();
  EXPECT_EQ((*types)[0], DType::kQ6_K);
  int n_q6 = 0;
  for (size_t i = 1; i < m.size(); ++i) {
    const int il = static_cast<int>((i - 1) / 7);
    const bool v_or_down = m[i].name.ends_with("attn_v.weight") || m[i].name.ends_with("ffn_down.weight");
    EXPECT_EQ((*types)[i], v_or_down && more.count(il) ? DType::kQ6_K : DType::kQ4_K) << m[i].name;
    n_q6 += (*types)[i] == DType::kQ6_K;
  }
  EXPECT_EQ(n_q6, 28);  // 14 attn_v + 14 ffn_down
}

TEST(TestModelGgufMix, EightExpertRules) {
  // llama.cpp's 8-expert rules: attn_v and attn_k Q8_0, attn_output Q5_K (Q4_K_M); ffn_down by the
  // block number of its name (experts and the dense layer 1 alike): use_more_bits(i, 3) = {2}.
  TempDir d;
  TestModelSpec s = *test_model_preset("tiny-qwen3-moe");  // 3 layers, layer 1 dense, 8 experts
  s.n_embd = 256;
  s.n_ff = 512;
  s.n_ff_expert = 256;
  s.head_dim = 64;
  s.gguf_type = DType::kQ4_K;
  s.gguf_mix = GgufMix::kQ4_K_M;
  Status st = write_test_model(s, d.file("moe.gguf"));
  ASSERT_TRUE(st.ok()) << st.error_message();
  auto f = gguf::GgufFile::open(d.file("moe.gguf"));
  ASSERT_TRUE(f.ok()) << f.error_message();
  auto type = [&](const std::string& n) {
    const auto* t = f->find_tensor(n);
    return t ? t->type : DType::kU8;  // kU8: missing
  };
  for (int il = 0; il < 3; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    EXPECT_EQ(type(p + "attn_v.weight"), DType::kQ8_0) << il;
    EXPECT_EQ(type(p + "attn_k.weight"), DType::kQ8_0) << il;
    EXPECT_EQ(type(p + "attn_q.weight"), DType::kQ4_K) << il;
    EXPECT_EQ(type(p + "attn_output.weight"), DType::kQ5_K) << il;
  }
  EXPECT_EQ(type("blk.0.ffn_down_exps.weight"), DType::kQ4_K);
  EXPECT_EQ(type("blk.1.ffn_down.weight"), DType::kQ4_K);
  EXPECT_EQ(type("blk.2.ffn_down_exps.weight"), DType::kQ6_K);
  EXPECT_EQ(type("blk.2.ffn_gate_exps.weight"), DType::kQ4_K);
  EXPECT_EQ(type("blk.0.ffn_gate_inp.weight"), DType::kF32);  // routers are never quantized
  EXPECT_EQ(type("output.weight"), DType::kQ6_K);
  EXPECT_EQ(type("token_embd.weight"), DType::kQ4_K);
}

TEST(TestModelGgufMix, TypeFlagAndRefusals) {
  auto args = [](std::vector<std::string> a) {
    a.insert(a.end(), {"--out", "x.gguf"});
    return parse_test_model_args(a);
  };
  auto a = args({"--preset", "tiny-qwen3-k", "--type", "q4_k_m"});
  ASSERT_TRUE(a.ok()) << a.error_message();
  EXPECT_EQ(a->spec.gguf_type, DType::kQ4_K);
  EXPECT_EQ(a->spec.gguf_mix, GgufMix::kQ4_K_M);
  a = args({"--preset", "tiny-qwen3-k", "--type", "Q5_K_M"});
  ASSERT_TRUE(a.ok()) << a.error_message();
  EXPECT_EQ(a->spec.gguf_type, DType::kQ5_K);
  EXPECT_EQ(a->spec.gguf_mix, GgufMix::kQ5_K_M);
  a = args({"--preset", "tiny-qwen3-k", "--type", "Q4_K_M", "--type", "q8_0"});  // the last --type wins
  ASSERT_TRUE(a.ok()) << a.error_message();
  EXPECT_EQ(a->spec.gguf_type, DType::kQ8_0);
  EXPECT_EQ(a->spec.gguf_mix, GgufMix::kPure);
  EXPECT_FALSE(args({"--preset", "tiny-qwen3-k", "--type", "q4_k_l"}).ok());

  // Rows of 64: llama-quantize would fall back to Q5_0, which Splash does not run.
  a = args({"--preset", "tiny-qwen3", "--type", "q4_k_m"});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error_message().find("multiples of 256"), std::string::npos) << a.error_message();
  a = args({"--preset", "tiny-qwen3-k", "--format", "safetensors", "--type", "q4_k_m"});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error_message().find("GGUF"), std::string::npos) << a.error_message();
  TestModelSpec s = mix_spec(GgufMix::kQ4_K_M, 4, true);
  s.gguf_type = DType::kQ8_0;  // not the mix's base
  EXPECT_NE(validate_test_model_spec(s).error_message().find("mixes over Q4_K"), std::string::npos);
  const std::vector<testmodel::MixMatrix> odd = {{"blk.0.attn_v.weight", 320}};
  auto t = testmodel::gguf_mix_types(GgufMix::kQ4_K_M, odd, 1, 0);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error_message().find("falls back"), std::string::npos) << t.error_message();
}

}  // namespace
}  // namespace splash
