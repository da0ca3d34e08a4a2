// Hybrid checkpoints as the defining tools lay them out, written by the independent reference's
// tests/reference/hybrid_fixtures.py (not by Splash's generator): a transformers folder (norm gains
// w, conv1d [C, 1, K], per-expert or fused experts), llama.cpp's GGUF, and the mlx-lm conversion of the same weights
// (gains 1 + w, conv1d [C, K, 1], switch_mlp experts, 8-bit routers, BF16 scales, Qwen3.5 under
// language_model.*). Both must give the reference's logits and greedy tokens; reading the mlx-lm
// folder's gains as w (adding 1 again) moves every logit and the greedy tokens.
// `splash convert` between the two layouts is checked on the same files.
// ctest: hybrid_converter_layouts (skipped inside the `model` unit run).
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "convert/convert.h"
#include "gtest/gtest.h"
#include "model_test_util.h"

namespace splash {
namespace {

using namespace model_test;

class HybridConverterLayouts : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    if (unit_only() || !have_numpy_reference()) return;
    dir_ = new TempDir("layouts");
    const std::string cmd = std::string("/usr/bin/python3 ") + SPLASH_SOURCE_DIR +
                            "/tests/reference/hybrid_fixtures.py " + dir_->path() + " >/dev/null";
    made_ = std::system(cmd.c_str()) == 0;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (unit_only()) GTEST_SKIP() << "reference test (ctest hybrid_converter_layouts)";
    if (!have_numpy_reference()) GTEST_SKIP() << "no /usr/bin/python3 with numpy";
    ASSERT_TRUE(made_) << "tests/reference/hybrid_fixtures.py failed";
    case_dir_ = dir_->path() + "/" + GetParam();
  }

  // Loads `layout` (hf / mlx) and checks all-position logits and the greedy continuation against
  // the reference's `ref_logits<suffix>.npy` and `ref_greedy<suffix>.txt`.
  void check(const std::string& layout, const std::string& suffix, bool want_shifted, double tol) {
    auto files = ModelFiles::open(case_dir_ + "/" + layout);
    ASSERT_TRUE(files.ok()) << files.error_message();
    EXPECT_EQ(files->zero_centred_gains_shifted(), want_shifted) << layout;
    auto model = Model::load(*files);
    ASSERT_TRUE(model.ok()) << model.error_message();
    auto kv = KvPagePool::create(model->kv_cache_config(KvFormat::kF32, 16));
    ASSERT_TRUE(kv.ok());
    ThreadPool threads(2);
    const std::vector<int32_t> prompt = read_ids_file(case_dir_ + "/tokens.txt");
    const std::vector<int32_t> greedy = read_ids_file(case_dir_ + "/ref_greedy" + suffix + ".txt");
    ASSERT_FALSE(prompt.empty());
    ASSERT_FALSE(greedy.empty());
    int64_t rows = 0, cols = 0;
    const std::vector<float> want = read_npy_f32(case_dir_ + "/ref_logits" + suffix + ".npy", rows, cols);
    ASSERT_EQ(rows, static_cast<int64_t>(prompt.size()));
    const std::vector<float> got = prefill_all(*model, *kv, threads, prompt);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LT(rel_max_err(got.data(), want.data(), rows * cols), tol) << layout;
    // Greedy decoding one token at a time: every step's argmax is the reference's next token.
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), greedy.begin(), greedy.end() - 1);
    const std::vector<float> steps = decode_all(*model, *kv, threads, seq);
    std::vector<int32_t> ours;
    for (size_t i = prompt.size() - 1; i < seq.size(); ++i) ours.push_back(argmax(&steps[i * cols], cols));
    EXPECT_EQ(ours, greedy) << layout;
  }

  static TempDir* dir_;
  static bool made_;
  std::string case_dir_;
};

TempDir* HybridConverterLayouts::dir_ = nullptr;
bool HybridConverterLayouts::made_ = false;

// llama.cpp's GGUF (F32): 1 + w stored, A stored, split qkv with grouped ssm_ba (Qwen3-Next),
// tiled value heads (Qwen3.5).
TEST_P(HybridConverterLayouts, LlamaCppGguf) { check("gguf/model.gguf", "", true, 1e-4); }

