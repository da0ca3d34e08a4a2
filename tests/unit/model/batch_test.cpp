// Batch semantics of Model::forward on tiny random models (no reference needed): a batch equals
// its sequences run alone, chunk sizes do not change results, KV rollback equals a fresh run, KV
// formats stay within stated bounds of f32, and bad input fails without changing any state.
#include <cstdio>

#include "gtest/gtest.h"
#include "model_test_util.h"
#include "testmodel/test_model.h"

namespace splash {
namespace {

using namespace model_test;

std::vector<int32_t> tokens_of(int n, int seed) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 53 + seed * 101 + 7) % 390 + 3));
  return t;
}

class ModelBatch : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<TempDir>("batch");
    const std::string name = GetParam();
    quantized_ = name.size() > 5 && name.substr(name.size() - 5) == "-q8_0";
    TestModelSpec spec = *test_model_preset(quantized_ ? name.substr(0, name.size() - 5) : name);
    spec.gguf_type = quantized_ ? DType::kQ8_0 : DType::kF32;
    tol_ = quantized_ ? 1e-2 : 2e-5;
    // The hybrids' MoE variants: measured 3.7e-5 (tiny-qwen3-5-moe F32, prefill in chunks of 1 or 7
    // against 64): the GDN gated norms amplify the f32 rounding as in the dense hybrids, and the
    // expert sums add their own. A routing difference (a row taking other experts) moves the
    // logits by > 1e-3, so 5e-5 still catches one.
    if (!quantized_ && name.ends_with("-moe") && spec.hybrid()) tol_ = 5e-5;
    path_ = dir_->path() + "/m.gguf";
    ASSERT_TRUE(write_test_model(spec, path_).ok());
    auto files = ModelFiles::open(path_);
    ASSERT_TRUE(files.ok()) << files.error_message();
    files_ = std::make_unique<ModelFiles>(std::move(files).value());
    auto model = Model::load(*files_);
    ASSERT_TRUE(model.ok()) << model.error_message();
    model_ = std::make_unique<Model>(std::move(model).value());
    auto kv = KvPagePool::create(model_->kv_cache_config(KvFormat::kF32, 32));
    ASSERT_TRUE(kv.ok());
    kv_ = std::make_unique<KvPagePool>(std::move(kv).value());
  }

  // "The same" means equal within rounding. F32 weights: f32 rounding of sums taken in another
  // order (matmul and attention tiles depend on the row count), measured <= 1e-6. Q8_0: the
  // activations are rounded to int8 per row, and a last-bit f32 difference upstream can flip one
  // such rounding, which moves the logits by up to ~5e-3 of their range on these random models.
  double tol_ = 2e-5;
  bool quantized_ = false;

  std::unique_ptr<TempDir> dir_;
  std::string path_;
  std::unique_ptr<ModelFiles> files_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<KvPagePool> kv_;
  ThreadPool threads_{2};
};

TEST_P(ModelBatch, BatchOfThreeEqualsEachAlone) {
  const std::vector<std::vector<int32_t>> prompts = {tokens_of(5, 1), tokens_of(45, 2), tokens_of(17, 3)};
  const int64_t nv = model_->config().n_vocab;
  std::vector<std::vector<float>> alone;
  for (const auto& p : prompts) alone.push_back(prefill_all(*model_, *kv_, threads_, p));

  SequenceState s[3];
  std::vector<SequenceRun> runs;
  for (int i = 0; i < 3; ++i) runs.push_back({&s[i], prompts[i], LogitRows::kAll});
  auto out = model_->forward(runs, *kv_, threads_);
  ASSERT_TRUE(out.ok()) << out.error_message();
  for (int i = 0; i < 3; ++i) {
    const int64_t n = static_cast<int64_t>(prompts[i].size());
    ASSERT_EQ(out->logits_offset[i + 1] - out->logits_offset[i], n);
    EXPECT_LE(rel_max_err(out->logits_at(i, 0), alone[i].data(), n * nv), tol_) << "sequence " << i;
  }

  // A mixed step: one decode token each for sequences 0 and 2, a 9-token chunk for sequence 1,
  // against the same steps run one sequence at a time on copies of the state.
  const std::vector<int32_t> next0 = {11}, next1 = tokens_of(9, 4), next2 = {12};
  SequenceState c[3];
  for (int i = 0; i < 3; ++i) {
    c[i].kv = kv_->share_prefix(s[i].kv, s[i].n_tokens());
    c[i].recurrent = s[i].recurrent;  // hybrid models: the recurrent state is copied, not shared
  }
  std::vector<SequenceRun> step = {{&s[0], next0}, {&s[1], next1}, {&s[2], next2}};
  auto mixed = model_->forward(step, *kv_, threads_);
  ASSERT_TRUE(mixed.ok()) << mixed.error_message();
  const std::vector<int32_t>* nexts[3] = {&next0, &next1, &next2};
  for (int i = 0; i < 3; ++i) {
    SequenceRun one{&c[i], *nexts[i]};
    auto o = model_->forward({&one, 1}, *kv_, threads_);
    ASSERT_TRUE(o.ok()) << o.error_message();
    EXPECT_LE(rel_max_err(mixed->logits_row(i), o->logits_row(0), nv), tol_) << "sequence " << i;
    EXPECT_EQ(c[i].n_tokens(), s[i].n_tokens());
  }
  for (int i = 0; i < 3; ++i) {
    release_sequence(*kv_, s[i]);
    release_sequence(*kv_, c[i]);
  }
  EXPECT_EQ(kv_->kv_pages_used(), 0);
}

