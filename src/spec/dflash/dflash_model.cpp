#include "spec/dflash/dflash_model.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "backend/cpu/activation.h"
#include "backend/cpu/embedding.h"
#include "backend/cpu/norm.h"
#include "core/check.h"
#include "formats/safetensors.h"

namespace splash {

// --- DFlashContext ---------------------------------------------------------------------------

void DFlashContext::clear() {
  pos.clear();
  for (auto& x : k) x.clear();
  for (auto& x : v) x.clear();
}

void DFlashContext::truncate_from(int64_t p) {
  const auto keep = static_cast<size_t>(std::lower_bound(pos.begin(), pos.end(), p) - pos.begin());
  if (keep == pos.size()) return;
  const size_t width = pos.empty() ? 0 : (k.empty() ? 0 : k[0].size() / pos.size());
  pos.resize(keep);
  for (auto& x : k) x.resize(keep * width);
  for (auto& x : v) x.resize(keep * width);
}

// --- loading ---------------------------------------------------------------------------------

namespace {

Result<std::string> read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error(path, ": cannot open");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string shape_str(const std::vector<uint64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += str_cat(i ? ", " : "", s[i]);
  return out + "]";
}

struct Loader {
  const SafeTensorsModel& files;
  const std::string& source;
  IsaLevel isa;
  uint64_t* bytes;

