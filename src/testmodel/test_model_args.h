// Command-line options of `splash make-test-model`, parsed here so the CLI only forwards argv.
//
//   --preset NAME         tiny-llama | tiny-qwen2 | tiny-qwen3 | tiny-llama-k | tiny-qwen3-k |
//                         qwen3-0.6b | qwen3-1.7b | tiny-qwen3-moe | qwen3-moe-bench (default tiny-llama); the flags below override it
//   --format gguf|safetensors   (default gguf)
//   --type T              GGUF matrix type: f32 f16 bf16 q8_0 q4_0 q4_k q5_k q6_k, or a llama-quantize
//                         mix: q4_k_m q5_k_m (testmodel/gguf_mix.h)
//   --dtype T             safetensors dtype: f32 f16 bf16
//   --mlx-bits N          MLX affine quantization bits (2,3,4,5,6,8; implies --format safetensors)
//   --mlx-group N         MLX group size (32, 64, 128; default 64)
//   --arch A --dim N --layers N --heads N --kv-heads N --head-dim N --ffn N --vocab N --ctx N
//   --rope-theta F --rms-eps F --tie | --no-tie --seed N
//   --experts N --experts-used N --expert-ffn N --shared-expert-ffn N --no-norm-topk   (qwen3_moe)
//   --interval N --layer-types --linear-heads K,V --linear-head-dim N --mlx-linear-bits N   (hybrids)
//   --mtp N               an MTP head (hybrids, GGUF or plain safetensors; N = 1)
//   --tokenizer PATH      a real tokenizer.json (e.g. Qwen3's) instead of the synthetic one
//   --out PATH            output file (gguf) or directory (safetensors); required
#pragma once

#include <span>
#include <string>

#include "core/result.h"
#include "testmodel/test_model.h"

namespace splash {

struct TestModelArgs {
  TestModelSpec spec;
  std::string out_path;
};

// `args` excludes the program and subcommand names. Errors name the flag and the bad value.
Result<TestModelArgs> parse_test_model_args(std::span<const std::string> args);

// One-paragraph usage text for --help.
std::string test_model_usage();

}  // namespace splash