TEST_P(ModelBatch, ChunkSizeDoesNotChangeLogits) {
  const std::vector<int32_t> prompt = tokens_of(70, 5);
  const int64_t nv = model_->config().n_vocab;
  std::vector<float> base = prefill_all(*model_, *kv_, threads_, prompt, 64);
  for (int64_t chunk : {1, 7, 256}) {
    std::vector<float> got = prefill_all(*model_, *kv_, threads_, prompt, chunk);
    ASSERT_EQ(got.size(), base.size());
    EXPECT_LE(rel_max_err(got.data(), base.data(), static_cast<int64_t>(prompt.size()) * nv), tol_) << "chunk " << chunk;
  }
}

TEST_P(ModelBatch, TruncateThenRedecodeEqualsFreshRun) {
  const std::vector<int32_t> first = tokens_of(40, 6);
  std::vector<int32_t> second(first.begin(), first.begin() + 20);
  const std::vector<int32_t> tail = tokens_of(15, 7);
  second.insert(second.end(), tail.begin(), tail.end());
  const int64_t nv = model_->config().n_vocab;

  // Hybrid models: the recurrent state cannot be truncated, so it is put back from a snapshot
  // taken at token 20 (empty for attention-only models).
  SequenceState seq;
  SequenceRun run{&seq, {first.data(), 20}, LogitRows::kNone};
  ASSERT_TRUE(model_->forward({&run, 1}, *kv_, threads_).ok());
  const std::vector<float> snapshot = seq.recurrent;
  SequenceRun rest{&seq, {first.data() + 20, 20}, LogitRows::kNone};
  ASSERT_TRUE(model_->forward({&rest, 1}, *kv_, threads_).ok());
  truncate_sequence(*kv_, seq, 20);  // rejects the last 20 "proposed" tokens
  seq.recurrent = snapshot;
  EXPECT_EQ(seq.n_tokens(), 20);
  EXPECT_EQ(kv_->kv_pages_used(), 1);
  SequenceRun redo{&seq, tail, LogitRows::kAll};
  auto out = model_->forward({&redo, 1}, *kv_, threads_);
  ASSERT_TRUE(out.ok()) << out.error_message();
  std::vector<float> fresh = prefill_all(*model_, *kv_, threads_, second);
  EXPECT_LE(rel_max_err(out->logits.data(), fresh.data() + 20 * nv, 15 * nv), tol_);
  release_sequence(*kv_, seq);
  EXPECT_EQ(kv_->kv_pages_used(), 0);
}

TEST_P(ModelBatch, HiddenStatesOfRequestedLayers) {
  const std::vector<int32_t> a = tokens_of(10, 8), b = tokens_of(3, 9);
  const int64_t d = model_->config().n_embd;
  SequenceState sa, sb;
  std::vector<SequenceRun> runs = {{&sa, a}, {&sb, b}};
  ForwardOptions opt;
  opt.hidden_layers = {0, static_cast<int>(model_->config().n_layer) - 1};
  auto out = model_->forward(runs, *kv_, threads_, opt);
  ASSERT_TRUE(out.ok()) << out.error_message();
  ASSERT_EQ(out->hidden.size(), size_t(2 * 13 * d));
  // b alone, token by token: its layer-0 state of the last token equals the batch's.
  SequenceState sb2;
  ForwardOptions opt0;
  opt0.hidden_layers = {0};
  std::vector<float> last;
  for (int32_t t : b) {
    SequenceRun one{&sb2, {&t, 1}};
    auto o = model_->forward({&one, 1}, *kv_, threads_, opt0);
    ASSERT_TRUE(o.ok());
    last = o->hidden;
  }
  const float* batch_row = out->hidden.data() + (out->token_offset[1] + 2) * d;
  EXPECT_LE(rel_max_err(batch_row, last.data(), d), tol_);
  EXPECT_GT(rel_max_err(out->hidden.data() + 13 * d + (out->token_offset[1] + 2) * d, last.data(), d), 1e-2)
      << "the last layer's state should differ from layer 0's";
  for (SequenceState* s : {&sa, &sb, &sb2}) release_sequence(*kv_, *s);
}

