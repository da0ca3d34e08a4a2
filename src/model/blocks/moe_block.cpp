#include "model/blocks/moe_block.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/activation.h"
#include "backend/cpu/matmul_batch.h"
#include "backend/cpu/norm.h"
#include "model/blocks/block_util.h"

namespace splash {

namespace {

// Experts of layer il: stacked tensors when the file has them, else one tensor per expert.
Status load_experts(const WeightLoader& loader, int il, MoeWeights& w) {
  const ModelConfig& c = loader.config();
  const int64_t n_expert = c.n_expert, d = c.n_embd, f = c.n_ff_expert;
  w.gate.reserve(n_expert);
  w.up.reserve(n_expert);
  w.down.reserve(n_expert);
  const std::string stacked = loader.layer_name(il, "mlp.switch_mlp.");
  if (loader.find(stacked + "gate_proj.weight") != nullptr) {
    for (int64_t e = 0; e < n_expert; ++e) {
      SPLASH_TRY(PackedWeights g, loader.expert_matrix(stacked + "gate_proj.weight", e, n_expert, f, d));
      SPLASH_TRY(PackedWeights u, loader.expert_matrix(stacked + "up_proj.weight", e, n_expert, f, d));
      SPLASH_TRY(PackedWeights dn, loader.expert_matrix(stacked + "down_proj.weight", e, n_expert, d, f));
      w.gate.push_back(std::move(g));
      w.up.push_back(std::move(u));
      w.down.push_back(std::move(dn));
    }
    return {};
  }
  // transformers 5 / Qwen3.5-MoE checkpoints: mlp.experts.gate_up_proj [n_expert, 2 f, d] (gate
  // rows, then up rows) and mlp.experts.down_proj [n_expert, d, f], no ".weight".
  const std::string fused = loader.layer_name(il, "mlp.experts.gate_up_proj");
  if (loader.find(fused) != nullptr) {
    const std::string down = loader.layer_name(il, "mlp.experts.down_proj");
    for (int64_t e = 0; e < n_expert; ++e) {
      SPLASH_TRY(PackedWeights g, loader.expert_matrix(fused, e, n_expert, 2 * f, d, 0, f));
      SPLASH_TRY(PackedWeights u, loader.expert_matrix(fused, e, n_expert, 2 * f, d, f, f));
      SPLASH_TRY(PackedWeights dn, loader.expert_matrix(down, e, n_expert, d, f));
      w.gate.push_back(std::move(g));
      w.up.push_back(std::move(u));
      w.down.push_back(std::move(dn));
    }
    return {};
  }
  if (loader.find(loader.layer_name(il, "mlp.experts.0.gate_proj.weight")) == nullptr)
    return make_error(loader.files().path(), ": layer ", il, " has no expert weights (neither '", stacked,
                      "gate_proj.weight' nor '", fused, "' nor '",
                      loader.layer_name(il, "mlp.experts.0.gate_proj.weight"), "')");
  for (int64_t e = 0; e < n_expert; ++e) {
    const std::string p = loader.layer_name(il, str_cat("mlp.experts.", e, "."));
    SPLASH_TRY(PackedWeights g, loader.matrix(p + "gate_proj.weight", f, d));
    SPLASH_TRY(PackedWeights u, loader.matrix(p + "up_proj.weight", f, d));
    SPLASH_TRY(PackedWeights dn, loader.matrix(p + "down_proj.weight", d, f));
    w.gate.push_back(std::move(g));
    w.up.push_back(std::move(u));
    w.down.push_back(std::move(dn));
  }
  return {};
}

// The router in f32 whatever its storage (routing decisions are discontinuous: int8 activations
// would flip near-ties): a view of an f32 file tensor, else a dequantized copy.
Status load_router(const WeightLoader& loader, int il, MoeWeights& w) {
  const ModelConfig& c = loader.config();
  const std::string name = loader.layer_name(il, "mlp.gate.weight");
  SPLASH_TRY(const ModelTensor* t, loader.require(name));
  if (t->shape.size() != 2 || t->shape[0] != c.n_expert || t->shape[1] != c.n_embd)
    return make_error(loader.files().path(), ": tensor '", name, "' has ", t->shape.size(),
                      " dimensions / wrong shape, expected [", c.n_expert, ", ", c.n_embd, "]");
  if (t->dtype == DType::kF32 && !t->mlx) {
    SPLASH_TRY(w.router, loader.matrix(name, c.n_expert, c.n_embd));
    return {};
  }
  SPLASH_TRY(w.router_f32, loader.files().read_f32(*t));
  auto packed = pack_weights(DType::kF32, w.router_f32.data(), c.n_expert, c.n_embd, IsaLevel::kAvx512, name);
  if (!packed.ok()) return make_error(loader.files().path(), ": ", packed.error_message());
  w.router = std::move(packed).value();
  return {};
}

// y [m, d] = down(silu(gate x) * up x) for x [m, d]; s.ff / s.act hold the intermediates.
void expert_mlp(const PackedWeights& gate, const PackedWeights& up, const PackedWeights& down, const float* x,
                float* y, int64_t m, MoeScratch& s, LayerContext& ctx) {
  const int64_t f = gate.rows();
  grow(s.ff, 2 * m * f);
  grow(s.act, m * f);
  {
    ProfileScope ps(ctx.profile, ForwardOp::kExperts);
    matmul(gate, x, s.ff.data(), m, *ctx.threads);
    matmul(up, x, s.ff.data() + m * f, m, *ctx.threads);
  }
  {
    ProfileScope ps(ctx.profile, ForwardOp::kExperts);
    swiglu(s.ff.data(), s.ff.data() + m * f, f, s.act.data(), m, f, ctx.isa);
  }
  ProfileScope ps(ctx.profile, ForwardOp::kExperts);
  matmul(down, s.act.data(), y, m, *ctx.threads);
}

// The shared expert's gate | up products over rows h [n, d] into s.shared_ff.
void shared_up_jobs(const MoeWeights& w, const float* h, int64_t n, MoeScratch& s) {
  const MlpWeights& m = w.shared;
  const int64_t f = m.down.w.cols();
  grow(s.shared_ff, 2 * n * f);
  if (m.gate_up.size() == 1) {
    s.jobs.push_back({&m.gate_up[0].w, h, s.shared_ff.data(), n});  // [n, 2f]: gate | up
  } else {
    s.jobs.push_back({&m.gate_up[0].w, h, s.shared_ff.data(), n});
    s.jobs.push_back({&m.gate_up[1].w, h, s.shared_ff.data() + n * f, n});
  }
}

// SwiGLU of the shared expert's gate | up into s.shared_act, and its down product's job.
void shared_down_job(const MoeWeights& w, int64_t n, MoeScratch& s, LayerContext& ctx) {
  const MlpWeights& m = w.shared;
  const int64_t f = m.down.w.cols();
  grow(s.shared_act, n * f);
  grow(s.shared_ys, n * ctx.config->n_embd);
  if (m.gate_up.size() == 1)
    swiglu(s.shared_ff.data(), s.shared_ff.data() + f, 2 * f, s.shared_act.data(), n, f, ctx.isa);
  else
    swiglu(s.shared_ff.data(), s.shared_ff.data() + n * f, f, s.shared_act.data(), n, f, ctx.isa);
  s.jobs.push_back({&m.down.w, s.shared_act.data(), s.shared_ys.data(), n});
}

// out[r] += sigmoid(shared_gate . h[r]) * s.shared_ys[r] (no gate: scale 1).
void shared_add(const MoeWeights& w, const float* h, int64_t n, int64_t d, const MoeScratch& s, float* out) {
  for (int64_t r = 0; r < n; ++r) {
    float scale = 1.0f;
    if (!w.shared_gate.empty()) {
      float g = 0.0f;
      for (int64_t i = 0; i < d; ++i) g += w.shared_gate[i] * h[r * d + i];
      scale = 1.0f / (1.0f + std::exp(-g));
    }
    const float* y = s.shared_ys.data() + r * d;
    float* o = out + r * d;
    for (int64_t i = 0; i < d; ++i) o[i] += scale * y[i];
  }
}

// Products one at a time over the whole pool (prefill: each is big enough to spread), or as one
// task set (decode: matmul_batch).
void run_jobs(const std::vector<MatmulJob>& jobs, bool batched, ThreadPool& pool) {
  if (batched) {
    matmul_batch(jobs, pool);
    return;
  }
  for (const MatmulJob& j : jobs) matmul(*j.w, j.x, j.y, j.n, pool);
}

// The shared expert over all rows, its products dispatched one by one (prefill).
void shared_expert(const MoeWeights& w, const float* h, float* out, LayerContext& ctx) {
  MoeScratch& s = ctx.ws->moe;
  const int64_t n = ctx.n_rows;
  s.jobs.clear();
  shared_up_jobs(w, h, n, s);
  run_jobs(s.jobs, false, *ctx.threads);
  s.jobs.clear();
  shared_down_job(w, n, s, ctx);
  run_jobs(s.jobs, false, *ctx.threads);
  shared_add(w, h, n, ctx.config->n_embd, s, out);
}

// Decode: the gate and up products of every selected expert and of the shared expert as one task
// set of the pool, then all their down products as another (matmul_batch), instead of three
// dispatches and waits per expert (27 per layer at top 8 with a shared expert). The same bits as
// expert_mlp expert by expert and shared_expert: the routed contributions are added in expert
// order, then the shared one, as there. Slots are grouped by expert (s.offset, s.slot_row).
void experts_batched(const MoeWeights& w, const float* h, float* out, int64_t n, MoeScratch& s, LayerContext& ctx) {
  const int64_t d = ctx.config->n_embd, f = ctx.config->n_ff_expert;
  const int n_expert = static_cast<int>(ctx.config->n_expert);
  const int64_t n_slots = n * ctx.config->n_expert_used;
  const bool shared = w.shared.down.w.rows() > 0;
  grow(s.xs, n_slots * d);
  grow(s.ff, 2 * n_slots * f);
  grow(s.act, n_slots * f);
  grow(s.ys, n_slots * d);
  float* gate_out = s.ff.data();
  float* up_out = s.ff.data() + n_slots * f;
  for (int64_t i = 0; i < n_slots; ++i)
    std::memcpy(s.xs.data() + i * d, h + int64_t{s.slot_row[i]} * d, d * sizeof(float));
  s.jobs.clear();
  for (int e = 0; e < n_expert; ++e) {
    const int64_t b = s.offset[e], m = s.offset[e + 1] - b;
    if (m == 0) continue;  // never read: decode touches only the selected experts
    s.jobs.push_back({&w.gate[e], s.xs.data() + b * d, gate_out + b * f, m});
    s.jobs.push_back({&w.up[e], s.xs.data() + b * d, up_out + b * f, m});
  }
  if (shared) shared_up_jobs(w, h, n, s);
  run_jobs(s.jobs, true, *ctx.threads);
  swiglu(gate_out, up_out, f, s.act.data(), n_slots, f, ctx.isa);
  s.jobs.clear();
  for (int e = 0; e < n_expert; ++e) {
    const int64_t b = s.offset[e], m = s.offset[e + 1] - b;
    if (m > 0) s.jobs.push_back({&w.down[e], s.act.data() + b * f, s.ys.data() + b * d, m});
  }
  if (shared) shared_down_job(w, n, s, ctx);
  run_jobs(s.jobs, true, *ctx.threads);
  for (int64_t i = 0; i < n_slots; ++i) {
    const float wt = s.slot_weight[i];
    const float* y = s.ys.data() + i * d;
    float* o = out + int64_t{s.slot_row[i]} * d;
    for (int64_t j = 0; j < d; ++j) o[j] += wt * y[j];
  }
  if (shared) shared_add(w, h, n, d, s, out);
}

}  // namespace

Result<std::unique_ptr<MoeWeights>> load_moe(const WeightLoader& loader, int il) {
  const ModelConfig& c = loader.config();
  auto w = std::make_unique<MoeWeights>();
  SPLASH_TRY(w->norm, loader.vector(loader.layer_name(il, "post_attention_layernorm.weight"), c.n_embd));
  SPLASH_TRY_STATUS(load_router(loader, il, *w));
  SPLASH_TRY_STATUS(load_experts(loader, il, *w));
  // A shared expert the config does not size would be skipped silently: refuse the file instead.
  if (c.n_ff_shared_expert == 0 && loader.find(loader.layer_name(il, "mlp.shared_expert.down_proj.weight")) != nullptr)
    return make_error(loader.files().path(), ": layer ", il,
                      " has shared-expert tensors but the config gives no shared_expert_intermediate_size "
                      "(GGUF: expert_shared_feed_forward_length)");
  if (c.n_ff_shared_expert > 0) {
    const int64_t fs = c.n_ff_shared_expert;
    SPLASH_TRY(w->shared.gate_up, loader.projections({loader.layer_name(il, "mlp.shared_expert.gate_proj.weight"),
                                                      loader.layer_name(il, "mlp.shared_expert.up_proj.weight")},
                                                     {fs, fs}, c.n_embd, {}));
    SPLASH_TRY(w->shared.down.w,
               loader.matrix(loader.layer_name(il, "mlp.shared_expert.down_proj.weight"), c.n_embd, fs));
    const std::string gate_name = loader.layer_name(il, "mlp.shared_expert_gate.weight");
    if (const ModelTensor* g = loader.find(gate_name)) {
      // [1, n_embd] in Hugging Face / MLX files (MLX may quantize it), [n_embd] in GGUF.
      if (g->n_elems() != c.n_embd)
        return make_error(loader.files().path(), ": tensor '", gate_name, "' has ", g->n_elems(), " values, expected ",
                          c.n_embd);
      SPLASH_TRY(w->shared_gate, loader.files().read_f32(*g));
    }
  }
  return w;
}

void moe_route(float* logits, int n_expert, int k, bool normalize, int32_t* expert, float* weight) {
  softmax(logits, n_expert);
  float sum = 0.0f;
  for (int j = 0; j < k; ++j) {
    int best = -1;
    for (int e = 0; e < n_expert; ++e) {
      bool taken = false;
      for (int i = 0; i < j; ++i) taken |= expert[i] == e;
      if (!taken && (best < 0 || logits[e] > logits[best])) best = e;
    }
    expert[j] = best;
    weight[j] = logits[best];
    sum += logits[best];
  }
  if (normalize && sum > 0.0f)
    for (int j = 0; j < k; ++j) weight[j] /= sum;
}

void moe_block(const MoeWeights& w, LayerContext& ctx) {
  const ModelConfig& c = *ctx.config;
  Workspace& ws = *ctx.ws;
  MoeScratch& s = ws.moe;
  const int64_t n = ctx.n_rows, d = c.n_embd;
  const int n_expert = static_cast<int>(c.n_expert), k = static_cast<int>(c.n_expert_used);
  ForwardProfile* const prof = ctx.profile;
  {
    ProfileScope ps(prof, ForwardOp::kNorm);
    rms_norm(ctx.x, w.norm.data(), c.rms_eps, ws.h.data(), n, d, ctx.isa);
  }

  // --- routing: router logits for every row, then top-k per row
  grow(s.probs, n * n_expert);
  grow(s.expert, n * k);
  grow(s.weight, n * k);
  {
    ProfileScope ps(prof, ForwardOp::kRouter);
    matmul(w.router, ws.h.data(), s.probs.data(), n, *ctx.threads);
  }
  {
    ProfileScope ps(prof, ForwardOp::kRouter);
    for (int64_t r = 0; r < n; ++r)
      moe_route(s.probs.data() + r * n_expert, n_expert, k, c.norm_topk_prob, s.expert.data() + r * k,
                s.weight.data() + r * k);
  }

  // --- group the (row, expert) slots by expert: counting sort, rows ascending within an expert
  grow(s.offset, n_expert + 1);
  grow(s.slot_row, n * k);
  grow(s.slot_weight, n * k);
  std::fill(s.offset.begin(), s.offset.begin() + n_expert + 1, 0);
  for (int64_t i = 0; i < n * k; ++i) ++s.offset[s.expert[i] + 1];
  for (int e = 0; e < n_expert; ++e) s.offset[e + 1] += s.offset[e];
  {
    std::vector<int64_t>& fill = s.offset;  // bumped while filling, restored below
    for (int64_t r = 0; r < n; ++r)
      for (int j = 0; j < k; ++j) {
        const int e = s.expert[r * k + j];
        const int64_t at = fill[e]++;
        s.slot_row[at] = static_cast<int32_t>(r);
        s.slot_weight[at] = s.weight[r * k + j];
      }
    for (int e = n_expert; e > 0; --e) fill[e] = fill[e - 1];
    fill[0] = 0;
  }

  // --- each selected expert once over its rows; contributions summed in expert order
  float* out = ws.out.data();
  std::fill(out, out + n * d, 0.0f);
  if (n <= kMoeBatchedMaxRows) {
    {
      ProfileScope ps(prof, ForwardOp::kExperts);
      experts_batched(w, ws.h.data(), out, n, s, ctx);
    }
    ProfileScope ps(prof, ForwardOp::kResidual);
    add(ctx.x, out, ctx.x, n * d);
    return;
  }
  for (int e = 0; e < n_expert; ++e) {
    const int64_t b = s.offset[e], m = s.offset[e + 1] - b;
    if (m == 0) continue;  // never read: decode touches only the selected experts
    grow(s.xs, m * d);
    grow(s.ys, m * d);
    {
      ProfileScope ps(prof, ForwardOp::kExperts);
      for (int64_t i = 0; i < m; ++i)
        std::memcpy(s.xs.data() + i * d, ws.h.data() + int64_t{s.slot_row[b + i]} * d, d * sizeof(float));
    }
    expert_mlp(w.gate[e], w.up[e], w.down[e], s.xs.data(), s.ys.data(), m, s, ctx);
    ProfileScope ps(prof, ForwardOp::kExperts);
    for (int64_t i = 0; i < m; ++i) {
      const float wt = s.slot_weight[b + i];
      const float* y = s.ys.data() + i * d;
      float* o = out + int64_t{s.slot_row[b + i]} * d;
      for (int64_t j = 0; j < d; ++j) o[j] += wt * y[j];
    }
  }
  if (w.shared.down.w.rows() > 0) {
    ProfileScope ps(prof, ForwardOp::kSharedExpert);
    shared_expert(w, ws.h.data(), out, ctx);
  }

  ProfileScope ps(prof, ForwardOp::kResidual);
  add(ctx.x, out, ctx.x, n * d);
}

}  // namespace splash