// transformers' folder: F32, only the f32 summation order differs from the float64 reference.
TEST_P(HybridConverterLayouts, TransformersFolder) { check("hf", "", false, 1e-4); }

// mlx-lm's 4-bit folder holds the same weights (the raw ones are its codes' values). Our MLX kernels
// round matmul inputs to int8, which moves these tiny random models' logits by up to 0.1-0.3 of
// their range and flips near-tie greedy tokens, so the reference here rounds the same way
// (model.int8_acts, as reference_test's MLX cases). Adding 1 to the stored 1 + w again gives
// errors of the order of the logits themselves.
TEST_P(HybridConverterLayouts, MlxLmFolder) { check("mlx", "_mlx_int8", true, 3e-2); }

// mlx-lm folder -> transformers folder: raw gains, conv1d [C, 1, K], the transformers expert layout;
// the F32 result must give the reference's logits as closely as the original transformers folder.
TEST_P(HybridConverterLayouts, ConvertMlxToTransformers) {
  auto in = ModelFiles::open(case_dir_ + "/mlx");
  ASSERT_TRUE(in.ok()) << in.error_message();
  ConvertOptions o;
  o.target = ConvertTarget::kSafetensors;
  ASSERT_TRUE(convert_model(*in, nullptr, case_dir_ + "/to_hf", o).ok());
  auto out = ModelFiles::open(case_dir_ + "/to_hf");
  ASSERT_TRUE(out.ok()) << out.error_message();
  const ModelTensor* conv = out->find("model.layers.0.linear_attn.conv1d.weight");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->shape.size(), 3u);
  EXPECT_EQ(conv->shape[1], 1u);
  const bool moe = out->config().n_expert > 0;
  if (moe) {
    const bool next = out->config().architecture == "qwen3_next";
    EXPECT_NE(out->find(next ? "model.layers.0.mlp.experts.0.gate_proj.weight" : "model.layers.0.mlp.experts.gate_up_proj"),
              nullptr);
  }
  EXPECT_EQ(out->find("model.layers.0.mlp.switch_mlp.gate_proj.weight"), nullptr);
  check("to_hf", "", false, 1e-4);
}

