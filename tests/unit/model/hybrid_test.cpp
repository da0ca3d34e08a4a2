// Hybrid Gated-DeltaNet models (qwen3_next, qwen3_5, dense and MoE) on tiny random weights, no reference needed:
// the state layout the model declares, the chunked prefill against the token-by-token recurrence,
// checkpoints (snapshot at a token boundary, restore, continue == uninterrupted), the GGUF and
// safetensors files of one seed agreeing (value-head tiling, A_log, 1 + w norms), and state errors.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"
#include "model/blocks/gated_deltanet_block.h"
#include "model_test_util.h"
#include "testmodel/test_model.h"

namespace splash {
namespace {

using namespace model_test;

std::vector<int32_t> tokens_of(int n, int seed) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 61 + seed * 13 + 5) % 390 + 3));
  return t;
}

struct Loaded {
  std::unique_ptr<ModelFiles> files;
  std::unique_ptr<Model> model;
  std::unique_ptr<KvPagePool> kv;
};

Loaded load(const TestModelSpec& spec, const std::string& path) {
  Loaded l;
  Status st = write_test_model(spec, path);
  EXPECT_TRUE(st.ok()) << st.error_message();
  auto files = ModelFiles::open(path);
  EXPECT_TRUE(files.ok()) << files.error_message();
  if (!files.ok()) return l;
  l.files = std::make_unique<ModelFiles>(std::move(files).value());
  auto model = Model::load(*l.files);
  EXPECT_TRUE(model.ok()) << model.error_message();
  if (!model.ok()) return l;
  l.model = std::make_unique<Model>(std::move(model).value());
  l.kv = std::make_unique<KvPagePool>(*KvPagePool::create(l.model->kv_cache_config(KvFormat::kF32, 16)));
  return l;
}

class Hybrid : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<TempDir>("hybrid");
    spec_ = *test_model_preset(GetParam());
    spec_.gguf_type = DType::kF32;
    m_ = load(spec_, dir_->path() + "/m.gguf");
    ASSERT_TRUE(m_.model);
  }
  std::unique_ptr<TempDir> dir_;
  TestModelSpec spec_;
  Loaded m_;
  ThreadPool threads_{2};
};

TEST_P(Hybrid, StateLayoutAndKvLayers) {
  const ModelConfig& c = m_.model->config();
  ASSERT_EQ(c.layer_kinds.size(), 4u);
  EXPECT_EQ(c.layer_kinds[3], LayerKind::kFullAttention);
  // Only the one full-attention layer has KV; three linear layers hold conv windows + S matrices.
  EXPECT_EQ(m_.model->kv_cache_config(KvFormat::kF32, 1).n_layer, 1);
  const int64_t conv_dim = 2 * 2 * 16 + 4 * 16;
  EXPECT_EQ(gdn_state_floats(c), 3 * conv_dim + 4 * 16 * 16);
  EXPECT_EQ(m_.model->recurrent_state_floats(), 3 * gdn_state_floats(c));
}

TEST_P(Hybrid, ChunkedPrefillEqualsRecurrentDecode) {
  // 150 tokens: the chunked delta rule over 64-token blocks (prefill) against one token per
  // forward (the recurrence), and a prefill in passes of 5 tokens (recurrence inside each pass).
  const std::vector<int32_t> prompt = tokens_of(150, 1);
  const int64_t nv = m_.model->config().n_vocab, n = static_cast<int64_t>(prompt.size());
  auto kv = KvPagePool::create(m_.model->kv_cache_config(KvFormat::kF32, 8));
  ASSERT_TRUE(kv.ok());
  const std::vector<float> chunked = prefill_all(*m_.model, *kv, threads_, prompt);
  const std::vector<float> decoded = decode_all(*m_.model, *kv, threads_, prompt);
  const std::vector<float> passes = prefill_all(*m_.model, *kv, threads_, prompt, 5);
  ASSERT_EQ(chunked.size(), static_cast<size_t>(n * nv));
  ASSERT_EQ(decoded.size(), chunked.size());
  EXPECT_LE(rel_max_err(chunked.data(), decoded.data(), n * nv), 2e-5);
  EXPECT_LE(rel_max_err(passes.data(), decoded.data(), n * nv), 2e-5);
}

