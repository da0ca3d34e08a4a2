#include "model/blocks/gated_deltanet_block.h"

#include <cmath>
#include <cstring>

#include "backend/cpu/activation.h"
#include "backend/cpu/gated_delta.h"
#include "backend/cpu/norm.h"
#include "formats/architecture_facts.h"
#include "model/architecture.h"
#include "model/blocks/block_util.h"

namespace splash {

namespace {

struct Dims {
  int64_t nk, dk, nv, dv, kernel;
  int64_t kd() const { return nk * dk; }
  int64_t vd() const { return nv * dv; }
  int64_t conv_dim() const { return 2 * kd() + vd(); }
  int64_t proj_rows() const { return conv_dim() + vd() + 2 * nv; }  // q k v z b a
};

Dims dims_of(const ModelConfig& c) {
  return {c.linear_n_key_heads, c.linear_key_head_dim, c.linear_n_value_heads, c.linear_value_head_dim,
          c.linear_conv_kernel};
}

}  // namespace

void fold_zero_centred_norm(const WeightLoader& loader, std::vector<float>& w) {
  if (loader.files().zero_centred_gains_shifted()) return;
  for (float& v : w) v += 1.0f;
}

int64_t gdn_state_floats(const ModelConfig& c) {
  const Dims d = dims_of(c);
  return (d.kernel - 1) * d.conv_dim() + d.nv * d.dk * d.dv;
}

Result<GatedDeltaNetWeights> load_gated_deltanet(const WeightLoader& loader, int il) {
  const ModelConfig& c = loader.config();
  const Dims d = dims_of(c);
  const bool gguf = loader.files().format() == ModelFormat::kGguf;
  auto name = [&](const char* s) { return layer_tensor_name(il, str_cat("linear_attn.", s)); };
  GatedDeltaNetWeights w;
  SPLASH_TRY(w.norm, loader.vector(layer_tensor_name(il, "input_layernorm.weight"), c.n_embd));
  fold_zero_centred_norm(loader, w.norm);
  if (loader.find(name("in_proj_qkvz.weight")) != nullptr) {
    w.grouped = true;
    SPLASH_TRY(w.in, loader.projections({name("in_proj_qkvz.weight"), name("in_proj_ba.weight")},
                                        {2 * d.kd() + 2 * d.vd(), 2 * d.nv}, c.n_embd, {}));
  } else if (loader.find(name("in_proj_b.weight")) == nullptr && loader.find(name("in_proj_ba.weight")) != nullptr) {
    // llama.cpp's current qwen3next converter splits in_proj_qkvz into [q | k | v] (attn_qkv) and z
    // (attn_gate), value heads still grouped, but keeps in_proj_ba grouped per key head (ssm_ba).
    w.ba_grouped = true;
    SPLASH_TRY(w.in, loader.projections({name("in_proj_qkv.weight"), name("in_proj_z.weight"), name("in_proj_ba.weight")},
                                        {d.conv_dim(), d.vd(), 2 * d.nv}, c.n_embd, {}));
  } else {
    SPLASH_TRY(w.in, loader.projections({name("in_proj_qkv.weight"), name("in_proj_z.weight"),
                                         name("in_proj_b.weight"), name("in_proj_a.weight")},
                                        {d.conv_dim(), d.vd(), d.nv, d.nv}, c.n_embd, {}));
  }
  // llama.cpp's qwen35 converter tiles the value heads (qwen3next keeps the grouping).
  w.v_heads_tiled = gguf && architecture_facts(c.architecture).gguf_v_heads_tiled && d.nv > d.nk;
  SPLASH_TRY(w.conv, loader.vector(name("conv1d.weight"), d.conv_dim() * d.kernel));
  SPLASH_TRY(w.dt_bias, loader.vector(name("dt_bias"), d.nv));
  SPLASH_TRY(w.a, loader.vector(name("A_log"), d.nv));  // GGUF: ssm_a, already A = -exp(A_log)
  if (!gguf)
    for (float& v : w.a) v = -std::exp(v);
  SPLASH_TRY(w.out_norm, loader.vector(name("norm.weight"), d.dv));
  SPLASH_TRY(w.out.w, loader.matrix(name("out_proj.weight"), c.n_embd, d.vd()));
  return w;
}

namespace {

// Rows of the input projections -> mixed [q k v], z, b, a (canonical order: key heads in order,
// value heads in the file's order).
void scatter_projections(const GatedDeltaNetWeights& w, const Dims& d, const float* row, float* mixed, float* z,
                         float* b, float* a) {
  if (!w.grouped) {
    std::memcpy(mixed, row, d.conv_dim() * sizeof(float));
    std::memcpy(z, row + d.conv_dim(), d.vd() * sizeof(float));
    const float* ba = row + d.conv_dim() + d.vd();
    if (!w.ba_grouped) {
      std::memcpy(b, ba, d.nv * sizeof(float));
      std::memcpy(a, ba + d.nv, d.nv * sizeof(float));
      return;
    }
    const int64_t r = d.nv / d.nk;  // per key head g: [b_g (r) a_g (r)]
    for (int64_t g = 0; g < d.nk; ++g) {
      std::memcpy(b + g * r, ba + g * 2 * r, r * sizeof(float));
      std::memcpy(a + g * r, ba + g * 2 * r + r, r * sizeof(float));
    }
    return;
  }
  // Qwen3-Next: per key head g, [q_g (dk) k_g (dk) v_g (r dv) z_g (r dv)], then per g [b_g (r) a_g (r)].
  const int64_t r = d.nv / d.nk, per = 2 * d.dk + 2 * r * d.dv;
  for (int64_t g = 0; g < d.nk; ++g) {
    const float* src = row + g * per;
    std::memcpy(mixed + g * d.dk, src, d.dk * sizeof(float));
    std::memcpy(mixed + d.kd() + g * d.dk, src + d.dk, d.dk * sizeof(float));
    std::memcpy(mixed + 2 * d.kd() + g * r * d.dv, src + 2 * d.dk, r * d.dv * sizeof(float));
    std::memcpy(z + g * r * d.dv, src + 2 * d.dk + r * d.dv, r * d.dv * sizeof(float));
    const float* ba = row + d.nk * per + g * 2 * r;
    std::memcpy(b + g * r, ba, r * sizeof(float));
    std::memcpy(a + g * r, ba + r, r * sizeof(float));
  }
}

}  // namespace

void gated_deltanet_block(const GatedDeltaNetWeights& w, LayerContext& ctx) {
  const ModelConfig& c = *ctx.config;
  const Dims d = dims_of(c);
  Workspace& ws = *ctx.ws;
  GdnScratch& s = ws.gdn;
  const int64_t n = ctx.n_rows, P = d.proj_rows(), C = d.conv_dim();
  ForwardProfile* const prof = ctx.profile;
  grow(s.proj, n * P);
  grow(s.mixed, n * C);
  grow(s.conv, n * C);
  grow(s.z, n * d.vd());
  grow(s.g, n * d.nv);
  grow(s.beta, n * d.nv);
  grow(s.o, n * d.vd());

  {
    ProfileScope ps(prof, ForwardOp::kNorm);
    rms_norm(ctx.x, w.norm.data(), c.rms_eps, ws.h.data(), n, c.n_embd, ctx.isa);
  }
  {
    ProfileScope ps(prof, ForwardOp::kLinearMatmul);
    if (w.in.size() == 1) {
      matmul(w.in[0].w, ws.h.data(), s.proj.data(), n, *ctx.threads);
    } else {
      int64_t col = 0;  // copy each projection's rows into their place of the concatenated row
      for (const Projection& p : w.in) {
        const int64_t rows = p.w.rows();
        grow(s.part, n * rows);
        matmul(p.w, ws.h.data(), s.part.data(), n, *ctx.threads);
        for (int64_t r = 0; r < n; ++r)
          std::memcpy(s.proj.data() + r * P + col, s.part.data() + r * rows, rows * sizeof(float));
        col += rows;
      }
    }
  }
  {
  ProfileScope ps_rest(prof, ForwardOp::kLinearAttention);
  std::vector<float> b_row(static_cast<size_t>(d.nv)), a_row(static_cast<size_t>(d.nv));
  for (int64_t r = 0; r < n; ++r) {
    scatter_projections(w, d, s.proj.data() + r * P, s.mixed.data() + r * C, s.z.data() + r * d.vd(), b_row.data(),
                        a_row.data());
    for (int64_t h = 0; h < d.nv; ++h) {
      s.beta[r * d.nv + h] = 1.0f / (1.0f + std::exp(-b_row[h]));
      const float x = a_row[h] + w.dt_bias[h];
      const float softplus = x > 20.0f ? x : std::log1p(std::exp(x));
      s.g[r * d.nv + h] = w.a[h] * softplus;
    }
  }
  const int64_t conv_state = (d.kernel - 1) * C;
  for (const RowRun& run : ctx.runs) {
    SPLASH_CHECK(run.recurrent != nullptr);
    float* state = run.recurrent + ctx.recurrent_offset;
    causal_conv_silu(s.mixed.data() + run.row0 * C, C, state, w.conv.data(), static_cast<int>(d.kernel), run.n_rows, C,
                     s.conv.data() + run.row0 * C);
  }
  // q, k: l2-normalized per key head (eps 1e-6 as the reference models), q scaled by 1/sqrt(dk).
  for (int64_t r = 0; r < n; ++r) {
    float* row = s.conv.data() + r * C;
    l2_normalize_rows(row, d.dk, d.nk, d.dk, 1e-6f, 1.0f / std::sqrt(static_cast<float>(d.dk)));
    l2_normalize_rows(row + d.kd(), d.dk, d.nk, d.dk, 1e-6f, 1.0f);
  }

  // Delta rule: one task per (sequence, value head).
  const int64_t n_runs = static_cast<int64_t>(ctx.runs.size());
  if (static_cast<int>(s.chunk.size()) < ctx.threads->size()) s.chunk.resize(static_cast<size_t>(ctx.threads->size()));
  const int64_t r_ratio = d.nv / d.nk;
  ctx.threads->parallel_for(n_runs * d.nv, [&](int64_t task, int thread) {
    const RowRun& run = ctx.runs[static_cast<size_t>(task / d.nv)];
    const int64_t h = task % d.nv;
    const int64_t kh = w.v_heads_tiled ? h % d.nk : h / r_ratio;
    const float* base = s.conv.data() + run.row0 * C;
    DeltaRuleHead dh;
    dh.q = base + kh * d.dk;
    dh.k = base + d.kd() + kh * d.dk;
    dh.v = base + 2 * d.kd() + h * d.dv;
    dh.q_stride = dh.k_stride = dh.v_stride = C;
    dh.g = s.g.data() + run.row0 * d.nv + h;
    dh.beta = s.beta.data() + run.row0 * d.nv + h;
    dh.gb_stride = d.nv;
    dh.out = s.o.data() + run.row0 * d.vd() + h * d.dv;
    dh.out_stride = d.vd();
    dh.n = run.n_rows;
    dh.dk = static_cast<int>(d.dk);
    dh.dv = static_cast<int>(d.dv);
    float* S = run.recurrent + ctx.recurrent_offset + conv_state + h * d.dk * d.dv;
    if (run.n_rows > kGdnRecurrentMaxRows) {
      gated_delta_chunked(dh, S, kGdnChunk, s.chunk[static_cast<size_t>(thread)], ctx.isa);
    } else {
      gated_delta_recurrent(dh, S, ctx.isa);
    }
  });

  // Gated RMSNorm per value head: rms_norm(o) * w * silu(z), or * sigmoid(z).
  rms_norm(s.o.data(), w.out_norm.data(), c.rms_eps, s.o.data(), n * d.nv, d.dv, ctx.isa);
  const bool sigmoid_gate = w.output_gate_sigmoid;
  for (int64_t i = 0; i < n * d.vd(); ++i) {
    const float zi = s.z[static_cast<size_t>(i)];
    s.o[static_cast<size_t>(i)] *= (sigmoid_gate ? 1.0f : zi) / (1.0f + std::exp(-zi));
  }
  }  // linear-attention scope
  {
    ProfileScope ps(prof, ForwardOp::kLinearMatmul);
    matmul(w.out.w, s.o.data(), ws.out.data(), n, *ctx.threads);
  }
  ProfileScope ps(prof, ForwardOp::kResidual);
  add(ctx.x, ws.out.data(), ctx.x, n * c.n_embd);
}

}  // namespace splash