// transformers folder -> `splash convert --to mlx`: mlx-lm's layout, tensor by tensor against the
// source (gains 1 + w exactly, conv1d [C, K, 1], switch_mlp stacks, 8-bit group-64 routers, no MTP
// head, Qwen3.5 under language_model.*), and Splash's logits on it against the int8-rounding
// reference run on the converted folder itself (requantizing moves the weights, so the source's
// logits are no yardstick).
TEST_P(HybridConverterLayouts, ConvertTransformersToMlx) {
  auto in = ModelFiles::open(case_dir_ + "/hf");
  ASSERT_TRUE(in.ok()) << in.error_message();
  ConvertOptions o;
  o.target = ConvertTarget::kSafetensors;
  o.mlx = MlxQuantParams{64, 4};
  o.float_type = DType::kBF16;
  const std::string dir = case_dir_ + "/to_mlx";
  ASSERT_TRUE(convert_model(*in, nullptr, dir, o).ok());
  auto out = ModelFiles::open(dir);
  ASSERT_TRUE(out.ok()) << out.error_message();
  EXPECT_TRUE(out->zero_centred_gains_shifted());
  const ModelConfig& c = out->config();
  const bool qwen35 = c.architecture == "qwen3_5";
  for (const char* n : {"model.norm.weight", "model.layers.0.input_layernorm.weight",
                        "model.layers.3.self_attn.q_norm.weight", "model.layers.3.post_attention_layernorm.weight"}) {
    const ModelTensor* a = in->find(n);
    const ModelTensor* b = out->find(n);
    ASSERT_TRUE(a && b) << n;
    EXPECT_EQ(b->stored_name.starts_with("language_model."), qwen35) << b->stored_name;
    auto va = in->read_f32(*a);
    auto vb = out->read_f32(*b);
    ASSERT_TRUE(va.ok() && vb.ok());
    for (size_t i = 0; i < va->size(); ++i) ASSERT_EQ((*vb)[i], (*va)[i] + 1.0f) << n << " [" << i << "]";
  }
  const ModelTensor* plain_norm = out->find("model.layers.0.linear_attn.norm.weight");
  ASSERT_NE(plain_norm, nullptr);
  EXPECT_EQ(*out->read_f32(*plain_norm), *in->read_f32(*in->find("model.layers.0.linear_attn.norm.weight")));
  const ModelTensor* conv = out->find("model.layers.0.linear_attn.conv1d.weight");
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->shape, (std::vector<uint64_t>{conv->shape[0], c.linear_conv_kernel, 1}));
  if (c.n_expert > 0) {
    const ModelTensor* gate = out->find("model.layers.0.mlp.switch_mlp.gate_proj.weight");
    ASSERT_NE(gate, nullptr);
    EXPECT_EQ(gate->shape, (std::vector<uint64_t>{c.n_expert, c.n_ff_expert, c.n_embd}));
    EXPECT_EQ(out->find("model.layers.0.mlp.experts.0.gate_proj.weight"), nullptr);
    EXPECT_EQ(out->find("model.layers.0.mlp.experts.gate_up_proj"), nullptr);
    for (const char* n : {"model.layers.0.mlp.gate.weight", "model.layers.0.mlp.shared_expert_gate.weight"}) {
      const ModelTensor* r = out->find(n);
      ASSERT_TRUE(r && r->mlx) << n;
      EXPECT_EQ(r->mlx->bits, 8) << n;
      EXPECT_EQ(r->mlx->group_size, 64) << n;
    }
  }
  for (const ModelTensor& t : out->tensors()) EXPECT_FALSE(t.name.starts_with("mtp.")) << t.name;
  // Splash on the converted folder against the reference on the same folder.
  const std::vector<int32_t> prompt = read_ids_file(case_dir_ + "/tokens.txt");
  {
    std::ofstream jobs(case_dir_ + "/to_mlx_jobs");
    jobs << dir << " " << csv(prompt) << " " << case_dir_ << "/to_mlx_ref.npy int8\n";
  }
  ASSERT_TRUE(run_reference(case_dir_ + "/to_mlx_jobs"));
  int64_t rows = 0, cols = 0;
  const std::vector<float> want = read_npy_f32(case_dir_ + "/to_mlx_ref.npy", rows, cols);
  auto model = Model::load(*out);
  ASSERT_TRUE(model.ok()) << model.error_message();
  auto kv = KvPagePool::create(model->kv_cache_config(KvFormat::kF32, 16));
  ASSERT_TRUE(kv.ok());
  ThreadPool threads(2);
  const std::vector<float> got = prefill_all(*model, *kv, threads, prompt);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LT(rel_max_err(got.data(), want.data(), rows * cols), 3e-2);
}

// `splash convert --to gguf` (F32) from the mlx-lm and the transformers folders: llama.cpp's layout
// (gains 1 + w whichever way the source stored them, ssm_a = -exp(A_log), Qwen3.5's value heads
// tiled, conv1d [C, K], post_attention_norm) must give the reference's logits.
TEST_P(HybridConverterLayouts, ConvertToGguf) {
  for (const char* from : {"mlx", "hf"}) {
    if (GetParam() == "qwen3_5_moe" && std::string(from) == "hf") continue;  // fused experts: not yet
    auto in = ModelFiles::open(case_dir_ + "/" + from);
    ASSERT_TRUE(in.ok()) << in.error_message();
    ConvertOptions o;
    o.target = ConvertTarget::kGguf;
    o.gguf_type = DType::kF32;
    const std::string out = std::string("from_") + from + ".gguf";
    auto r = convert_model(*in, nullptr, case_dir_ + "/" + out, o);
    ASSERT_TRUE(r.ok()) << r.error_message();
    auto files = ModelFiles::open(case_dir_ + "/" + out);
    ASSERT_TRUE(files.ok()) << files.error_message();
    EXPECT_NE(files->find("model.layers.0.post_attention_layernorm.weight"), nullptr);
    check(out, "", true, 1e-4);
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, HybridConverterLayouts, ::testing::Values("qwen3_next", "qwen3_5", "qwen3_5_moe"));

}  // namespace
}  // namespace splash
