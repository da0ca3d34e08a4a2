#include "model/blocks/attention_block.h"

#include <cmath>
#include <cstring>

#include "backend/cpu/activation.h"
#include "backend/cpu/attention.h"
#include "backend/cpu/norm.h"

namespace splash {

Result<AttentionWeights> load_attention(const WeightLoader& loader, int il, const AttentionLoadSpec& spec) {
  const ModelConfig& c = loader.config();
  const int64_t q_dim = int64_t{c.n_head} * c.head_dim;
  const int64_t kv_dim = int64_t{c.n_head_kv} * c.head_dim;
  AttentionWeights w;
  SPLASH_TRY(w.norm, loader.vector(loader.layer_name(il, "input_layernorm.weight"), c.n_embd));
  std::vector<std::string> names, biases;
  for (const char* p : {"q_proj", "k_proj", "v_proj"}) {
    names.push_back(loader.layer_name(il, str_cat("self_attn.", p, ".weight")));
    if (spec.bias) biases.push_back(loader.layer_name(il, str_cat("self_attn.", p, ".bias")));
  }
  w.output_gate = spec.output_gate;
  const int64_t q_rows = spec.output_gate ? 2 * q_dim : q_dim;  // [q | gate] per head
  SPLASH_TRY(w.qkv, loader.projections(names, {q_rows, kv_dim, kv_dim}, c.n_embd, biases));
  if (spec.qk_norm) {
    SPLASH_TRY(w.q_norm, loader.vector(loader.layer_name(il, "self_attn.q_norm.weight"), c.head_dim));
    SPLASH_TRY(w.k_norm, loader.vector(loader.layer_name(il, "self_attn.k_norm.weight"), c.head_dim));
  }
  SPLASH_TRY(w.o.w, loader.matrix(loader.layer_name(il, "self_attn.o_proj.weight"), c.n_embd, q_dim));
  return w;
}

namespace {

void add_bias(float* y, const std::vector<float>& bias, int64_t n_rows, int64_t stride) {
  if (bias.empty()) return;
  const int64_t n = static_cast<int64_t>(bias.size());
  for (int64_t r = 0; r < n_rows; ++r) add(y + r * stride, bias.data(), y + r * stride, n);
}

// y[:, :] = x * P^T + bias, y [n_rows, P.rows()] contiguous.
void project(const Projection& p, const float* x, float* y, int64_t n_rows, ThreadPool& threads,
             ForwardProfile* prof) {
  ProfileScope ps(prof, ForwardOp::kMatmul);
  matmul(p.w, x, y, n_rows, threads);
  add_bias(y, p.bias, n_rows, p.w.rows());
}

}  // namespace

void attention_block(const AttentionWeights& w, LayerContext& ctx) {
  const ModelConfig& c = *ctx.config;
  Workspace& ws = *ctx.ws;
  const int64_t n = ctx.n_rows, d = c.n_embd, hd = c.head_dim;
  const int64_t q_dim = c.n_head * hd, kv_dim = c.n_head_kv * hd;

  ForwardProfile* const prof = ctx.profile;
  {
    ProfileScope ps(prof, ForwardOp::kNorm);
    rms_norm(ctx.x, w.norm.data(), c.rms_eps, ws.h.data(), n, d, ctx.isa);
  }
  // Gated attention: q_proj rows are [q | gate] per head; q and the gate are split apart here.
  const int64_t q_rows = w.output_gate ? 2 * q_dim : q_dim;
  auto split_q = [&](const float* src, int64_t r) {
    if (!w.output_gate) {
      std::memcpy(ws.q.data() + r * q_dim, src, q_dim * sizeof(float));
      return;
    }
    for (int64_t hh = 0; hh < c.n_head; ++hh) {
      std::memcpy(ws.q.data() + r * q_dim + hh * hd, src + 2 * hh * hd, hd * sizeof(float));
      std::memcpy(ws.gate.data() + r * q_dim + hh * hd, src + (2 * hh + 1) * hd, hd * sizeof(float));
    }
  };
  if (w.output_gate && ws.gate.size() < static_cast<size_t>(n * q_dim)) ws.gate.resize(static_cast<size_t>(n * q_dim));
  // Where q, k and v are read from below: the split buffers, or the fused projection's one row.
  float* q = ws.q.data();
  float* k = ws.k.data();
  float* v = ws.v.data();
  if (w.qkv.size() == 1) {
    // One weight pass for q, k and v. One ungated row (decode) reads them in place, three contiguous
    // runs; otherwise the split copies give each of them contiguous rows, which the KV store and
    // attention want per sequence.
    const int64_t stride = q_rows + 2 * kv_dim;
    project(w.qkv[0], ws.h.data(), ws.qkv.data(), n, *ctx.threads, prof);
    if (n == 1 && !w.output_gate) {
      q = ws.qkv.data();
      k = q + q_dim;
      v = k + kv_dim;
    } else {
      ProfileScope ps(prof, ForwardOp::kCopy);
      for (int64_t r = 0; r < n; ++r) {
        const float* src = ws.qkv.data() + r * stride;
        split_q(src, r);
        std::memcpy(ws.k.data() + r * kv_dim, src + q_rows, kv_dim * sizeof(float));
        std::memcpy(ws.v.data() + r * kv_dim, src + q_rows + kv_dim, kv_dim * sizeof(float));
      }
    }
  } else if (w.output_gate) {
    project(w.qkv[0], ws.h.data(), ws.qkv.data(), n, *ctx.threads, prof);  // [n, 2 q_dim]
    for (int64_t r = 0; r < n; ++r) split_q(ws.qkv.data() + r * q_rows, r);
    project(w.qkv[1], ws.h.data(), ws.k.data(), n, *ctx.threads, prof);
    project(w.qkv[2], ws.h.data(), ws.v.data(), n, *ctx.threads, prof);
  } else {
    project(w.qkv[0], ws.h.data(), ws.q.data(), n, *ctx.threads, prof);
    project(w.qkv[1], ws.h.data(), ws.k.data(), n, *ctx.threads, prof);
    project(w.qkv[2], ws.h.data(), ws.v.data(), n, *ctx.threads, prof);
  }
  if (!w.q_norm.empty()) {
    ProfileScope ps(prof, ForwardOp::kNorm);
    rms_norm_heads(q, w.q_norm.data(), c.rms_eps, q, n, c.n_head, hd, ctx.isa);
    rms_norm_heads(k, w.k_norm.data(), c.rms_eps, k, n, c.n_head_kv, hd, ctx.isa);
  }
  {
    ProfileScope ps(prof, ForwardOp::kRope);
    rope_apply(q, n, c.n_head, ctx.positions, *ctx.rope);
    rope_apply(k, n, c.n_head_kv, ctx.positions, *ctx.rope);
  }

  {
    ProfileScope ps(prof, ForwardOp::kKvStore);
    for (const RowRun& run : ctx.runs)
      ctx.kv->write(*run.kv, ctx.kv_layer, run.pos0, run.n_rows, k + run.row0 * kv_dim,
                    v + run.row0 * kv_dim);
  }

  AttentionParams ap;
  ap.n_head = static_cast<int>(c.n_head);
  ap.n_kv_head = static_cast<int>(c.n_head_kv);
  ap.head_dim = static_cast<int>(hd);
  ap.level = ctx.isa;
  // Long prefill chunks take bf16 products where the CPU has them (~2x the attention speed at
  // pp2048; error in backend_cpu's Bf16PrefillMatchesReference, see docs/PERFORMANCE.md).
  ap.prefill_bf16 = true;
  {
    ProfileScope ps(prof, ForwardOp::kAttention);
    for (const RowRun& run : ctx.runs)
      attention(q + run.row0 * q_dim, run.n_rows, run.pos0, ctx.kv->view(*run.kv, ctx.kv_layer), ap,
                ws.att.data() + run.row0 * q_dim, *ctx.threads, &ws.attn);
  }

  if (w.output_gate) {
    ProfileScope ps(prof, ForwardOp::kActivation);
    float* att = ws.att.data();
    const float* gate = ws.gate.data();
    for (int64_t i = 0; i < n * q_dim; ++i) att[i] = att[i] / (1.0f + std::exp(-gate[i]));
  }
  project(w.o, ws.att.data(), ws.out.data(), n, *ctx.threads, prof);
  ProfileScope ps(prof, ForwardOp::kResidual);
  add(ctx.x, ws.out.data(), ctx.x, n * d);
}

}  // namespace splash
