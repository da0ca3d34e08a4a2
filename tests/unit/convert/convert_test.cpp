// splash convert: every output reads back through ModelFiles with the values, config and tokenizer
// of the source, across GGUF, safetensors, MLX and llama2.c.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "tokenizer/model_tokenizer.h"
#include "convert/convert.h"
#include "formats/gguf_writer.h"
#include "formats/gguf.h"
#include "testmodel/test_model.h"

namespace splash {
namespace {

namespace fs = std::filesystem;

class ConvertTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("splash_convert_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string make_model(const std::string& preset, TestModelFormat format, const std::string& name) {
    auto spec = test_model_preset(preset);
    EXPECT_TRUE(spec.ok()) << spec.error_message();
    spec->format = format;
    std::string out = (dir_ / name).string();
    Status s = write_test_model(*spec, out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return out;
  }

  static ModelFiles open(const std::string& path) {
    auto m = ModelFiles::open(path);
    EXPECT_TRUE(m.ok()) << m.error_message();
    return std::move(m).value();
  }

  static std::unique_ptr<Tokenizer> tokenizer_of(const ModelFiles& m) {
    auto t = load_model_tokenizer(m);
    EXPECT_TRUE(t.ok()) << t.error_message();
    return t.ok() ? std::move(t).value() : nullptr;
  }

  static void convert(const ModelFiles& in, const std::string& out, const ConvertOptions& o) {
    auto tok = tokenizer_of(in);
    auto r = convert_model(in, tok.get(), out, o);
    ASSERT_TRUE(r.ok()) << r.error_message();
  }

  // Normalized MSE of every tensor of `b` against the same-named tensor of `a`.
  static double worst_nmse(const ModelFiles& a, const ModelFiles& b) {
    EXPECT_EQ(a.tensors().size(), b.tensors().size());
    double worst = 0;
    for (const auto& ta : a.tensors()) {
      const ModelTensor* tb = b.find(ta.name);
      EXPECT_NE(tb, nullptr) << ta.name;
      if (tb == nullptr) continue;
      EXPECT_EQ(ta.shape, tb->shape) << ta.name;
      auto va = a.read_f32(ta);
      auto vb = b.read_f32(*tb);
      EXPECT_TRUE(va.ok() && vb.ok()) << ta.name;
      if (!va.ok() || !vb.ok() || va->size() != vb->size()) continue;
      double err = 0, ref = 0;
      for (size_t i = 0; i < va->size(); ++i) {
        err += ((*va)[i] - (*vb)[i]) * double((*va)[i] - (*vb)[i]);
        ref += (*va)[i] * double((*va)[i]);
      }
      worst = std::max(worst, ref > 0 ? err / ref : err);
    }
    return worst;
  }

  static void expect_same_config(const ModelConfig& a, const ModelConfig& b) {
    EXPECT_EQ(a.architecture, b.architecture);
    EXPECT_EQ(a.n_vocab, b.n_vocab);
    EXPECT_EQ(a.n_embd, b.n_embd);
    EXPECT_EQ(a.n_layer, b.n_layer);
    EXPECT_EQ(a.n_head, b.n_head);
    EXPECT_EQ(a.n_head_kv, b.n_head_kv);
    EXPECT_EQ(a.head_dim, b.head_dim);
    EXPECT_EQ(a.n_ff, b.n_ff);
    EXPECT_EQ(a.tie_embeddings, b.tie_embeddings);
    EXPECT_EQ(a.qk_norm, b.qk_norm);
    EXPECT_EQ(a.attention_bias, b.attention_bias);
    EXPECT_FLOAT_EQ(a.rope_theta, b.rope_theta);
    EXPECT_FLOAT_EQ(a.rms_eps, b.rms_eps);
    EXPECT_EQ(a.n_expert, b.n_expert);
    EXPECT_EQ(a.n_expert_used, b.n_expert_used);
    EXPECT_EQ(a.n_ff_expert, b.n_ff_expert);
    EXPECT_EQ(a.n_ff_shared_expert, b.n_ff_shared_expert);
    EXPECT_EQ(a.norm_topk_prob, b.norm_topk_prob);
    EXPECT_EQ(a.moe_layer, b.moe_layer);
  }

  static void expect_same_tokens(const ModelFiles& a, const ModelFiles& b) {
    auto ta = tokenizer_of(a), tb = tokenizer_of(b);
    ASSERT_TRUE(ta && tb);
    EXPECT_EQ(ta->n_vocab(), tb->n_vocab());
    EXPECT_EQ(ta->bos_id(), tb->bos_id());
    EXPECT_EQ(ta->eos_id(), tb->eos_id());
    for (const char* s : {"Once upon a time, there was a little girl.", "  two  spaces\tand\ttabs\n",
                          "héllo wörld ✓ 日本語 🙂", "<s> not special </s>", "x", ""}) {
      EXPECT_EQ(ta->encode(s, true, false), tb->encode(s, true, false)) << s;
      EXPECT_EQ(ta->decode(ta->encode(s, false, false)), tb->decode(tb->encode(s, false, false))) << s;
    }
  }

  fs::path dir_;
};

TEST_F(ConvertTest, GgufF32RoundTripsThroughSafetensorsExactly) {
  for (const char* preset : {"tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-qwen3-moe"}) {
    SCOPED_TRACE(preset);
    const std::string src = make_model(preset, TestModelFormat::kGguf, std::string(preset) + ".gguf");
    ModelFiles a = open(src);
    ConvertOptions to_st;
    to_st.target = ConvertTarget::kSafetensors;
    convert(a, (dir_ / (std::string(preset) + "-st")).string(), to_st);
    ModelFiles b = open((dir_ / (std::string(preset) + "-st")).string());
    EXPECT_EQ(b.format(), ModelFormat::kSafetensors);
    EXPECT_EQ(worst_nmse(a, b), 0.0);
    expect_same_config(a.config(), b.config());
    expect_same_tokens(a, b);

    ConvertOptions to_gguf;
    convert(b, (dir_ / (std::string(preset) + "-back.gguf")).string(), to_gguf);
    ModelFiles c = open((dir_ / (std::string(preset) + "-back.gguf")).string());
    EXPECT_EQ(worst_nmse(a, c), 0.0);
    // Stored bytes too: q/k rows go back to the interleaved layout for llama.
    for (const auto& t : a.tensors()) {
      const ModelTensor* u = c.find(t.name);
      ASSERT_NE(u, nullptr);
      EXPECT_TRUE(std::equal(t.data.begin(), t.data.end(), u->data.begin(), u->data.end())) << t.name;
    }
    expect_same_tokens(a, c);
  }
}

TEST_F(ConvertTest, PerExpertSafetensorsStackIntoGgufExperts) {
  // Hugging Face MoE checkpoints hold one tensor per expert; GGUF stacks them (ffn_*_exps).
  TestModelSpec spec = *test_model_preset("tiny-qwen3-moe");
  spec.n_ff_shared_expert = 64;
  const std::string gguf_path = (dir_ / "moe.gguf").string(), st_path = (dir_ / "moe-st").string();
  ASSERT_TRUE(write_test_model(spec, gguf_path).ok());
  spec.format = TestModelFormat::kSafetensors;
  ASSERT_TRUE(write_test_model(spec, st_path).ok());
  ModelFiles st = open(st_path);
  ASSERT_NE(st.find("model.layers.0.mlp.experts.7.down_proj.weight"), nullptr);

  convert(st, (dir_ / "back.gguf").string(), ConvertOptions{});
  ModelFiles a = open(gguf_path), b = open((dir_ / "back.gguf").string());
  EXPECT_EQ(worst_nmse(a, b), 0.0);  // every tensor, stacked experts included, holds the same values
  for (const auto& t : a.tensors()) {
    const ModelTensor* u = b.find(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(u->shape, t.shape) << t.name;
  }
  expect_same_config(a.config(), b.config());

  ConvertOptions q8;
  q8.gguf_type = DType::kQ8_0;
  convert(st, (dir_ / "q8.gguf").string(), q8);
  ModelFiles c = open((dir_ / "q8.gguf").string());
  EXPECT_EQ(c.find("model.layers.0.mlp.switch_mlp.up_proj.weight")->dtype, DType::kQ8_0);
  EXPECT_EQ(c.find("model.layers.0.mlp.gate.weight")->dtype, DType::kF32);  // routers stay F32
  EXPECT_EQ(c.find("model.layers.2.mlp.shared_expert_gate.weight")->dtype, DType::kF32);
}

TEST_F(ConvertTest, QuantizedGgufStaysWithinTheFormatsError) {
  const std::string src = make_model("tiny-llama-k", TestModelFormat::kSafetensors, "k-src");
  ModelFiles a = open(src);
  const std::pair<DType, double> cases[] = {
      {DType::kQ8_0, 1e-4}, {DType::kQ4_0, 1.5e-2}, {DType::kQ4_K, 1e-2}, {DType::kQ5_K, 3e-3}, {DType::kQ6_K, 1e-3},
      {DType::kF16, 1e-6}, {DType::kBF16, 1e-4}};
  for (const auto& [type, bound] : cases) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    ConvertOptions o;
    o.gguf_type = type;
    const std::string out = (dir_ / (std::string(dtype_name(type)) + ".gguf")).string();
    convert(a, out, o);
    ModelFiles b = open(out);
    EXPECT_LT(worst_nmse(a, b), bound);
    size_t n_matrices = 0;
    for (const auto& t : b.tensors()) {
      if (t.shape.size() == 2) {
        EXPECT_EQ(t.dtype, type) << t.name;
        ++n_matrices;
      } else {
        EXPECT_EQ(t.dtype, DType::kF32) << t.name;
      }
    }
    EXPECT_GT(n_matrices, 0u);
    expect_same_tokens(a, b);
    // llama.cpp's file type, as make-test-model writes it for a file of one type (Q4_K: Q4_K_S, 14).
    auto g = gguf::GgufFile::open(out);
    ASSERT_TRUE(g.ok()) << g.error_message();
    ASSERT_TRUE(gguf::file_type_of(type).has_value());
    auto ft = g->get_u32("general.file_type");
    ASSERT_TRUE(ft.ok()) << ft.error_message();
    EXPECT_EQ(*ft, *gguf::file_type_of(type));
  }
  EXPECT_EQ(gguf::file_type_of(DType::kQ4_K), 14u);
  EXPECT_EQ(gguf::file_type_of(DType::kQ8_0), 7u);
}

TEST_F(ConvertTest, MlxAffineQuantizationReadsBack) {
  const std::string src = make_model("tiny-qwen3", TestModelFormat::kGguf, "q3.gguf");
  ModelFiles a = open(src);
  for (auto [bits, group, bound] : {std::tuple{4u, 64u, 1.5e-2}, std::tuple{8u, 32u, 1e-4}, std::tuple{3u, 32u, 6e-2}}) {
    SCOPED_TRACE(bits);
    ConvertOptions o;
    o.target = ConvertTarget::kSafetensors;
    o.mlx = MlxQuantParams{group, bits};
    o.float_type = DType::kF16;
    const std::string out = (dir_ / ("mlx" + std::to_string(bits))).string();
    convert(a, out, o);
    ModelFiles b = open(out);
    EXPECT_EQ(b.format(), ModelFormat::kMlx);
    EXPECT_LT(worst_nmse(a, b), bound);
    for (const auto& t : b.tensors())
      if (t.shape.size() == 2) {
        ASSERT_TRUE(t.mlx.has_value()) << t.name;
        EXPECT_EQ(t.mlx->bits, static_cast<int>(bits));
      }
    expect_same_config(a.config(), b.config());
    expect_same_tokens(a, b);
  }
}

TEST_F(ConvertTest, ErrorsAreClear) {
  const std::string src = make_model("tiny-llama", TestModelFormat::kGguf, "l.gguf");
  ModelFiles a = open(src);
  auto tok = tokenizer_of(a);
  ConvertOptions o;
  o.target = ConvertTarget::kSafetensors;
  fs::create_directories(dir_ / "busy");
  { std::ofstream(dir_ / "busy" / "x") << "x"; }
  auto r = convert_model(a, tok.get(), (dir_ / "busy").string(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_message().find("not empty"), std::string::npos);

  ConvertOptions bad;
  bad.gguf_type = DType::kI32;
  r = convert_model(a, tok.get(), (dir_ / "x.gguf").string(), bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_message().find("I32"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ / "x.gguf"));
}

// The real demo model, when scripts/setup has fetched it: llama2.c -> GGUF/MLX keeps every value
// (F32 exactly) and the tokenizer.
TEST_F(ConvertTest, Stories15MConvertsFromLlama2c) {
  const char* cache = std::getenv("XDG_CACHE_HOME");
  fs::path demo = cache ? fs::path(cache) / "splash/demo" : fs::path(std::getenv("HOME")) / ".cache/splash/demo";
  if (!fs::exists(demo / "stories15M.bin") || !fs::exists(demo / "tokenizer.bin"))
    GTEST_SKIP() << "demo model not fetched (scripts/fetch-demo-model)";
  ModelFiles a = open((demo / "stories15M.bin").string());
  EXPECT_EQ(a.format(), ModelFormat::kLlama2c);
  EXPECT_EQ(a.config().n_embd, 288u);
  ConvertOptions o;
  convert(a, (dir_ / "s.gguf").string(), o);
  ModelFiles b = open((dir_ / "s.gguf").string());
  EXPECT_EQ(worst_nmse(a, b), 0.0);
  expect_same_config(a.config(), b.config());
  expect_same_tokens(a, b);

  ConvertOptions m;
  m.target = ConvertTarget::kSafetensors;
  m.mlx = MlxQuantParams{64, 4};
  m.float_type = DType::kF16;
  convert(a, (dir_ / "s-mlx").string(), m);
  ModelFiles c = open((dir_ / "s-mlx").string());
  EXPECT_LT(worst_nmse(a, c), 1.5e-2);
  // 288-wide rows do not divide into groups of 64: those modules fall back to group 32.
  const ModelTensor* q = c.find("model.layers.0.self_attn.q_proj.weight");
  ASSERT_TRUE(q && q->mlx);
  EXPECT_EQ(q->mlx->group_size, 32);
  const ModelTensor* down = c.find("model.layers.0.mlp.down_proj.weight");  // rows of 768
  ASSERT_TRUE(down && down->mlx);
  EXPECT_EQ(down->mlx->group_size, 64);
  expect_same_tokens(a, c);
}

}  // namespace
}  // namespace splash
