#include "spec/mtp/mtp_model.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/norm.h"
#include "model/architecture.h"
#include "model/blocks/attention_block.h"
#include "model/blocks/mlp_block.h"
#include "model/blocks/moe_block.h"
#include "model/model.h"
#include "model/blocks/block_util.h"

namespace splash {

namespace {

// The lane's pool holds at least `n_tokens` positions: a larger pool (double) with the pages copied.
Status reserve_rows(MtpState& st, const ModelConfig& c, int64_t n_tokens) {
  const int64_t need_pages = (n_tokens + kKvPageTokens - 1) / kKvPageTokens;
  if (st.pool.kv_pages_total() > 0 && need_pages <= st.pool.kv_pages_total()) return {};
  KvCacheConfig kc;
  kc.n_layer = 1;
  kc.n_kv_head = static_cast<int>(c.n_head_kv);
  kc.head_dim = static_cast<int>(c.head_dim);
  kc.n_pages = std::max<int64_t>({4, need_pages, 2 * st.pool.kv_pages_total()});
  kc.format = KvFormat::kF32;
  SPLASH_TRY(KvPagePool bigger, KvPagePool::create(kc));
  KvPageTable table;
  if (st.table.n_tokens > 0) {
    SPLASH_TRY_STATUS(bigger.append(table, st.table.n_tokens));
    for (size_t p = 0; p < st.table.pages.size(); ++p)
      std::memcpy(bigger.page_data_mut(table.pages[p]), st.pool.page_data(st.table.pages[p]),
                  static_cast<size_t>(bigger.page_bytes()));
  }
  st.pool.release(st.table);
  st.pool = std::move(bigger);
  st.table = std::move(table);
  return {};
}

// Where the head's tensors are: safetensors mtp.*; GGUF (llama.cpp) one more block after the
// model's layers, blk.<n_layer>.nextn.* plus the layer's usual names (read as model.layers.<n_layer>).
struct MtpTensorNames {
  std::string fc, norm_embed, norm_hidden, norm, layer_prefix;
  int layer = 0;
};

MtpTensorNames mtp_tensor_names(const ModelFiles& files, const ModelConfig& c) {
  if (files.format() != ModelFormat::kGguf)
    return {"mtp.fc.weight", "mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight", "mtp.norm.weight",
            "mtp.layers.", 0};
  const std::string blk = str_cat("blk.", c.n_layer, ".nextn.");
  return {blk + "eh_proj.weight", blk + "enorm.weight", blk + "hnorm.weight", blk + "shared_head_norm.weight",
          "model.layers.", static_cast<int>(c.n_layer)};
}

uint64_t bytes_of(const PackedWeights& w) { return static_cast<uint64_t>(w.packed_bytes()); }
uint64_t bytes_of(const Projection& p) { return bytes_of(p.w); }

// The MTP layer's MLP is the sparse MoE block whenever the model has experts. The model's
// per-layer flags (decoder_sparse_step, mlp_only_layers; GGUF: a block without ffn_gate_inp)
// cover its own n_layer layers, not the MTP layer; published Qwen3-Next / Qwen3.5-MoE checkpoints
// (step 1, no dense layers) ship an MTP router. (vLLM builds the layer with the index 0 parsed
// from its name, so there layer 0's flag would decide: the same on those checkpoints.)
bool mtp_layer_is_moe(const ModelConfig& c) { return c.n_expert > 0; }

}  // namespace

Result<std::unique_ptr<MtpModel>> MtpModel::load(const ModelFiles& files, const Model& target, IsaLevel isa) {
  const ModelConfig& c = target.config();
  if (!architecture_facts(c.architecture).hybrid)
    return make_error(files.path(), ": MTP heads are supported for the Gated DeltaNet hybrids (qwen3_next, qwen3_5), not ",
                      c.architecture);
  if (c.n_mtp_layers == 0)
    return make_error(files.path(), ": the model has no MTP head (config mtp_num_hidden_layers / nextn_predict_layers is 0)");
  const MtpTensorNames names = mtp_tensor_names(files, c);
  if (files.find(names.fc) == nullptr)
    return make_error(files.path(), ": config declares ", c.n_mtp_layers, " MTP layer(s) but tensor '", names.fc,
                      "' is missing (a checkpoint converted without its MTP head?)");
  auto m = std::unique_ptr<MtpModel>(new MtpModel());
  m->target_ = &target;
  m->isa_ = isa;
  const int64_t d = c.n_embd;
  WeightLoader loader(files, isa, /*fuse=*/true, names.layer_prefix);
  SPLASH_TRY(m->fc_, loader.matrix(names.fc, d, 2 * d));
  SPLASH_TRY(m->norm_embed_, loader.vector(names.norm_embed, d));
  SPLASH_TRY(m->norm_hidden_, loader.vector(names.norm_hidden, d));
  SPLASH_TRY(m->norm_, loader.vector(names.norm, d));
  for (auto* v : {&m->norm_embed_, &m->norm_hidden_, &m->norm_}) fold_zero_centred_norm(loader, *v);
  // The first MTP layer only: Qwen3-Next and Qwen3.5 ship one (vLLM cycles through several).
  SPLASH_TRY(m->layer_.attn,
             load_attention(loader, names.layer, {.qk_norm = true, .output_gate = c.attn_output_gate}));
  fold_zero_centred_norm(loader, m->layer_.attn.norm);
  fold_zero_centred_norm(loader, m->layer_.attn.q_norm);
  fold_zero_centred_norm(loader, m->layer_.attn.k_norm);
  uint64_t bytes = bytes_of(m->fc_) + bytes_of(m->layer_.attn.o);
  for (const Projection& p : m->layer_.attn.qkv) bytes += bytes_of(p);
  if (mtp_layer_is_moe(c)) {
    SPLASH_TRY(m->layer_.moe, load_moe(loader, names.layer));
    fold_zero_centred_norm(loader, m->layer_.moe->norm);
    const MoeWeights& w = *m->layer_.moe;
    // What one decode step reads: the router, n_expert_used experts (all the same size) and the
    // shared expert with its gate, not the n_expert experts the file holds.
    bytes += bytes_of(w.router) + static_cast<uint64_t>(w.shared_gate.size() * sizeof(float));
    if (w.shared.down.w.rows() > 0) {
      bytes += bytes_of(w.shared.down);
      for (const Projection& p : w.shared.gate_up) bytes += bytes_of(p);
    }
    uint64_t experts = 0;
    for (size_t e = 0; e < w.gate.size(); ++e) experts += bytes_of(w.gate[e]) + bytes_of(w.up[e]) + bytes_of(w.down[e]);
    m->weight_bytes_ = bytes + experts;
    if (!w.gate.empty())
      bytes += c.n_expert_used * (bytes_of(w.gate[0]) + bytes_of(w.up[0]) + bytes_of(w.down[0]));
    m->step_bytes_ = bytes;
    return m;
  } else {
    SPLASH_TRY(m->layer_.mlp, load_swiglu_mlp(loader, names.layer));
    fold_zero_centred_norm(loader, m->layer_.mlp.norm);
    bytes += bytes_of(m->layer_.mlp.down);
    for (const Projection& p : m->layer_.mlp.gate_up) bytes += bytes_of(p);
  }
  m->weight_bytes_ = m->step_bytes_ = bytes;
  return m;
}

int64_t MtpModel::n_embd() const { return target_->config().n_embd; }

void MtpModel::target_final_norm(float* rows, int64_t n) const {
  const ModelConfig& c = target_->config();
  rms_norm(rows, target_->weights().out_norm.data(), c.rms_eps, rows, n, c.n_embd, isa_);
}

Status MtpModel::step(MtpState& st, const int32_t* tokens, const float* hidden, int64_t n, int64_t pos0,
                      ThreadPool& pool, float* out, float* logits) const {
  const ModelConfig& c = target_->config();
  const ModelWeights& tw = target_->weights();
  const int64_t d = c.n_embd;
  if (n <= 0) return {};
  if (pos0 != st.n_rows()) return make_error("mtp: rows at position ", pos0, " but the cache holds ", st.n_rows());
  if (pos0 + n > target_->max_context())
    return make_error("mtp: position ", pos0 + n - 1, " is past the context (", target_->max_context(), ")");
  for (int64_t i = 0; i < n; ++i)
    if (tokens[i] < 0 || tokens[i] >= static_cast<int32_t>(c.n_vocab))
      return make_error("mtp: token ", tokens[i], " is outside the vocabulary");

  // fc input: [norm_e(embed(token)) | norm_h(hidden)] per row.
  grow(st.in, n * 2 * d);
  grow(st.x, n * d);
  for (int64_t i = 0; i < n; ++i) {
    float* row = st.in.data() + i * 2 * d;
    dequantize_packed_row(tw.embed, tokens[i], row);
    rms_norm(row, norm_embed_.data(), c.rms_eps, row, 1, d, isa_);
    rms_norm(hidden + i * d, norm_hidden_.data(), c.rms_eps, row + d, 1, d, isa_);
  }
  matmul(fc_, st.in.data(), st.x.data(), n, pool);

  SPLASH_TRY_STATUS(reserve_rows(st, c, pos0 + n));
  SPLASH_TRY_STATUS(st.pool.append(st.table, n));
  Workspace& ws = st.ws;
  const int64_t q_dim = int64_t{c.n_head} * c.head_dim, kv_dim = int64_t{c.n_head_kv} * c.head_dim;
  grow(ws.h, n * d);
  grow(ws.qkv, n * ((c.attn_output_gate ? 2 : 1) * q_dim + 2 * kv_dim));
  grow(ws.q, n * q_dim);
  grow(ws.k, n * kv_dim);
  grow(ws.v, n * kv_dim);
  grow(ws.att, n * q_dim);
  grow(ws.out, n * d);  // the MLP's output, dense or MoE (moe_block grows ws.moe itself)
  if (!layer_.moe) {
    grow(ws.ff, n * 2 * int64_t{c.n_ff});
    grow(ws.act, n * c.n_ff);
  }
  st.pos.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) st.pos[static_cast<size_t>(i)] = static_cast<int32_t>(pos0 + i);
  const RowRun run{&st.table, 0, n, pos0, nullptr};
  LayerContext ctx;
  ctx.config = &c;
  ctx.rope = &tw.rope;
  ctx.kv = &st.pool;
  ctx.threads = &pool;
  ctx.isa = isa_;
  ctx.il = 0;
  ctx.kv_layer = 0;
  ctx.n_rows = n;
  ctx.x = st.x.data();
  ctx.positions = st.pos.data();
  ctx.runs = {&run, 1};
  ctx.ws = &ws;
  attention_block(layer_.attn, ctx);
  if (layer_.moe)
    moe_block(*layer_.moe, ctx);
  else
    swiglu_mlp_block(layer_.mlp, ctx);

  rms_norm(st.x.data(), norm_.data(), c.rms_eps, out, n, d, isa_);
  if (logits != nullptr) matmul(tw.output_matrix(), out + (n - 1) * d, logits, 1, pool);
  return {};
}

}  // namespace splash
