// The SwiGLU MLP block of a pre-norm decoder layer: x += down(silu(gate(h)) * up(h)), h = rms_norm(x).
#pragma once

#include "model/layer_context.h"
#include "model/weights.h"

namespace splash {

Result<MlpWeights> load_swiglu_mlp(const WeightLoader& loader, int il);

void swiglu_mlp_block(const MlpWeights& w, LayerContext& ctx);

}  // namespace splash