TEST_P(Hybrid, CheckpointRestoreContinuesLikeUninterrupted) {
  const std::vector<int32_t> a = tokens_of(30, 2), b = tokens_of(12, 3), detour = tokens_of(9, 4);
  const int64_t nv = m_.model->config().n_vocab;
  KvPagePool& kv = *m_.kv;
  // Uninterrupted: a then b.
  SequenceState u;
  SequenceRun ra{&u, a, LogitRows::kNone};
  ASSERT_TRUE(m_.model->forward({&ra, 1}, kv, threads_).ok());
  SequenceRun rb{&u, b, LogitRows::kAll};
  auto want = m_.model->forward({&rb, 1}, kv, threads_);
  ASSERT_TRUE(want.ok());
  // Checkpoint after a, a detour (rejected speculative tokens), restore, then b.
  SequenceState s;
  SequenceRun sa{&s, a, LogitRows::kNone};
  ASSERT_TRUE(m_.model->forward({&sa, 1}, kv, threads_).ok());
  const std::vector<float> checkpoint = s.recurrent;
  ASSERT_EQ(static_cast<int64_t>(checkpoint.size()), m_.model->recurrent_state_floats());
  SequenceRun sd{&s, detour, LogitRows::kLast};
  ASSERT_TRUE(m_.model->forward({&sd, 1}, kv, threads_).ok());
  EXPECT_NE(s.recurrent, checkpoint);
  truncate_sequence(kv, s, static_cast<int64_t>(a.size()));
  s.recurrent = checkpoint;
  SequenceRun sb{&s, b, LogitRows::kAll};
  auto got = m_.model->forward({&sb, 1}, kv, threads_);
  ASSERT_TRUE(got.ok());
  EXPECT_LE(rel_max_err(got->logits.data(), want->logits.data(), 12 * nv), 1e-6);
  // Without the restore the continuation differs: the state is what carries the detour.
  SequenceState w;
  SequenceRun wa{&w, a, LogitRows::kNone};
  ASSERT_TRUE(m_.model->forward({&wa, 1}, kv, threads_).ok());
  SequenceRun wd{&w, detour, LogitRows::kNone};
  ASSERT_TRUE(m_.model->forward({&wd, 1}, kv, threads_).ok());
  truncate_sequence(kv, w, static_cast<int64_t>(a.size()));
  SequenceRun wb{&w, b, LogitRows::kAll};
  auto stale = m_.model->forward({&wb, 1}, kv, threads_);
  ASSERT_TRUE(stale.ok());
  EXPECT_GT(rel_max_err(stale->logits.data(), want->logits.data(), 12 * nv), 1e-3);
  for (SequenceState* x : {&u, &s, &w}) {
    release_sequence(kv, *x);
    EXPECT_TRUE(x->recurrent.empty());
  }
  EXPECT_EQ(kv.kv_pages_used(), 0);
}

TEST_P(Hybrid, StateErrors) {
  KvPagePool& kv = *m_.kv;
  const std::vector<int32_t> t = tokens_of(4, 5);
  SequenceState s;
  s.recurrent.assign(7, 0.0f);
  SequenceRun r{&s, t};
  auto e = m_.model->forward({&r, 1}, kv, threads_);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error_message().find("recurrent state"), std::string::npos) << e.error_message();
  // KV without state (e.g. a prefix restored without its checkpoint) is refused.
  SequenceState ok;
  SequenceRun r2{&ok, t};
  ASSERT_TRUE(m_.model->forward({&r2, 1}, kv, threads_).ok());
  ok.recurrent.clear();
  auto e2 = m_.model->forward({&r2, 1}, kv, threads_);
  ASSERT_FALSE(e2.ok());
  EXPECT_EQ(ok.n_tokens(), 4);
  release_sequence(kv, ok);
}

TEST_P(Hybrid, GgufAndSafetensorsAgree) {
  // Same seed, two formats: GGUF stores 1 + w norms, A = -exp(A_log), and (qwen3_5) tiled value
  // heads; the loaders must undo each so the logits match.
  TestModelSpec st = spec_;
  st.format = TestModelFormat::kSafetensors;
  Loaded s = load(st, dir_->path() + "/st");
  ASSERT_TRUE(s.model);
  const std::vector<int32_t> prompt = tokens_of(20, 6);
  const int64_t nv = m_.model->config().n_vocab;
  const std::vector<float> a = prefill_all(*m_.model, *m_.kv, threads_, prompt);
  const std::vector<float> b = prefill_all(*s.model, *s.kv, threads_, prompt);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_LE(rel_max_err(a.data(), b.data(), 20 * nv), 1e-5);
}

