// ModelMemory's decode traffic (what `splash bench` divides by for decode GB/s): a MoE layer's
// routed experts count n_expert_used / n_expert of their bytes, everything else in full, and a
// hybrid's recurrent state is read and written once per token.
#include "gtest/gtest.h"
#include "model_test_util.h"
#include "testmodel/test_model.h"

namespace splash {
namespace {

using namespace model_test;

struct Loaded {
  ModelMemory mm;
  int64_t expert_file_bytes = 0;  // the stacked expert tensors as stored (Q8_0: the packed size)
  int64_t state_floats = 0;
};

Loaded load(const TestModelSpec& spec, const std::string& path) {
  EXPECT_TRUE(write_test_model(spec, path).ok());
  auto files = ModelFiles::open(path);
  EXPECT_TRUE(files.ok()) << files.error_message();
  Loaded out;
  for (const auto& t : files->tensors())
    if (t.stored_name.find("_exps") != std::string::npos) out.expert_file_bytes += static_cast<int64_t>(t.n_bytes());
  auto model = Model::load(*files);
  EXPECT_TRUE(model.ok()) << model.error_message();
  out.mm = model->memory();
  out.state_floats = model->recurrent_state_floats();
  return out;
}

TEST(DecodeRead, RoutedExpertsCountInProportionToTheOnesSelected) {
  for (const char* preset : {"tiny-qwen3-moe", "tiny-qwen3-next-moe"}) {
    SCOPED_TRACE(preset);
    TempDir dir("decode-read");
    TestModelSpec spec = *test_model_preset(preset);
    spec.gguf_type = DType::kQ8_0;
    spec.n_expert_used = 2;
    const Loaded two = load(spec, dir.path() + "/k2.gguf");
    spec.n_expert_used = 6;
    const Loaded six = load(spec, dir.path() + "/k6.gguf");
    ASSERT_GT(two.expert_file_bytes, 0);
    // Same tensors, so the same bytes held; decode reads 4 / 8 more of the experts at top 6.
    EXPECT_EQ(two.mm.weights_owned + two.mm.weights_mapped, six.mm.weights_owned + six.mm.weights_mapped);
    EXPECT_GE(two.mm.weights_owned + two.mm.weights_mapped, static_cast<uint64_t>(two.expert_file_bytes));
    EXPECT_EQ(six.mm.decode_read - two.mm.decode_read,
              static_cast<uint64_t>(two.expert_file_bytes) * (6 - 2) / spec.n_expert);
  }
}

TEST(DecodeRead, RecurrentStateIsReadAndWrittenOncePerToken) {
  TempDir dir("decode-read");
  const Loaded hybrid = load(*test_model_preset("tiny-qwen3-5"), dir.path() + "/h.gguf");
  ASSERT_GT(hybrid.state_floats, 0);
  EXPECT_EQ(hybrid.mm.decode_state, 2 * static_cast<uint64_t>(hybrid.state_floats) * sizeof(float));
  const Loaded dense = load(*test_model_preset("tiny-qwen3"), dir.path() + "/d.gguf");
  EXPECT_EQ(dense.mm.decode_state, 0u);
}

}  // namespace
}  // namespace splash
