// A GGUF file whose matrices differ in type: llama-quantize's Q4_K_M mix as the test-model generator
// writes it (Q4_K, with Q6_K for the tied embeddings and the attn_v / ffn_down of some layers). The
// loader sees each tensor's own type, prefill and token-by-token decode agree, and the logits stay
// near those of the same weights in F32: a block read in another type's layout gives noise.
#include <cmath>
#include <cstdio>

#include "gtest/gtest.h"
#include "model_test_util.h"
#include "testmodel/test_model.h"

namespace splash {
namespace {

using namespace model_test;

std::vector<int32_t> mixed_prompt() {
  std::vector<int32_t> t;
  for (int i = 0; i < 24; ++i) t.push_back(static_cast<int32_t>((i * 41 + 5) % 390 + 3));
  return t;
}

// ||a - b|| / ||b|| over n values: the whole logit matrix, less dominated by one outlier than the max.
double rel_rms_err(const float* a, const float* b, int64_t n) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

struct Logits {
  std::vector<float> prefill, decode;
  int64_t n_vocab = 0;
};

void run_model(const std::string& path, Logits& out) {
  auto files = ModelFiles::open(path);
  ASSERT_TRUE(files.ok()) << files.error_message();
  auto model = Model::load(*files);
  ASSERT_TRUE(model.ok()) << model.error_message();
  ThreadPool threads(2);
  auto kv = KvPagePool::create(model->kv_cache_config(KvFormat::kF32, 8));
  ASSERT_TRUE(kv.ok()) << kv.error_message();
  out.n_vocab = model->config().n_vocab;
  out.prefill = prefill_all(*model, *kv, threads, mixed_prompt());
  out.decode = decode_all(*model, *kv, threads, mixed_prompt());
  EXPECT_EQ(kv->kv_pages_used(), 0);
}

TEST(ModelMixedTypes, Q4KMLoadsAndRunsNearF32) {
  TempDir dir("mixed");
  TestModelSpec spec = *test_model_preset("tiny-qwen3-k");  // dim 256, ffn 512: rows fit the K-quants
  spec.n_layer = 8;  // use_more_bits(i, 8): layers 0, 3, 6, 7 get Q6_K attn_v and ffn_down
  spec.tie_embeddings = true;
  spec.gguf_type = DType::kF32;
  const std::string f32_path = dir.path() + "/f32.gguf", q4k_path = dir.path() + "/q4k.gguf",
                    mix_path = dir.path() + "/q4km.gguf";
  ASSERT_TRUE(write_test_model(spec, f32_path).ok());
  spec.gguf_type = DType::kQ4_K;
  ASSERT_TRUE(write_test_model(spec, q4k_path).ok());
  spec.gguf_mix = GgufMix::kQ4_K_M;
  Status st = write_test_model(spec, mix_path);
  ASSERT_TRUE(st.ok()) << st.error_message();

  auto files = ModelFiles::open(mix_path);
  ASSERT_TRUE(files.ok()) << files.error_message();
  const std::pair<const char*, DType> seen[] = {
      {"model.embed_tokens.weight", DType::kQ6_K},        {"model.layers.0.self_attn.v_proj.weight", DType::kQ6_K},
      {"model.layers.1.self_attn.v_proj.weight", DType::kQ4_K}, {"model.layers.3.mlp.down_proj.weight", DType::kQ6_K},
      {"model.layers.4.mlp.down_proj.weight", DType::kQ4_K},    {"model.layers.0.self_attn.q_proj.weight", DType::kQ4_K}};
  for (const auto& [name, type] : seen) {
    const ModelTensor* t = files->find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->dtype, type) << name;
  }

  Logits ref, q4k, mix;
  ASSERT_NO_FATAL_FAILURE(run_model(f32_path, ref));
  ASSERT_NO_FATAL_FAILURE(run_model(q4k_path, q4k));
  ASSERT_NO_FATAL_FAILURE(run_model(mix_path, mix));
  ASSERT_EQ(mix.prefill.size(), ref.prefill.size());
  ASSERT_EQ(mix.decode.size(), mix.prefill.size());
  for (float v : mix.prefill) ASSERT_TRUE(std::isfinite(v));
  const int64_t n = static_cast<int64_t>(mix.prefill.size());
  const double e_steps = rel_max_err(mix.decode.data(), mix.prefill.data(), n);
  const double e_mix = rel_rms_err(mix.prefill.data(), ref.prefill.data(), n);
  const double e_q4k = rel_rms_err(q4k.prefill.data(), ref.prefill.data(), n);
  std::printf("Q4_K_M: decode vs prefill %.2e (max); against F32 weights %.3f (pure Q4_K %.3f), rms\n", e_steps,
              e_mix, e_q4k);
  // Prefill against decode: int8 activation rounding of other row counts, as the batch tests (1e-2).
  EXPECT_LE(e_steps, 1e-2);
  // Against F32 weights: the weight rounding, which these random 8-layer models amplify (measured:
  // Q8_0 0.034, Q6_K 0.087, Q5_K 0.19, Q4_K 0.33, this mix 0.25; unrelated logits give ~1.4).
  // The Q6_K tensors must bring the mix closer than pure Q4_K.
  EXPECT_LT(e_mix, 0.5);
  EXPECT_LT(e_mix, e_q4k);
}

}  // namespace
}  // namespace splash