TEST(HybridMoe, ConfigErrors) {
  // A shared expert the config does not size is refused, not skipped; so is a MoE config with no
  // experts per token.
  TempDir dir("hybmoe");
  TestModelSpec spec = *test_model_preset("tiny-qwen3-5-moe");
  spec.format = TestModelFormat::kSafetensors;
  const std::string path = dir.path() + "/st";
  ASSERT_TRUE(write_test_model(spec, path).ok());
  std::stringstream buf;
  buf << std::ifstream(path + "/config.json").rdbuf();
  const std::string config = buf.str();
  auto rewrite = [&](const std::string& from, const std::string& to) {
    std::string c = config;
    const size_t at = c.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) c.replace(at, from.size(), to);
    std::ofstream(path + "/config.json") << c;
  };
  auto load_error = [&]() -> std::string {
    auto files = ModelFiles::open(path);
    if (!files.ok()) return files.error_message();
    auto model = Model::load(*files);
    return model.ok() ? "" : model.error_message();
  };
  ASSERT_EQ(load_error(), "");
  rewrite("\"shared_expert_intermediate_size\": 64", "\"shared_expert_intermediate_size\": 0");
  EXPECT_NE(load_error().find("shared_expert_intermediate_size"), std::string::npos) << load_error();
  rewrite("\"num_experts_per_tok\": 2", "\"num_experts_per_tok\": 9");
  EXPECT_NE(load_error().find("num_experts_per_tok"), std::string::npos) << load_error();
}

// A copy of safetensors directory `from` at `to` with tensor name prefixes replaced
// (same data bytes; the header padded with spaces to keep the data section's alignment) and
// config.json replaced by `config`.
void rename_tensors(const std::string& from, const std::string& to,
                    const std::vector<std::pair<std::string, std::string>>& renames, const std::string& config) {
  std::filesystem::create_directories(to);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    std::filesystem::copy_file(from + "/" + f, to + "/" + f);
  std::ofstream(to + "/config.json") << config;
  std::stringstream buf;
  buf << std::ifstream(from + "/model.safetensors", std::ios::binary).rdbuf();
  const std::string file = buf.str();
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | static_cast<uint8_t>(file[static_cast<size_t>(i)]);
  std::string header = file.substr(8, len);
  for (const auto& [old_prefix, new_prefix] : renames) {
    const std::string a = "\"" + old_prefix, b = "\"" + new_prefix;
    for (size_t at = header.find(a); at != std::string::npos; at = header.find(a, at + b.size()))
      header.replace(at, a.size(), b);
  }
  while (header.size() % 64 != len % 64) header += ' ';
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  std::ofstream(to + "/model.safetensors", std::ios::binary) << out << header << file.substr(8 + len);
}

TEST(HybridMoe, MultimodalCheckpointNames) {
  // Qwen3.5(-MoE) checkpoints are *ForConditionalGeneration: the text model under
  // model.language_model.* (transformers) or language_model.model.* / language_model.lm_head
  // (MLX-LM), the text config under text_config. Same weights, same logits.
  TempDir dir("hybmoe");
  TestModelSpec spec = *test_model_preset("tiny-qwen3-5-moe");
  spec.format = TestModelFormat::kSafetensors;
  spec.tie_embeddings = false;  // an lm_head to rename too
  const std::string plain = dir.path() + "/plain";
  ASSERT_TRUE(write_test_model(spec, plain).ok());
  std::stringstream buf;
  buf << std::ifstream(plain + "/config.json").rdbuf();
  const std::string text_config = buf.str();
  const std::string config = "{\"architectures\": [\"Qwen3_5MoeForConditionalGeneration\"], \"model_type\": "
                             "\"qwen3_5_moe\", \"text_config\": " + text_config + "}";
  rename_tensors(plain, dir.path() + "/hf", {{"model.", "model.language_model."}}, config);
  rename_tensors(plain, dir.path() + "/mlx",
                 {{"model.", "language_model.model."}, {"lm_head.", "language_model.lm_head."}}, config);
  const std::vector<int32_t> prompt = tokens_of(12, 8);
  std::vector<float> want;
  for (const char* variant : {"plain", "hf", "mlx"}) {
    auto files = ModelFiles::open(dir.path() + "/" + variant);
    ASSERT_TRUE(files.ok()) << variant << ": " << files.error_message();
    EXPECT_NE(files->find("model.layers.0.mlp.gate.weight"), nullptr) << variant;  // the text model's names
    EXPECT_EQ(files->find("model.language_model.layers.0.mlp.gate.weight"), nullptr) << variant;
    auto model = Model::load(*files);
    ASSERT_TRUE(model.ok()) << variant << ": " << model.error_message();
    auto kv = KvPagePool::create(model->kv_cache_config(KvFormat::kF32, 4));
    ASSERT_TRUE(kv.ok());
    ThreadPool threads(2);
    const std::vector<float> got = prefill_all(*model, *kv, threads, prompt);
    if (want.empty()) want = got;
    EXPECT_EQ(got, want) << variant;
  }
}

// The MoE variants (router + experts + gated shared expert after each mixer) keep the same state
// and must pass the same checks.
INSTANTIATE_TEST_SUITE_P(Archs, Hybrid,
                         ::testing::Values("tiny-qwen3-next", "tiny-qwen3-5", "tiny-qwen3-next-moe",
                                           "tiny-qwen3-5-moe"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace splash
