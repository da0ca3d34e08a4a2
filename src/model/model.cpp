#include "model/model.h"

#include "model/architecture.h"
#include "model/blocks/gated_deltanet_block.h"
#include "model/weights.h"

namespace splash {

Model::Model() = default;
Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

namespace {

Result<RopeParams> rope_params(const ModelConfig& c, const ModelFiles& files, RopeStyle style) {
  RopeParams p;
  p.head_dim = static_cast<int>(c.head_dim);
  int n_rot = static_cast<int>(static_cast<double>(c.head_dim) * c.partial_rotary_factor);
  p.n_rot = n_rot - n_rot % 2;
  if (p.n_rot <= 0 || p.n_rot > p.head_dim)
    return make_error(files.path(), ": partial_rotary_factor ", c.partial_rotary_factor, " gives ", p.n_rot,
                      " rotated dims of head_dim ", c.head_dim);
  p.theta = c.rope_theta;
  p.style = style;
  const RopeScalingConfig& s = c.rope_scaling;
  if (s.type.empty() || s.type == "default" || s.type == "none") {
    p.scaling = RopeScaling::kNone;
  } else if (s.type == "linear") {
    p.scaling = RopeScaling::kLinear;
    p.factor = s.factor;
  } else if (s.type == "llama3") {
    p.scaling = RopeScaling::kLlama3;
    p.factor = s.factor;
    p.low_freq_factor = s.low_freq_factor;
    p.high_freq_factor = s.high_freq_factor;
    p.original_context = s.original_max_position;
  } else {
    return make_error(files.path(), ": rope_scaling type '", s.type, "' is not supported (linear, llama3)");
  }
  return p;
}

std::string storage_name(const ModelFiles& files, std::string_view name) {
  const ModelTensor* t = files.find(name);
  if (t == nullptr) return "?";
  if (t->mlx) return str_cat("MLX ", t->mlx->bits, "-bit g", t->mlx->group_size);
  return std::string(dtype_name(t->dtype));
}

}  // namespace

Result<Model> Model::load(const ModelFiles& files, const ModelOptions& options) {
  const ModelConfig& c = files.config();
  const Architecture* arch = find_architecture(c.architecture);
  if (arch == nullptr) {
    std::string known;
    for (auto n : architecture_names()) known += str_cat(known.empty() ? "" : ", ", n);
    return make_error(files.path(), ": architecture '", c.architecture, "' is not supported (known: ", known, ")");
  }
  if (Status st = arch->check_config(c); !st.ok()) return make_error(files.path(), ": ", st.error_message());
  if (options.chunk_tokens <= 0)
    return make_error("model options: chunk_tokens ", options.chunk_tokens, " must be positive");

  Model m;
  m.config_ = c;
  m.options_ = options;
  m.options_.isa = clamp_isa_level(options.isa);
  m.arch_ = arch;
  m.max_context_ = options.max_context > 0 ? options.max_context : c.max_position > 0 ? c.max_position : 4096;
  m.weights_ = std::make_unique<ModelWeights>();
  ModelWeights& w = *m.weights_;

  WeightLoader loader(files, m.options_.isa, options.fuse_projections);
  SPLASH_TRY(w.embed, loader.matrix("model.embed_tokens.weight", c.n_vocab, c.n_embd));
  SPLASH_TRY(w.out_norm, loader.vector("model.norm.weight", c.n_embd));
  if (!c.tie_embeddings) {
    SPLASH_TRY(w.output, loader.matrix("lm_head.weight", c.n_vocab, c.n_embd));
  }
  if (architecture_facts(c.architecture).zero_centred_norms) fold_zero_centred_norm(loader, w.out_norm);
  // KV layers and recurrent state: full-attention layers get a KV pool layer each, linear ones a
  // slice of the per-sequence state.
  int first_attention = -1;
  for (uint32_t il = 0; il < c.n_layer; ++il) {
    const bool linear = !c.layer_kinds.empty() && c.layer_kinds[il] == LayerKind::kLinearAttention;
    m.kv_layer_.push_back(linear ? -1 : m.n_kv_layers_++);
    m.recurrent_offset_.push_back(linear ? m.recurrent_state_floats_ : 0);
    if (linear) m.recurrent_state_floats_ += gdn_state_floats(c);
    if (!linear && first_attention < 0) first_attention = static_cast<int>(il);
  }
  if (first_attention < 0) return make_error(files.path(), ": the model has no full-attention layer");
  w.layers.reserve(c.n_layer);
  for (uint32_t il = 0; il < c.n_layer; ++il) {
    SPLASH_TRY(LayerWeights layer, arch->load_layer(loader, static_cast<int>(il)));
    w.layers.push_back(std::move(layer));
  }

  // The q/k rows' storage order decides the RoPE pairing; the weights are never permuted.
  SPLASH_TRY(const ModelTensor* q0, loader.require(layer_tensor_name(first_attention, "self_attn.q_proj.weight")));
  SPLASH_TRY(const ModelTensor* k0, loader.require(layer_tensor_name(first_attention, "self_attn.k_proj.weight")));
  if (q0->rope_interleaved != k0->rope_interleaved)
    return make_error(files.path(), ": q_proj and k_proj rows are stored for different RoPE layouts");
  const RopeStyle style = q0->rope_interleaved ? RopeStyle::kInterleaved : RopeStyle::kNeox;
  SPLASH_TRY(RopeParams rp, rope_params(c, files, style));
  auto table = RopeTable::create(rp, 0, m.max_context_);
  if (!table.ok()) return make_error(files.path(), ": RoPE: ", table.error_message());
  w.rope = std::move(table).value();

  const auto& l0 = w.layers[static_cast<size_t>(first_attention)];
  m.weights_summary_ = str_cat(c.architecture, ", ",
                               storage_name(files, layer_tensor_name(first_attention, "self_attn.q_proj.weight")),
                               " matrices (", isa_level_name(m.options_.isa), "), embeddings ",
                               storage_name(files, "model.embed_tokens.weight"), c.tie_embeddings ? " (tied)" : "",
                               l0.attn.qkv.size() == 1 ? ", fused qkv" : "",
                               l0.mlp.gate_up.size() == 1 ? ", fused gate/up" : "", ", RoPE ",
                               style == RopeStyle::kInterleaved ? "interleaved" : "neox");
  return m;
}

ModelMemory Model::memory() const {
  ModelMemory m;
  auto matrix = [&m](const PackedWeights& w) {
    if (w.rows() == 0) return;  // absent (tied output head)
    (w.owns_data() ? m.weights_owned : m.weights_mapped) += static_cast<uint64_t>(w.packed_bytes());
  };
  auto vec = [&m](const std::vector<float>& v) { m.vectors += v.size() * sizeof(float); };
  auto proj = [&](const Projection& p) {
    matrix(p.w);
    vec(p.bias);
  };
  const ModelWeights& w = *weights_;
  matrix(w.embed);
  matrix(w.output);
  vec(w.out_norm);
  for (const LayerWeights& l : w.layers) {
    vec(l.attn.norm);
    for (const Projection& p : l.attn.qkv) proj(p);
    vec(l.attn.q_norm);
    vec(l.attn.k_norm);
    proj(l.attn.o);
    vec(l.mlp.norm);
    for (const Projection& p : l.mlp.gate_up) proj(p);
    proj(l.mlp.down);
    if (l.gdn) {
      vec(l.gdn->norm);
      for (const Projection& p : l.gdn->in) proj(p);
      vec(l.gdn->conv);
      vec(l.gdn->a);
      vec(l.gdn->dt_bias);
      vec(l.gdn->out_norm);
      proj(l.gdn->out);
    }
  }
  // Routed experts: a decode step reads n_expert_used of each layer's n_expert (all the same size).
  uint64_t experts = 0, routers = 0;
  for (const LayerWeights& l : w.layers) {
    if (!l.moe) continue;
    const MoeWeights& e = *l.moe;
    vec(e.norm);
    vec(e.shared_gate);
    if (e.router_f32.empty()) matrix(e.router);
    else vec(e.router_f32);  // the router matrix views this copy
    routers += static_cast<uint64_t>(e.router_f32.size() * sizeof(float));
    for (const Projection& p : e.shared.gate_up) proj(p);
    proj(e.shared.down);
    for (const auto* stack : {&e.gate, &e.up, &e.down})
      for (const PackedWeights& x : *stack) {
        matrix(x);
        experts += static_cast<uint64_t>(x.packed_bytes());
      }
  }
  m.rope = static_cast<uint64_t>(w.rope.resident_bytes());
  m.decode_read = m.weights_owned + m.weights_mapped + routers - experts;
  if (config_.n_expert > 0) m.decode_read += experts * config_.n_expert_used / config_.n_expert;
  if (w.output.rows() > 0) m.decode_read -= static_cast<uint64_t>(w.embed.packed_bytes());
  m.decode_state = 2 * static_cast<uint64_t>(recurrent_state_floats_) * sizeof(float);
  return m;
}

KvCacheConfig Model::kv_cache_config(KvFormat format, int64_t n_pages) const {
  KvCacheConfig k;
  k.n_layer = n_kv_layers_;
  k.n_kv_head = static_cast<int>(config_.n_head_kv);
  k.head_dim = static_cast<int>(config_.head_dim);
  k.n_pages = n_pages;
  k.format = format;
  return k;
}

}  // namespace splash
