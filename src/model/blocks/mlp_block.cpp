#include "model/blocks/mlp_block.h"

#include "backend/cpu/activation.h"
#include "backend/cpu/norm.h"

namespace splash {

Result<MlpWeights> load_swiglu_mlp(const WeightLoader& loader, int il) {
  const ModelConfig& c = loader.config();
  MlpWeights w;
  SPLASH_TRY(w.norm, loader.vector(loader.layer_name(il, "post_attention_layernorm.weight"), c.n_embd));
  SPLASH_TRY(w.gate_up, loader.projections({loader.layer_name(il, "mlp.gate_proj.weight"),
                                            loader.layer_name(il, "mlp.up_proj.weight")},
                                           {c.n_ff, c.n_ff}, c.n_embd, {}));
  SPLASH_TRY(w.down.w, loader.matrix(loader.layer_name(il, "mlp.down_proj.weight"), c.n_embd, c.n_ff));
  return w;
}

void swiglu_mlp_block(const MlpWeights& w, LayerContext& ctx) {
  const ModelConfig& c = *ctx.config;
  Workspace& ws = *ctx.ws;
  const int64_t n = ctx.n_rows, d = c.n_embd, f = c.n_ff;

  ForwardProfile* const prof = ctx.profile;
  {
    ProfileScope ps(prof, ForwardOp::kNorm);
    rms_norm(ctx.x, w.norm.data(), c.rms_eps, ws.h.data(), n, d, ctx.isa);
  }
  if (w.gate_up.size() == 1) {
    {
      ProfileScope ps(prof, ForwardOp::kMatmul);
      matmul(w.gate_up[0].w, ws.h.data(), ws.ff.data(), n, *ctx.threads);  // [n, 2f]: gate | up
    }
    ProfileScope ps(prof, ForwardOp::kActivation);
    swiglu(ws.ff.data(), ws.ff.data() + f, 2 * f, ws.act.data(), n, f, ctx.isa);
  } else {
    float* gate = ws.ff.data();
    float* up = ws.ff.data() + n * f;
    {
      ProfileScope ps(prof, ForwardOp::kMatmul);
      matmul(w.gate_up[0].w, ws.h.data(), gate, n, *ctx.threads);
      matmul(w.gate_up[1].w, ws.h.data(), up, n, *ctx.threads);
    }
    ProfileScope ps(prof, ForwardOp::kActivation);
    swiglu(gate, up, f, ws.act.data(), n, f, ctx.isa);
  }
  {
    ProfileScope ps(prof, ForwardOp::kMatmul);
    matmul(w.down.w, ws.act.data(), ws.out.data(), n, *ctx.threads);
  }
  ProfileScope ps(prof, ForwardOp::kResidual);
  add(ctx.x, ws.out.data(), ctx.x, n * d);
}

}  // namespace splash
