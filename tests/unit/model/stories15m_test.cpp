// The real demo model (stories15M, llama2.c format) against the numpy reference's golden data:
// greedy tokens, perplexity, and top-1 agreement of quantized copies. Skipped when the demo file is
// absent (scripts/setup fetches it).
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "convert/convert.h"
#include "gtest/gtest.h"
#include "model_test_util.h"
#include "nlohmann/json.hpp"

namespace splash {
namespace {

using namespace model_test;

std::string demo_path() {
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.cache/splash/demo/stories15M.bin";
}

std::string golden(const char* name) { return std::string(SPLASH_SOURCE_DIR) + "/tests/reference/golden/" + name; }

class Stories15M : public ::testing::Test {
 protected:
  void SetUp() override {
    if (unit_only()) GTEST_SKIP() << "reference test: run by the model_reference ctest entry";
    if (!std::filesystem::exists(demo_path())) GTEST_SKIP() << demo_path() << " is absent";
  }
};

// Greedy decode from BOS, one token per forward, equals the reference's 200 ids.
TEST_F(Stories15M, Greedy200MatchesGolden) {
  auto files = ModelFiles::open(demo_path());
  ASSERT_TRUE(files.ok()) << files.error_message();
  auto model = Model::load(*files);
  ASSERT_TRUE(model.ok()) << model.error_message();
  ThreadPool threads(2);
  auto kv = KvPagePool::create(model->kv_cache_config(KvFormat::kF32, 16));
  ASSERT_TRUE(kv.ok());
  const std::vector<int32_t> expected = read_ids_file(golden("stories15M_greedy200.ids"));
  ASSERT_EQ(expected.size(), 200u);

  SequenceState seq;
  int32_t tok = 1;
  std::vector<int32_t> got;
  for (int i = 0; i < 200; ++i) {
    SequenceRun run{&seq, {&tok, 1}};
    auto out = model->forward({&run, 1}, *kv, threads);
    ASSERT_TRUE(out.ok()) << out.error_message();
    tok = argmax(out->logits_row(0), out->n_vocab);
    got.push_back(tok);
  }
  release_sequence(*kv, seq);
  int first_diff = -1;
  for (int i = 0; i < 200 && first_diff < 0; ++i)
    if (got[i] != expected[i]) first_diff = i;
  EXPECT_EQ(first_diff, -1) << "first differing token at " << first_diff;
}

// Perplexity with the golden protocol: windows of [BOS] + 255 text ids, each text id predicted once.
double perplexity(const Model& model, KvPagePool& kv, ThreadPool& threads, const std::vector<int32_t>& ids,
                  std::vector<int>* top1) {
  const int64_t win = 255;
  double nll = 0.0;
  int64_t count = 0;
  for (size_t s = 0; s < ids.size(); s += win) {
    std::vector<int32_t> toks = {1};
    for (size_t i = s; i < std::min(ids.size(), s + win); ++i) toks.push_back(ids[i]);
    SequenceState seq;
    SequenceRun run{&seq, toks, LogitRows::kAll};
    auto out = model.forward({&run, 1}, kv, threads);
    EXPECT_TRUE(out.ok()) << out.error_message();
    release_sequence(kv, seq);
    if (!out.ok()) return 0.0;
    for (size_t t = 0; t + 1 < toks.size(); ++t) {
      const float* row = out->logits_at(0, static_cast<int64_t>(t));
      double mx = row[0];
      for (int64_t v = 1; v < out->n_vocab; ++v) mx = std::max(mx, double{row[v]});
      double sum = 0.0;
      for (int64_t v = 0; v < out->n_vocab; ++v) sum += std::exp(row[v] - mx);
      nll += std::log(sum) + mx - row[toks[t + 1]];
      ++count;
      if (top1) top1->push_back(argmax(row, out->n_vocab));
    }
  }
  return std::exp(nll / static_cast<double>(count));
}

double golden_ppl() {
  std::ifstream f(golden("stories15M_ppl.json"));
  return nlohmann::json::parse(f)["perplexity"].get<double>();
}

TEST_F(Stories15M, PerplexityAndQuantizedAgreement) {
  auto files = ModelFiles::open(demo_path());
  ASSERT_TRUE(files.ok()) << files.error_message();
  auto model = Model::load(*files);
  ASSERT_TRUE(model.ok()) << model.error_message();
  ThreadPool threads(2);
  auto kv = KvPagePool::create(model->kv_cache_config(KvFormat::kF32, 16));
  ASSERT_TRUE(kv.ok());
  const std::vector<int32_t> ids = read_ids_file(golden("ppl_text.ids"));
  ASSERT_EQ(ids.size(), 1437u);

  std::vector<int> top_f32;
  const double ppl = perplexity(*model, *kv, threads, ids, &top_f32);
  const double want = golden_ppl();
  std::printf("stories15M perplexity %.4f (golden %.4f, rel diff %.2e)\n", ppl, want, std::fabs(ppl - want) / want);
  EXPECT_NEAR(ppl, want, want * 0.005);

  TempDir dir("stories");
  struct Copy {
    const char* name;
    ConvertOptions opt;
  };
  std::vector<Copy> copies(2);
  copies[0].name = "q8_0.gguf";
  copies[0].opt.target = ConvertTarget::kGguf;
  copies[0].opt.gguf_type = DType::kQ8_0;
  copies[1].name = "mlx8";
  copies[1].opt.target = ConvertTarget::kSafetensors;
  copies[1].opt.mlx = MlxQuantParams{};
  copies[1].opt.mlx->bits = 8;
  copies[1].opt.mlx->group_size = 32;
  copies[1].opt.float_type = DType::kF16;
  for (const Copy& c : copies) {
    const std::string out_path = dir.path() + "/" + c.name;
    auto rep = convert_model(*files, nullptr, out_path, c.opt);
    ASSERT_TRUE(rep.ok()) << rep.error_message();
    auto qfiles = ModelFiles::open(out_path);
    ASSERT_TRUE(qfiles.ok()) << qfiles.error_message();
    auto qmodel = Model::load(*qfiles);
    ASSERT_TRUE(qmodel.ok()) << qmodel.error_message();
    std::vector<int> top_q;
    const double qppl = perplexity(*qmodel, *kv, threads, ids, &top_q);
    ASSERT_EQ(top_q.size(), top_f32.size());
    int agree = 0;
    for (size_t i = 0; i < top_q.size(); ++i) agree += top_q[i] == top_f32[i];
    const double frac = static_cast<double>(agree) / static_cast<double>(top_q.size());
    std::printf("stories15M %s: top-1 agreement with F32 %.2f%%, perplexity %.4f (%s)\n", c.name, 100.0 * frac, qppl,
                qmodel->describe_weights().c_str());
    // Measured: Q8_0 96.6%, MLX 8-bit g32 97.6%. The numpy reference on the same Q8_0 file (weights
    // dequantized, activations in f64) agrees with F32 on only 97.9% of these positions, so 98% is
    // out of reach for weight quantization alone on this 15M model; our kernels add int8
    // activation rounding. The bound catches a broken quantized path (that falls far below).
    EXPECT_GE(frac, 0.96) << c.name;
  }
}

}  // namespace
}  // namespace splash