  Result<const SafeTensor*> tensor(const std::string& name, std::vector<uint64_t> shape) const {
    const SafeTensor* t = files.find(name);
    if (t == nullptr) return make_error(source, ": tensor '", name, "' is missing");
    if (t->shape != shape)
      return make_error(source, ": tensor '", name, "' has shape ", shape_str(t->shape), ", expected ",
                        shape_str(shape));
    if (t->dtype != DType::kF32 && t->dtype != DType::kF16 && t->dtype != DType::kBF16)
      return make_error(source, ": tensor '", name, "' has dtype ", dtype_name(t->dtype),
                        " (DFlash drafters load F32, F16 or BF16)");
    *bytes += t->data.size();
    return t;
  }
  Result<PackedWeights> matrix(const std::string& name, int64_t rows, int64_t cols) const {
    SPLASH_TRY(const SafeTensor* t, tensor(name, {static_cast<uint64_t>(rows), static_cast<uint64_t>(cols)}));
    return pack_weights(t->dtype, t->data.data(), rows, cols, isa, name);
  }
  Result<std::vector<float>> vector(const std::string& name, int64_t n) const {
    SPLASH_TRY(const SafeTensor* t, tensor(name, {static_cast<uint64_t>(n)}));
    return safetensor_to_f32(*t);
  }
};

}  // namespace

DFlashModel::DFlashModel() = default;
DFlashModel::~DFlashModel() = default;
DFlashModel::DFlashModel(DFlashModel&&) noexcept = default;
DFlashModel& DFlashModel::operator=(DFlashModel&&) noexcept = default;

Result<DFlashModel> DFlashModel::load(const std::string& dir, const DFlashLoadOptions& options) {
  DFlashModel m;
  const std::string config_path = dir + "/config.json";
  SPLASH_TRY(std::string text, read_text(config_path));
  SPLASH_TRY(m.config_, parse_dflash_config(text, config_path));
  SPLASH_TRY(SafeTensorsModel files, SafeTensorsModel::open(dir));
  m.files_ = std::make_unique<SafeTensorsModel>(std::move(files));
  m.source_ = dir;
  m.isa_ = options.isa;
  const DFlashConfig& c = m.config_;
  const int64_t d = c.n_embd;
  const Loader ld{*m.files_, m.source_, options.isa, &m.weight_bytes_};

  SPLASH_TRY(m.fc_, ld.matrix("fc.weight", d, c.context_width()));
  SPLASH_TRY(m.hidden_norm_, ld.vector("hidden_norm.weight", d));
  SPLASH_TRY(m.norm_, ld.vector("norm.weight", d));
  for (int il = 0; il < c.n_layer; ++il) {
    const std::string p = str_cat("layers.", il, ".");
    Layer l;
    SPLASH_TRY(l.in_norm, ld.vector(p + "input_layernorm.weight", d));
    SPLASH_TRY(l.post_norm, ld.vector(p + "post_attention_layernorm.weight", d));
    SPLASH_TRY(l.q_norm, ld.vector(p + "self_attn.q_norm.weight", c.head_dim));
    SPLASH_TRY(l.k_norm, ld.vector(p + "self_attn.k_norm.weight", c.head_dim));
    SPLASH_TRY(l.wq, ld.matrix(p + "self_attn.q_proj.weight", c.q_dim(), d));
    SPLASH_TRY(l.wk, ld.matrix(p + "self_attn.k_proj.weight", c.kv_dim(), d));
    SPLASH_TRY(l.wv, ld.matrix(p + "self_attn.v_proj.weight", c.kv_dim(), d));
    SPLASH_TRY(l.wo, ld.matrix(p + "self_attn.o_proj.weight", d, c.q_dim()));
    SPLASH_TRY(l.gate, ld.matrix(p + "mlp.gate_proj.weight", c.n_ff, d));
    SPLASH_TRY(l.up, ld.matrix(p + "mlp.up_proj.weight", c.n_ff, d));
    SPLASH_TRY(l.down, ld.matrix(p + "mlp.down_proj.weight", d, c.n_ff));
    m.layers_.push_back(std::move(l));
  }

  m.max_position_ = options.max_position > 0 ? options.max_position
                    : c.max_position > 0     ? c.max_position
                                             : 4096;
  m.max_context_rows_ = std::max<int64_t>(1, options.max_context_rows);
  RopeParams rp;
  rp.head_dim = c.head_dim;
  rp.n_rot = c.head_dim;
  rp.theta = c.rope_theta;
  rp.style = RopeStyle::kNeox;
  SPLASH_TRY(m.rope_, RopeTable::create(rp, 0, m.max_position_));
  return m;
}

// --- forward ---------------------------------------------------------------------------------

void DFlashModel::add_context(DFlashContext& ctx, const float* hidden, int64_t n_rows, int64_t pos0, ThreadPool& pool,
                              DFlashScratch& s) const {
  const DFlashConfig& c = config_;
  const int64_t d = c.n_embd, kvd = c.kv_dim();
  SPLASH_CHECK(n_rows >= 0 && pos0 >= 0 && pos0 + n_rows <= max_position_);
  if (ctx.k.size() != layers_.size()) {
    ctx.clear();
    ctx.k.assign(layers_.size(), {});
    ctx.v.assign(layers_.size(), {});
  }
  ctx.truncate_from(pos0);
  if (n_rows == 0) return;

  s.ctx.resize(n_rows * d);
  matmul(fc_, hidden, s.ctx.data(), n_rows, pool);
  rms_norm(s.ctx.data(), hidden_norm_.data(), c.rms_eps, s.ctx.data(), n_rows, d, isa_);
  std::vector<int32_t> positions(n_rows);
  for (int64_t i = 0; i < n_rows; ++i) positions[i] = static_cast<int32_t>(pos0 + i);
  s.kb.resize(n_rows * kvd);
  s.vb.resize(n_rows * kvd);
  for (size_t il = 0; il < layers_.size(); ++il) {
    const Layer& l = layers_[il];
    matmul(l.wk, s.ctx.data(), s.kb.data(), n_rows, pool);
    rms_norm_heads(s.kb.data(), l.k_norm.data(), c.rms_eps, s.kb.data(), n_rows, c.n_head_kv, c.head_dim, isa_);
    rope_apply(s.kb.data(), n_rows, c.n_head_kv, positions.data(), rope_);
    matmul(l.wv, s.ctx.data(), s.vb.data(), n_rows, pool);
    ctx.k[il].insert(ctx.k[il].end(), s.kb.begin(), s.kb.end());
    ctx.v[il].insert(ctx.v[il].end(), s.vb.begin(), s.vb.end());
  }
  ctx.pos.insert(ctx.pos.end(), positions.begin(), positions.end());

  // Rows no future block can see: older than the last max_context_rows_, or (sliding window) at
  // positions <= next anchor - window. Trimmed in batches so the copy is amortized.
  int64_t drop = ctx.n_rows() - max_context_rows_;
  if (c.sliding_window > 0) {
    const int64_t first_visible = ctx.pos.back() + 1 - c.sliding_window + 1;
    const auto n_old = std::lower_bound(ctx.pos.begin(), ctx.pos.end(), first_visible) - ctx.pos.begin();
    drop = std::max<int64_t>(drop, n_old);
  }
  if (drop > 0 && drop >= std::min<int64_t>(256, max_context_rows_)) {
    ctx.pos.erase(ctx.pos.begin(), ctx.pos.begin() + drop);
    for (auto& x : ctx.k) x.erase(x.begin(), x.begin() + drop * kvd);
    for (auto& x : ctx.v) x.erase(x.begin(), x.begin() + drop * kvd);
  }
}

// Non-causal attention of the B block rows over [visible context rows; block rows], one task per
// (row, head). Context row j is visible when it is among the last max_context_rows_ rows and, with
// a sliding window, within the window of the query (in both directions, as the published mask).
void DFlashModel::attention(const DFlashContext& ctx, const int32_t* block_pos, DFlashScratch& s, int il,
                            ThreadPool& pool) const {
  const DFlashConfig& c = config_;
  const int B = c.block_size, hd = c.head_dim, nh = c.n_head, nkv = c.n_head_kv, g = nh / nkv;
  const int64_t n_ctx = ctx.n_rows();
  const int64_t first = std::max<int64_t>(0, n_ctx - max_context_rows_);
  const int64_t n_keys = n_ctx - first + B;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const float* kc = n_ctx > 0 ? ctx.k[il].data() : nullptr;
  const float* vc = n_ctx > 0 ? ctx.v[il].data() : nullptr;
  const int64_t kvd = c.kv_dim();
  s.scores.resize(static_cast<size_t>(pool.size()) * n_keys);
  const int64_t window = c.sliding_window;
  pool.parallel_for(int64_t{B} * nh, [&](int64_t task, int thread) {
    const int t = static_cast<int>(task / nh), h = static_cast<int>(task % nh), kh = h / g;
    const float* q = s.q.data() + (int64_t{t} * nh + h) * hd;
    float* sc = s.scores.data() + int64_t{thread} * n_keys;
    const int64_t qpos = block_pos[t];
    auto key = [&](int64_t j) -> const float* {
      return j < n_ctx - first ? kc + (first + j) * kvd + int64_t{kh} * hd
                               : s.kb.data() + (j - (n_ctx - first)) * kvd + int64_t{kh} * hd;
    };
    auto val = [&](int64_t j) -> const float* {
      return j < n_ctx - first ? vc + (first + j) * kvd + int64_t{kh} * hd
                               : s.vb.data() + (j - (n_ctx - first)) * kvd + int64_t{kh} * hd;
    };
    auto key_pos = [&](int64_t j) -> int64_t {
      return j < n_ctx - first ? ctx.pos[first + j] : block_pos[j - (n_ctx - first)];
    };
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < n_keys; ++j) {
      const int64_t dp = qpos - key_pos(j);
      if (window > 0 && (dp >= window || -dp >= window)) {
        sc[j] = -std::numeric_limits<float>::infinity();
        continue;
      }
      const float* k = key(j);
      float acc[8] = {};
      int i = 0;
      for (; i + 8 <= hd; i += 8) {
        for (int u = 0; u < 8; ++u) acc[u] += q[i + u] * k[i + u];
      }
      float dot = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
      for (; i < hd; ++i) dot += q[i] * k[i];
      sc[j] = dot * scale;
      mx = std::max(mx, sc[j]);
    }
    float* out = s.att.data() + (int64_t{t} * nh + h) * hd;
    std::fill(out, out + hd, 0.0f);
    double sum = 0;
    for (int64_t j = 0; j < n_keys; ++j) {
      if (sc[j] == -std::numeric_limits<float>::infinity()) continue;
      const float p = std::exp(sc[j] - mx);
      sum += p;
      const float* v = val(j);
      for (int i = 0; i < hd; ++i) out[i] += p * v[i];
    }
    const float inv = sum > 0 ? static_cast<float>(1.0 / sum) : 0.0f;
    for (int i = 0; i < hd; ++i) out[i] *= inv;
  });
}

