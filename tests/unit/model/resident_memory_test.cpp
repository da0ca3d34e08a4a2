// Resident memory after load is the weights (repacked copies held once, file pages of repacked
// tensors dropped), the norms and whatever RoPE rows are filled, plus a small bound; the KV pool adds
// its own bytes and nothing more. Guards against copies made at load that stay resident (the fused
// projections' concatenation did: +50% of the weights) and eager tables sized for the whole
// context window. RSS from /proc/self/statm; skipped under ASan (shadow memory and the free
// quarantine make RSS meaningless there).
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "gtest/gtest.h"
#include "model_test_util.h"
#include "testmodel/test_model.h"

#if defined(__SANITIZE_ADDRESS__)
#define SPLASH_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define SPLASH_UNDER_ASAN 1
#endif
#endif

namespace splash {
namespace {

using namespace model_test;

// The arena bound: allocator slack, thread-local buffers and the load's small vectors.
constexpr int64_t kArenaBound = 4 << 20;

int64_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  int64_t size = 0, resident = 0;
  in >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

struct Case {
  const char* name;
  DType gguf_type;  // kF32 + mlx_bits > 0: MLX safetensors
  uint32_t mlx_bits;
};

class ResidentMemory : public ::testing::TestWithParam<Case> {};

TEST_P(ResidentMemory, AfterLoadIsWeightsPlusSmallArenas) {
#ifdef SPLASH_UNDER_ASAN
  GTEST_SKIP() << "RSS is not meaningful under AddressSanitizer";
#endif
  const Case c = GetParam();
  TempDir dir("resident");
  TestModelSpec spec = *test_model_preset("tiny-qwen3");
  spec.n_embd = 512;
  spec.n_layer = 8;
  spec.n_head = 8;
  spec.n_head_kv = 4;
  spec.head_dim = 64;
  spec.n_ff = 1536;
  spec.context_length = 40960;  // a Qwen3-sized window: nothing may be sized for all of it at load
  spec.tie_embeddings = true;
  spec.gguf_type = c.gguf_type;
  spec.mlx_bits = c.mlx_bits;
  if (c.mlx_bits) spec.format = TestModelFormat::kSafetensors;
  const std::string path = dir.path() + (c.mlx_bits ? "/m" : "/m.gguf");
  ASSERT_TRUE(write_test_model(spec, path).ok());
  auto files = ModelFiles::open(path);
  ASSERT_TRUE(files.ok()) << files.error_message();

  // Hand the heap's free memory (the model writer's buffers) back first, or the load would reuse
  // it unseen and a copy left behind could hide in it.
  malloc_trim(0);
  const int64_t before = resident_bytes();
  auto model = Model::load(*files);
  ASSERT_TRUE(model.ok()) << model.error_message();
  const int64_t after_load = resident_bytes();
  const ModelMemory mm = model->memory();
  // Every matrix is repacked at AVX2 and above; the scalar tier reads Q4_0 / Q8_0 in place (then
  // their file pages are what becomes resident, up to the mapped bytes).
  const auto held = static_cast<int64_t>(mm.weights_owned + mm.weights_mapped + mm.vectors + mm.rope);
  std::printf("%s: resident +%.2f MiB at load; weights repacked %.2f MiB, in place %.2f MiB, vectors %.2f KiB, "
              "RoPE %.2f KiB\n",
              c.name, (after_load - before) / 1048576.0, mm.weights_owned / 1048576.0, mm.weights_mapped / 1048576.0,
              mm.vectors / 1024.0, mm.rope / 1024.0);
  EXPECT_GT(mm.weights_owned + mm.weights_mapped, uint64_t{10} << 20);  // large enough for a copy to show
  EXPECT_LE(after_load - before, held + kArenaBound);
  EXPECT_EQ(mm.rope, 0u);  // filled on first use only

  auto kv = KvPagePool::create(model->kv_cache_config(KvFormat::kInt8, 64));
  ASSERT_TRUE(kv.ok());
  ThreadPool threads(2);
  const std::vector<int32_t> prompt(100, 3);
  const auto logits = prefill_all(*model, *kv, threads, prompt);
  ASSERT_FALSE(logits.empty());
  const int64_t after_run = resident_bytes();
  // One forward of 100 tokens: the KV pool, one RoPE chunk, the forward's workspace (a few MB
  // at this size) and the matmul's activation buffers.
  EXPECT_LE(after_run - before, held + kv->kv_bytes_total() + static_cast<int64_t>(model->memory().rope) +
                                    2 * kArenaBound);
  EXPECT_GT(model->memory().rope, 0u);
}

INSTANTIATE_TEST_SUITE_P(Formats, ResidentMemory,
                         ::testing::Values(Case{"Q4_0", DType::kQ4_0, 0}, Case{"Q8_0", DType::kQ8_0, 0},
                                           Case{"MLX4", DType::kF32, 4}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace splash