TEST_P(ModelBatch, BadInputChangesNothing) {
  SequenceState seq;
  const std::vector<int32_t> good = tokens_of(8, 10);
  SequenceRun run{&seq, good};
  ASSERT_TRUE(model_->forward({&run, 1}, *kv_, threads_).ok());

  std::vector<int32_t> bad = {5, static_cast<int32_t>(model_->config().n_vocab)};
  SequenceRun r_bad{&seq, bad};
  auto e1 = model_->forward({&r_bad, 1}, *kv_, threads_);
  ASSERT_FALSE(e1.ok());
  EXPECT_NE(e1.error_message().find("outside the vocabulary"), std::string::npos) << e1.error_message();
  EXPECT_EQ(seq.n_tokens(), 8);

  SequenceRun twice[2] = {{&seq, good}, {&seq, good}};
  EXPECT_FALSE(model_->forward(twice, *kv_, threads_).ok());
  SequenceRun empty{&seq, {}};
  EXPECT_FALSE(model_->forward({&empty, 1}, *kv_, threads_).ok());
  ForwardOptions bad_layer;
  bad_layer.hidden_layers = {99};
  EXPECT_FALSE(model_->forward({&run, 1}, *kv_, threads_, bad_layer).ok());

  // Pool exhaustion: 32 pages of 32 tokens; a second sequence asking for 40 pages fails and both
  // sequences keep their length.
  SequenceState other;
  std::vector<int32_t> huge(32 * 32, 5);
  SequenceRun both[2] = {{&seq, good}, {&other, huge}};
  const std::vector<float> state_before = seq.recurrent;  // hybrid models: passes ran before the failure
  auto e2 = model_->forward(both, *kv_, threads_);
  ASSERT_FALSE(e2.ok());
  EXPECT_EQ(seq.recurrent, state_before);
  EXPECT_EQ(seq.n_tokens(), 8);
  EXPECT_EQ(other.n_tokens(), 0);
  EXPECT_EQ(kv_->kv_pages_used(), 1);

  auto small = KvPagePool::create(model_->kv_cache_config(KvFormat::kF32, 2));
  ASSERT_TRUE(small.ok());
  KvCacheConfig wrong = model_->kv_cache_config(KvFormat::kF32, 2);
  wrong.n_layer += 1;
  auto wrong_pool = KvPagePool::create(wrong);
  ASSERT_TRUE(wrong_pool.ok());
  SequenceState s2;
  SequenceRun r2{&s2, good};
  EXPECT_FALSE(model_->forward({&r2, 1}, *wrong_pool, threads_).ok());
  release_sequence(*kv_, seq);
}

// KV storage formats against the f32 cache on the same model. Bounds measured on these models:
// bf16 ~3e-3, int8 ~1e-2 relative max error of the logits.
TEST_P(ModelBatch, KvFormatsWithinBounds) {
  if (quantized_) GTEST_SKIP() << "KV bounds are stated for float weights (activation rounding would mix in)";
  // int8 KV noise (~1e-2) flips near-tie top-k expert choices, a discontinuity these bounds do not
  // describe (measured 0.13 on tiny-qwen3-moe); MoE accuracy is checked against the reference instead.
  if (GetParam().find("moe") != std::string::npos) GTEST_SKIP() << "KV bounds are stated for dense models";
  const std::vector<int32_t> prompt = tokens_of(50, 11);
  const int64_t nv = model_->config().n_vocab;
  std::vector<float> f32 = prefill_all(*model_, *kv_, threads_, prompt);
  for (auto [format, bound] : {std::pair{KvFormat::kBF16, 1e-2}, std::pair{KvFormat::kInt8, 3e-2}}) {
    auto pool = KvPagePool::create(model_->kv_cache_config(format, 8));
    ASSERT_TRUE(pool.ok());
    std::vector<float> got = prefill_all(*model_, *pool, threads_, prompt);
    std::vector<float> dec = decode_all(*model_, *pool, threads_, prompt);
    const double e = rel_max_err(got.data(), f32.data(), 50 * nv);
    const double ed = rel_max_err(dec.data(), f32.data(), 50 * nv);
    std::printf("%s KV %s: prefill %.2e decode %.2e vs f32 KV (bound %.0e)\n", GetParam().c_str(),
                kv_format_name(format), e, ed, bound);
    EXPECT_LE(e, bound);
    EXPECT_LE(ed, bound);
    EXPECT_GT(e, 0.0) << "a lossy KV format gave bit-identical logits: is it used at all?";
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, ModelBatch, ::testing::Values("tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-llama-q8_0",
                                                            "tiny-qwen3-q8_0", "tiny-qwen3-moe", "tiny-qwen3-next",
                                                            "tiny-qwen3-5", "tiny-qwen3-next-moe", "tiny-qwen3-5-moe"),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace splash
