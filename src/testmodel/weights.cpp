#include "testmodel/weights.h"

#include <cmath>

#include "core/check.h"
#include "core/result.h"
#include "formats/tensor_names.h"

namespace splash::testmodel {
namespace {

uint64_t mix64(uint64_t z) {  // splitmix64's finalizer: a bijection with good avalanche
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t name_hash(const std::string& s) {  // FNV-1a
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// Approximately N(0, 1): Irwin-Hall sum of four 16-bit uniforms from one 64-bit hash, rescaled to
// unit variance. Cheap enough for a 0.6B-parameter model in seconds; the tails are bounded (|x| <
// 3.47), which keeps quantized test models free of outliers that would dominate their scales.
float unit_normal(uint64_t h) {
  const float s = static_cast<float>(h & 0xFFFF) + static_cast<float>((h >> 16) & 0xFFFF) +
                  static_cast<float>((h >> 32) & 0xFFFF) + static_cast<float>(h >> 48);
  constexpr float kMean = 2.0f * 65535.0f;
  constexpr float kScale = 1.7320508f / 65536.0f;  // sqrt(3) / range: variance of 4 uniforms is 1/3
  return (s - kMean) * kScale;
}

TensorPlan make_plan(std::string name, std::vector<uint64_t> shape, TensorKind kind, float scale, uint32_t rope_heads) {
  TensorPlan t;
  t.hf_name = std::move(name);
  t.shape = std::move(shape);
  t.kind = kind;
  t.scale = scale;
  t.rope_heads = rope_heads;
  return t;
}

// GGUF value-head order of qwen35 files: llama.cpp's converter tiles the value heads (file head
// j = s * nk + g holds key group g's s-th head, HF head g * r + s) so that ggml broadcasts the key
// heads. Returns HF head of each file head.
std::vector<uint32_t> tiled_heads(uint32_t nk, uint32_t nv) {
  std::vector<uint32_t> p(nv);
  const uint32_t r = nv / nk;
  for (uint32_t j = 0; j < nv; ++j) p[j] = (j % nk) * r + j / nk;
  return p;
}

// Identity over [0, offset), then the head permutation of `heads` blocks of `width` rows each.
std::vector<uint32_t> head_rows(const std::vector<uint32_t>& heads, uint32_t offset, uint32_t width) {
  std::vector<uint32_t> p;
  for (uint32_t i = 0; i < offset; ++i) p.push_back(i);
  for (uint32_t h : heads)
    for (uint32_t e = 0; e < width; ++e) p.push_back(offset + h * width + e);
  return p;
}

}  // namespace

uint64_t TensorPlan::n_elems() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

static void plan_hybrid_layers(const TestModelSpec& spec, std::vector<TensorPlan>& out) {
  const uint32_t d = spec.n_embd;
  const uint32_t nk = spec.linear_n_key_heads, dk = spec.linear_key_head_dim;
  const uint32_t nv = spec.linear_n_value_heads, dv = spec.linear_value_head_dim;
  const uint32_t r = nv / nk, kd = nk * dk, vd = nv * dv, conv_dim = 2 * kd + vd;
  const bool next = spec.facts().hf_fused_qkvz;  // Qwen3-Next's in_proj_qkvz / in_proj_ba
  // qwen35 GGUF files tile the value heads; qwen3next files keep the HF grouping.
  const bool tile = spec.facts().gguf_v_heads_tiled && spec.format == TestModelFormat::kGguf && r > 1;
  const std::vector<uint32_t> heads = tiled_heads(nk, nv);
  auto inv_sqrt = [](uint64_t n) { return 1.0f / std::sqrt(static_cast<float>(n)); };
  auto add = [&](std::string name, std::vector<uint64_t> shape, TensorKind kind, float scale) -> TensorPlan& {
    out.push_back(make_plan(std::move(name), std::move(shape), kind, scale, 0));
    return out.back();
  };
  auto norm0 = [&](std::string name, uint64_t n) {
    add(std::move(name), {n}, TensorKind::kNormZero, 0.1f).gguf_transform = GgufTransform::kPlusOne;
  };
  for (uint32_t il = 0; il < spec.n_layer; ++il) {
    const std::string p = str_cat("model.layers.", il, ".");
    norm0(p + "input_layernorm.weight", d);
    if ((il + 1) % spec.full_attention_interval == 0) {
      const uint64_t q_dim = uint64_t{spec.n_head} * spec.head_dim, kv_dim = uint64_t{spec.n_head_kv} * spec.head_dim;
      add(p + "self_attn.q_proj.weight", {2 * q_dim, d}, TensorKind::kMatrix, inv_sqrt(d));  // [q | gate] per head
      add(p + "self_attn.k_proj.weight", {kv_dim, d}, TensorKind::kMatrix, inv_sqrt(d));
      add(p + "self_attn.v_proj.weight", {kv_dim, d}, TensorKind::kMatrix, inv_sqrt(d));
      add(p + "self_attn.o_proj.weight", {d, q_dim}, TensorKind::kMatrix, inv_sqrt(q_dim));
      norm0(p + "self_attn.q_norm.weight", spec.head_dim);
      norm0(p + "self_attn.k_norm.weight", spec.head_dim);
    } else {
      const std::string a = p + "linear_attn.";
      auto lin = [&](std::string name, uint64_t rows, uint64_t cols) -> TensorPlan& {
        TensorPlan& t = add(std::move(name), {rows, cols}, TensorKind::kMatrix, inv_sqrt(cols));
        t.mlx_bits = spec.mlx_linear_bits;
        return t;
      };
      if (next) {
        lin(a + "in_proj_qkvz.weight", 2 * kd + 2 * vd, d);
        lin(a + "in_proj_ba.weight", 2 * nv, d);
      } else {
        lin(a + "in_proj_qkv.weight", conv_dim, d);
        lin(a + "in_proj_z.weight", vd, d);
        lin(a + "in_proj_b.weight", nv, d);
        lin(a + "in_proj_a.weight", nv, d);
        if (tile) {
          out[out.size() - 4].gguf_row_perm = head_rows(heads, 2 * kd, dv);
          out[out.size() - 3].gguf_row_perm = head_rows(heads, 0, dv);
          out[out.size() - 2].gguf_row_perm = heads;
          out[out.size() - 1].gguf_row_perm = heads;
        }
      }
      TensorPlan& conv = add(a + "conv1d.weight", {conv_dim, 1, spec.linear_conv_kernel}, TensorKind::kConv, 0.5f);
      if (tile) conv.gguf_row_perm = head_rows(heads, 2 * kd, dv);
      TensorPlan& dt = add(a + "dt_bias", {nv}, TensorKind::kBias, 0.5f);
      if (tile) dt.gguf_col_perm = heads;  // one row of nv values
      TensorPlan& alog = add(a + "A_log", {nv}, TensorKind::kBias, 0.5f);
      alog.gguf_transform = GgufTransform::kNegExp;
      if (tile) alog.gguf_col_perm = heads;
      add(a + "norm.weight", {dv}, TensorKind::kNorm, 0.1f);  // plain weight, not zero-centred
      TensorPlan& o = lin(a + "out_proj.weight", d, vd);
      if (tile) o.gguf_col_perm = head_rows(heads, 0, dv);
    }
    TensorPlan& post = add(p + "post_attention_layernorm.weight", {d}, TensorKind::kNormZero, 0.1f);
    post.gguf_transform = GgufTransform::kPlusOne;
    post.gguf_name = str_cat("blk.", il, ".post_attention_norm.weight");
    if (spec.moe_layer(il)) {
      const size_t first = out.size();
      plan_moe_mlp(spec, il, out);
      // mlx-lm quantizes the router and the shared-expert gate of qwen3_next / qwen3_5 at 8 bits
      // whatever the requested bits (their quant_predicate).
      for (size_t i = first; i < out.size(); ++i)
        if (out[i].hf_name.ends_with("mlp.gate.weight") || out[i].hf_name.ends_with("shared_expert_gate.weight"))
          out[i].mlx_bits = 8;
      continue;
    }
    add(p + "mlp.gate_proj.weight", {spec.n_ff, d}, TensorKind::kMatrix, inv_sqrt(d));
    add(p + "mlp.up_proj.weight", {spec.n_ff, d}, TensorKind::kMatrix, inv_sqrt(d));
    add(p + "mlp.down_proj.weight", {d, spec.n_ff}, TensorKind::kMatrix, inv_sqrt(spec.n_ff));
  }
}

// The MTP head (Qwen3-Next names): fc over [embedding | hidden], three zero-centred norms and one
// gated full-attention decoder layer under mtp.layers.0, whose MLP is a dense SwiGLU or, for a MoE
// spec, the MoE block of the model's layers (router, experts, shared expert). GGUF (llama.cpp's
// layout): one more block after the model's layers, blk.<n_layer>.nextn.{eh_proj, enorm, hnorm,
// shared_head_norm} and the layer's tensors under their usual blk.<n_layer>.* names.
static void plan_mtp_head(const TestModelSpec& spec, std::vector<TensorPlan>& out) {
  const uint64_t d = spec.n_embd;
  const size_t first = out.size();
  const uint64_t q_dim = uint64_t{spec.n_head} * spec.head_dim, kv_dim = uint64_t{spec.n_head_kv} * spec.head_dim;
  auto inv_sqrt = [](uint64_t n) { return 1.0f / std::sqrt(static_cast<float>(n)); };
  auto add = [&](std::string name, std::vector<uint64_t> shape, TensorKind kind, float scale) {
    out.push_back(make_plan(std::move(name), std::move(shape), kind, scale, 0));
  };
  add("mtp.fc.weight", {d, 2 * d}, TensorKind::kMatrix, inv_sqrt(2 * d));
  add("mtp.pre_fc_norm_embedding.weight", {d}, TensorKind::kNormZero, 0.1f);
  add("mtp.pre_fc_norm_hidden.weight", {d}, TensorKind::kNormZero, 0.1f);
  const std::string p = "mtp.layers.0.";
  add(p + "input_layernorm.weight", {d}, TensorKind::kNormZero, 0.1f);
  add(p + "self_attn.q_proj.weight", {2 * q_dim, d}, TensorKind::kMatrix, inv_sqrt(d));  // [q | gate] per head
  add(p + "self_attn.k_proj.weight", {kv_dim, d}, TensorKind::kMatrix, inv_sqrt(d));
  add(p + "self_attn.v_proj.weight", {kv_dim, d}, TensorKind::kMatrix, inv_sqrt(d));
  add(p + "self_attn.o_proj.weight", {d, q_dim}, TensorKind::kMatrix, inv_sqrt(q_dim));
  add(p + "self_attn.q_norm.weight", {spec.head_dim}, TensorKind::kNormZero, 0.1f);
  add(p + "self_attn.k_norm.weight", {spec.head_dim}, TensorKind::kNormZero, 0.1f);
  add(p + "post_attention_layernorm.weight", {d}, TensorKind::kNormZero, 0.1f);
  if (spec.moe()) {
    plan_moe_mlp(spec, p, out);
  } else {
    add(p + "mlp.gate_proj.weight", {spec.n_ff, d}, TensorKind::kMatrix, inv_sqrt(d));
    add(p + "mlp.up_proj.weight", {spec.n_ff, d}, TensorKind::kMatrix, inv_sqrt(d));
    add(p + "mlp.down_proj.weight", {d, spec.n_ff}, TensorKind::kMatrix, inv_sqrt(spec.n_ff));
  }
  add("mtp.norm.weight", {d}, TensorKind::kNormZero, 0.1f);
  const std::string blk = str_cat("blk.", spec.n_layer, ".");
  for (size_t i = first; i < out.size(); ++i) {
    TensorPlan& t = out[i];
    if (t.kind == TensorKind::kNormZero) t.gguf_transform = GgufTransform::kPlusOne;
    if (t.hf_name == "mtp.fc.weight") t.gguf_name = blk + "nextn.eh_proj.weight";
    else if (t.hf_name == "mtp.pre_fc_norm_embedding.weight") t.gguf_name = blk + "nextn.enorm.weight";
    else if (t.hf_name == "mtp.pre_fc_norm_hidden.weight") t.gguf_name = blk + "nextn.hnorm.weight";
    else if (t.hf_name == "mtp.norm.weight") t.gguf_name = blk + "nextn.shared_head_norm.weight";
    else if (t.hf_name == p + "post_attention_layernorm.weight") t.gguf_name = blk + "post_attention_norm.weight";
    else t.gguf_name = hf_to_gguf_name(str_cat("model.layers.", spec.n_layer, ".", t.hf_name.substr(p.size()))).value();
  }
}

std::vector<TensorPlan> plan_tensors(const TestModelSpec& spec, uint32_t n_vocab) {
  std::vector<TensorPlan> out;
  const uint64_t d = spec.n_embd;
  const uint64_t q_dim = uint64_t{spec.n_head} * spec.head_dim;
  const uint64_t kv_dim = uint64_t{spec.n_head_kv} * spec.head_dim;
  const bool permute = spec.facts().gguf_qk_rope_interleaved && spec.format == TestModelFormat::kGguf;
  // Matrices get std 1/sqrt(fan_in) so activations keep unit scale through deep stacks; the
  // embedding/output scale 2.5/sqrt(d) gives logits with a spread of a few units (softmax neither
  // flat nor one-hot), which keeps greedy decoding and quantization comparisons meaningful.
  const float emb_scale = 2.5f / std::sqrt(static_cast<float>(d));
  auto matrix = [&](std::string name, uint64_t rows, uint64_t cols, float scale, uint32_t rope_heads = 0) {
    out.push_back(make_plan(std::move(name), {rows, cols}, TensorKind::kMatrix, scale, rope_heads));
  };
  auto inv_sqrt = [](uint64_t n) { return 1.0f / std::sqrt(static_cast<float>(n)); };
  auto vec = [&](std::string name, uint64_t n, TensorKind kind, float scale) {
    out.push_back(make_plan(std::move(name), {n}, kind, scale, 0));
  };
  matrix("model.embed_tokens.weight", n_vocab, d, emb_scale);
  if (spec.hybrid()) {
    plan_hybrid_layers(spec, out);
    vec("model.norm.weight", d, TensorKind::kNormZero, 0.1f);
    out.back().gguf_transform = GgufTransform::kPlusOne;
    if (!spec.tie_embeddings) matrix("lm_head.weight", n_vocab, d, emb_scale);
    if (spec.n_mtp_layers > 0) plan_mtp_head(spec, out);
    return out;
  }
  for (uint32_t il = 0; il < spec.n_layer; ++il) {
    const std::string p = str_cat("model.layers.", il, ".");
    vec(p + "input_layernorm.weight", d, TensorKind::kNorm, 0.1f);
    matrix(p + "self_attn.q_proj.weight", q_dim, d, inv_sqrt(d), permute ? spec.n_head : 0);
    matrix(p + "self_attn.k_proj.weight", kv_dim, d, inv_sqrt(d), permute ? spec.n_head_kv : 0);
    matrix(p + "self_attn.v_proj.weight", kv_dim, d, inv_sqrt(d));
    if (spec.facts().attention_bias) {
      vec(p + "self_attn.q_proj.bias", q_dim, TensorKind::kBias, 0.1f);
      vec(p + "self_attn.k_proj.bias", kv_dim, TensorKind::kBias, 0.1f);
      vec(p + "self_attn.v_proj.bias", kv_dim, TensorKind::kBias, 0.1f);
    }
    matrix(p + "self_attn.o_proj.weight", d, q_dim, inv_sqrt(q_dim));
    if (spec.facts().qk_norm) {
      vec(p + "self_attn.q_norm.weight", spec.head_dim, TensorKind::kNorm, 0.1f);
      vec(p + "self_attn.k_norm.weight", spec.head_dim, TensorKind::kNorm, 0.1f);
    }
    vec(p + "post_attention_layernorm.weight", d, TensorKind::kNorm, 0.1f);
    if (spec.moe_layer(il)) {
      plan_moe_mlp(spec, il, out);
      continue;
    }
    matrix(p + "mlp.gate_proj.weight", spec.n_ff, d, inv_sqrt(d));
    matrix(p + "mlp.up_proj.weight", spec.n_ff, d, inv_sqrt(d));
    matrix(p + "mlp.down_proj.weight", d, spec.n_ff, inv_sqrt(spec.n_ff));
  }
  vec("model.norm.weight", d, TensorKind::kNorm, 0.1f);
  if (!spec.tie_embeddings) matrix("lm_head.weight", n_vocab, d, emb_scale);
  return out;
}

void generate_values(const TensorPlan& t, uint64_t seed, uint64_t first, std::span<float> out) {
  SPLASH_CHECK(first + out.size() <= t.n_elems());
  const uint64_t base = mix64(mix64(seed) ^ name_hash(t.hf_name));
  const float offset = t.kind == TensorKind::kNorm ? 1.0f : 0.0f;
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = offset + t.scale * unit_normal(mix64(base + (first + i + 1) * kGolden));
  }
}

}  // namespace splash::testmodel
