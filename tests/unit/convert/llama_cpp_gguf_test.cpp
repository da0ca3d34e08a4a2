// The hybrid GGUF files Splash writes (`splash make-test-model`, `splash convert`) carry the keys and
// tensors llama.cpp's loader requires, in its shapes: a missing key or an extra tensor makes
// llama.cpp refuse the file. The fixture lists below are read off llama.cpp's sources
// (src/llama-model.cpp llama_model_base::load_hparams; src/models/qwen35.cpp, qwen35moe.cpp and
// qwen3next.cpp load_arch_hparams / load_arch_tensors; gguf-py constants.py for the spellings).
// That the files also compute the same predictions in both programs is shown with llama-perplexity
// (docs/ADDING_A_MODEL.md, "Writers").
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "convert/convert.h"
#include "formats/gguf.h"
#include "formats/model_files.h"
#include "testmodel/test_model.h"
#include "tokenizer/model_tokenizer.h"

namespace splash {
namespace {

namespace fs = std::filesystem;

// Keys every one of the three architectures needs ("{arch}." prefixed). llama.cpp treats
// feed_forward_length, head_count(_kv), key_length, rope.* as optional in the generic loader but
// the hybrids' graphs use them (n_rot for the partial RoPE, the head sizes for q/k/v).
const std::vector<std::string> kCommonKeys = {
    "context_length",      "embedding_length", "block_count",
    "attention.head_count", "attention.head_count_kv", "attention.key_length",
    "attention.value_length", "attention.layer_norm_rms_epsilon", "rope.freq_base",
    "rope.dimension_count", "full_attention_interval", "ssm.conv_kernel",
    "ssm.inner_size",      "ssm.state_size",   "ssm.time_step_rank",
    "ssm.group_count",
};
const std::vector<std::string> kQwen35Keys = {"rope.dimension_sections"};  // required by qwen35 / qwen35moe
const std::vector<std::string> kMoeKeys = {"expert_count", "expert_used_count", "expert_feed_forward_length",
                                           "expert_shared_feed_forward_length"};

// Per-layer tensors ("blk.<i>." prefixed). Recurrent layers of qwen35 / qwen35moe read the split
// input projections; qwen3next reads attn_qkv + attn_gate with ssm_ba (what its current converter
// writes; the legacy ssm_in it also reads is not what Splash writes).
const std::vector<std::string> kLayerAll = {"attn_norm.weight", "post_attention_norm.weight"};
const std::vector<std::string> kAttention = {"attn_q.weight", "attn_k.weight", "attn_v.weight",
                                             "attn_output.weight", "attn_q_norm.weight", "attn_k_norm.weight"};
const std::vector<std::string> kRecurrent = {"ssm_conv1d.weight", "ssm_dt.bias", "ssm_a", "ssm_norm.weight",
                                             "ssm_out.weight"};
const std::vector<std::string> kQwen35Recurrent = {"attn_qkv.weight", "attn_gate.weight", "ssm_beta.weight",
                                                   "ssm_alpha.weight"};
const std::vector<std::string> kDenseFfn = {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
const std::vector<std::string> kMoeFfn = {"ffn_gate_inp.weight",      "ffn_gate_exps.weight",  "ffn_up_exps.weight",
                                          "ffn_down_exps.weight",     "ffn_gate_inp_shexp.weight",
                                          "ffn_gate_shexp.weight",    "ffn_up_shexp.weight",   "ffn_down_shexp.weight"};

class LlamaCppGgufTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("splash_llama_cpp_gguf_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The preset as make-test-model writes it in GGUF and as convert writes it from safetensors.
  std::vector<std::string> write_both(TestModelSpec spec, const std::string& name) {
    const std::string direct = (dir_ / (name + ".gguf")).string(), st = (dir_ / (name + "-st")).string();
    const std::string converted = (dir_ / (name + "-converted.gguf")).string();
    spec.format = TestModelFormat::kGguf;
    spec.gguf_type = DType::kQ8_0;
    EXPECT_TRUE(write_test_model(spec, direct).ok());
    spec.format = TestModelFormat::kSafetensors;
    EXPECT_TRUE(write_test_model(spec, st).ok());
    auto in = ModelFiles::open(st);
    EXPECT_TRUE(in.ok()) << in.error_message();
    if (!in.ok()) return {direct};
    auto tok = load_model_tokenizer(*in);
    EXPECT_TRUE(tok.ok()) << tok.error_message();
    ConvertOptions o;
    o.gguf_type = DType::kQ8_0;  // quantized: some tensors must stay F32 whatever the file type
    auto r = convert_model(*in, tok.ok() ? tok->get() : nullptr, converted, o);
    EXPECT_TRUE(r.ok()) << r.error_message();
    return {direct, converted};
  }

  // `path` has `arch`'s keys and exactly the tensors llama.cpp loads for `spec`'s layers.
  static void expect_llama_cpp_layout(const std::string& path, const std::string& arch, const TestModelSpec& spec) {
    SCOPED_TRACE(path);
    auto f = gguf::GgufFile::open(path);
    ASSERT_TRUE(f.ok()) << f.error_message();
    auto written_arch = f->get_string("general.architecture");
    ASSERT_TRUE(written_arch.ok()) << written_arch.error_message();
    ASSERT_EQ(*written_arch, arch);
    const bool qwen35 = arch != "qwen3next";
    const bool moe = arch != "qwen35";
    std::vector<std::string> keys = kCommonKeys;
    if (qwen35) keys.insert(keys.end(), kQwen35Keys.begin(), kQwen35Keys.end());
    if (moe) keys.insert(keys.end(), kMoeKeys.begin(), kMoeKeys.end());
    for (const std::string& k : keys) EXPECT_TRUE(f->has(arch + "." + k)) << "missing key " << arch << "." << k;
    if (qwen35) {
      auto sections = f->get_i32_array(arch + ".rope.dimension_sections");
      ASSERT_TRUE(sections.ok()) << sections.error_message();
      EXPECT_EQ(sections->size(), 4u);  // llama.cpp reads exactly 4 (get_key_or_arr(..., 4, true))
    }

    std::set<std::string> want = {"token_embd.weight", "output_norm.weight"};
    if (!spec.tie_embeddings) want.insert("output.weight");
    for (uint32_t il = 0; il < spec.n_layer; ++il) {
      const std::string b = "blk." + std::to_string(il) + ".";
      std::vector<std::string> names = kLayerAll;
      const bool full = (il + 1) % spec.full_attention_interval == 0;
      auto add = [&](const std::vector<std::string>& v) { names.insert(names.end(), v.begin(), v.end()); };
      if (full) {
        add(kAttention);
      } else {
        add(kRecurrent);
        if (qwen35) add(kQwen35Recurrent);
        else add({"attn_qkv.weight", "attn_gate.weight", "ssm_ba.weight"});
      }
      add(moe ? kMoeFfn : kDenseFfn);
      for (const std::string& n : names) want.insert(b + n);
    }
    std::set<std::string> have;
    for (const auto& t : f->tensors()) have.insert(t.name);
    for (const std::string& n : want) EXPECT_TRUE(have.contains(n)) << "missing tensor " << n;
    for (const std::string& n : have) EXPECT_TRUE(want.contains(n)) << "tensor llama.cpp does not load: " << n;

    // Shapes in ggml order where the layout differs between formats.
    const uint64_t conv_dim = 2ull * spec.linear_n_key_heads * spec.linear_key_head_dim +
                              uint64_t{spec.linear_n_value_heads} * spec.linear_value_head_dim;
    const auto* conv = f->find_tensor("blk.0.ssm_conv1d.weight");
    ASSERT_NE(conv, nullptr);
    EXPECT_EQ(conv->shape, (std::vector<uint64_t>{spec.linear_conv_kernel, conv_dim}));
    EXPECT_EQ(conv->type, DType::kF32);  // ggml's ssm_conv asserts an F32 kernel
    const auto* a = f->find_tensor("blk.0.ssm_a");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->shape, (std::vector<uint64_t>{spec.linear_n_value_heads}));
    if (moe) {
      const auto* g = f->find_tensor("blk.0.ffn_gate_inp_shexp.weight");
      ASSERT_NE(g, nullptr);
      EXPECT_EQ(g->shape, (std::vector<uint64_t>{spec.n_embd}));
      const auto* e = f->find_tensor("blk.0.ffn_gate_exps.weight");
      ASSERT_NE(e, nullptr);
      EXPECT_EQ(e->shape, (std::vector<uint64_t>{spec.n_embd, spec.n_ff_expert, spec.n_expert}));
    }
  }

  fs::path dir_;
};

TEST_F(LlamaCppGgufTest, Qwen35DenseHasLlamaCppsKeysAndTensors) {
  const TestModelSpec spec = *test_model_preset("tiny-qwen3-5");
  ASSERT_GT(spec.linear_n_value_heads, spec.linear_n_key_heads);  // the value-head tiling is exercised
  for (const std::string& path : write_both(spec, "q35")) expect_llama_cpp_layout(path, "qwen35", spec);
}

TEST_F(LlamaCppGgufTest, Qwen35MoeHasLlamaCppsKeysAndTensors) {
  const TestModelSpec spec = *test_model_preset("tiny-qwen3-5-moe");
  for (const std::string& path : write_both(spec, "q35moe")) expect_llama_cpp_layout(path, "qwen35moe", spec);
}

TEST_F(LlamaCppGgufTest, Qwen3NextHasLlamaCppsKeysAndTensors) {
  // llama.cpp's qwen3next needs every layer sparse with a shared expert (as the released model is).
  TestModelSpec spec = *test_model_preset("tiny-qwen3-next");
  spec.hybrid_moe = true;
  spec.n_ff_shared_expert = 64;
  for (const std::string& path : write_both(spec, "next")) expect_llama_cpp_layout(path, "qwen3next", spec);
}

TEST_F(LlamaCppGgufTest, ReadsTheSectionsBack) {
  const TestModelSpec spec = *test_model_preset("tiny-qwen3-5");
  const auto paths = write_both(spec, "sections");
  auto m = ModelFiles::open(paths[0]);
  ASSERT_TRUE(m.ok()) << m.error_message();
  EXPECT_EQ(m->config().rope_sections, (std::vector<uint32_t>{11, 11, 10, 0}));
}

}  // namespace
}  // namespace splash