Status DFlashModel::draft(const DFlashContext& ctx, int32_t anchor, int64_t anchor_pos, const PackedWeights& embed,
                          const PackedWeights& head, ThreadPool& pool, DFlashScratch& s,
                          std::vector<int32_t>* tokens) const {
  const DFlashConfig& c = config_;
  const int B = c.block_size;
  const int64_t d = c.n_embd, qd = c.q_dim(), kvd = c.kv_dim(), f = c.n_ff;
  if (embed.cols() != d || head.cols() != d || head.rows() != embed.rows())
    return make_error(source_, ": the target's embedding [", embed.rows(), ", ", embed.cols(), "] / output head [",
                      head.rows(), ", ", head.cols(), "] do not match the drafter's hidden size ", d);
  if (anchor_pos < 0 || anchor_pos + B > max_position_)
    return make_error(source_, ": block at position ", anchor_pos, " runs past the drafter's RoPE range ",
                      max_position_);
  if (!ctx.pos.empty() && ctx.pos.back() >= anchor_pos)
    return make_error(source_, ": context row at position ", ctx.pos.back(), " is not before the anchor at ",
                      anchor_pos);

  std::vector<int32_t> ids(B, c.mask_token_id), pos(B);
  ids[0] = anchor;
  for (int t = 0; t < B; ++t) pos[t] = static_cast<int32_t>(anchor_pos + t);
  s.x.resize(B * d);
  SPLASH_TRY_STATUS(embedding_lookup(embed, ids.data(), B, s.x.data()));
  if (c.input_embedding_scale != 1.0f) {
    for (float& v : s.x) v *= c.input_embedding_scale;
  }
  s.h.resize(B * d);
  s.q.resize(B * qd);
  s.kb.resize(B * kvd);
  s.vb.resize(B * kvd);
  s.att.resize(B * qd);
  s.out.resize(B * d);
  s.ff.resize(2 * B * f);
  s.act.resize(B * f);
  for (size_t il = 0; il < layers_.size(); ++il) {
    const Layer& l = layers_[il];
    rms_norm(s.x.data(), l.in_norm.data(), c.rms_eps, s.h.data(), B, d, isa_);
    matmul(l.wq, s.h.data(), s.q.data(), B, pool);
    rms_norm_heads(s.q.data(), l.q_norm.data(), c.rms_eps, s.q.data(), B, c.n_head, c.head_dim, isa_);
    rope_apply(s.q.data(), B, c.n_head, pos.data(), rope_);
    matmul(l.wk, s.h.data(), s.kb.data(), B, pool);
    rms_norm_heads(s.kb.data(), l.k_norm.data(), c.rms_eps, s.kb.data(), B, c.n_head_kv, c.head_dim, isa_);
    rope_apply(s.kb.data(), B, c.n_head_kv, pos.data(), rope_);
    matmul(l.wv, s.h.data(), s.vb.data(), B, pool);
    attention(ctx, pos.data(), s, static_cast<int>(il), pool);
    matmul(l.wo, s.att.data(), s.out.data(), B, pool);
    add(s.x.data(), s.out.data(), s.x.data(), B * d);
    rms_norm(s.x.data(), l.post_norm.data(), c.rms_eps, s.h.data(), B, d, isa_);
    matmul(l.gate, s.h.data(), s.ff.data(), B, pool);
    matmul(l.up, s.h.data(), s.ff.data() + B * f, B, pool);
    swiglu(s.ff.data(), s.ff.data() + B * f, f, s.act.data(), B, f, isa_);
    matmul(l.down, s.act.data(), s.out.data(), B, pool);
    add(s.x.data(), s.out.data(), s.x.data(), B * d);
  }
  // Proposal rows 1..B-1 only: the anchor row's output is never used.
  const int64_t n_out = B - 1;
  rms_norm(s.x.data() + d, norm_.data(), c.rms_eps, s.h.data(), n_out, d, isa_);
  const int64_t n_vocab = head.rows();
  s.logits.resize(n_out * n_vocab);
  matmul(head, s.h.data(), s.logits.data(), n_out, pool);
  if (c.output_multiplier != 1.0f || c.final_logit_softcapping > 0) {
    const float cap = c.final_logit_softcapping;
    for (float& v : s.logits) {
      v *= c.output_multiplier;
      if (cap > 0) v = std::tanh(v / cap) * cap;
    }
  }
  if (tokens != nullptr) {
    tokens->resize(n_out);
    for (int64_t t = 0; t < n_out; ++t) {
      const float* row = s.logits.data() + t * n_vocab;
      (*tokens)[t] = static_cast<int32_t>(std::max_element(row, row + n_vocab) - row);
    }
  }
  return {};
}

}  // namespace splash
