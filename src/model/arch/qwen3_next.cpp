// qwen3_next (Qwen3-Next): the hybrid layer of arch/qwen3_hybrid.h with Gated DeltaNet input
// projections packed per key head (in_proj_qkvz, in_proj_ba; GGUF ssm_in, ssm_ba).
#include "model/arch/qwen3_hybrid.h"

namespace splash {

namespace {

Status check(const ModelConfig& c) { return qwen3_hybrid::check(c, "qwen3_next"); }

}  // namespace

extern const Architecture kArchitecture_qwen3_next{"qwen3_next", check, qwen3_hybrid::load, qwen3_hybrid::forward};

}  // namespace splash
