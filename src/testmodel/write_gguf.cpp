#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "formats/gguf_config.h"
#include "formats/gguf_writer.h"
#include "formats/tensor_names.h"
#include "testmodel/encode.h"
#include "testmodel/gguf_mix.h"
#include "testmodel/weights.h"
#include "testmodel/writers.h"

namespace splash::testmodel {
namespace {

using gguf::Value;
using gguf::ValueType;

std::string gguf_arch(const TestModelSpec& s) { return std::string(gguf_arch_name_of(s.facts(), s.moe())); }

// Values of rows [r, r + n) as the GGUF file stores them (transform and permutations applied).
void gguf_values(const TensorPlan& t, uint64_t seed, uint64_t r, uint64_t n, std::vector<float>& vals) {
  const uint64_t cols = t.cols();
  vals.resize(n * cols);
  if (t.gguf_row_perm.empty() && t.gguf_col_perm.empty()) {
    generate_values(t, seed, r * cols, vals);
  } else {
    std::vector<float> row(cols);
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t src = t.gguf_row_perm.empty() ? r + i : t.gguf_row_perm[r + i];
      generate_values(t, seed, src * cols, row);
      for (uint64_t c = 0; c < cols; ++c) vals[i * cols + c] = row[t.gguf_col_perm.empty() ? c : t.gguf_col_perm[c]];
    }
  }
  for (float& v : vals) {
    if (t.gguf_transform == GgufTransform::kPlusOne) v += 1.0f;
    if (t.gguf_transform == GgufTransform::kNegExp) v = -std::exp(v);
  }
}

Status set_metadata(gguf::GgufWriter& w, const TestModelSpec& s, const TokenizerData& tok) {
  const std::string a = gguf_arch(s);
  SPLASH_TRY_STATUS(w.set_string("general.architecture", a));
  SPLASH_TRY_STATUS(w.set_string("general.name", str_cat("splash-test-", a)));
  // llama.cpp's general.file_type: the mix's, or that of a file of one matrix type.
  const std::optional<uint32_t> file_type =
      s.gguf_mix != GgufMix::kPure ? gguf_mix_file_type(s.gguf_mix) : gguf::file_type_of(s.gguf_type);
  if (file_type) SPLASH_TRY_STATUS(w.set_u32("general.file_type", *file_type));
  SPLASH_TRY_STATUS(w.set_u32("general.quantization_version", 2));
  SPLASH_TRY_STATUS(w.set_u32(a + ".context_length", s.context_length));
  SPLASH_TRY_STATUS(w.set_u32(a + ".embedding_length", s.n_embd));
  // llama.cpp counts the MTP (nextn) blocks in block_count.
  SPLASH_TRY_STATUS(w.set_u32(a + ".block_count", s.n_layer + s.n_mtp_layers));
  if (s.n_mtp_layers > 0) SPLASH_TRY_STATUS(w.set_u32(a + ".nextn_predict_layers", s.n_mtp_layers));
  SPLASH_TRY_STATUS(w.set_u32(a + ".feed_forward_length", s.n_ff));
  SPLASH_TRY_STATUS(w.set_u32(a + ".attention.head_count", s.n_head));
  SPLASH_TRY_STATUS(w.set_u32(a + ".attention.head_count_kv", s.n_head_kv));
  SPLASH_TRY_STATUS(w.set_u32(a + ".attention.key_length", s.head_dim));
  SPLASH_TRY_STATUS(w.set_u32(a + ".attention.value_length", s.head_dim));
  const uint32_t n_rot = s.hybrid() ? static_cast<uint32_t>(static_cast<float>(s.head_dim) * s.partial_rotary_factor)
                                    : s.head_dim;
  SPLASH_TRY_STATUS(w.set_u32(a + ".rope.dimension_count", n_rot - n_rot % 2));
  if (auto sections = gguf_rope_sections(a, {})) SPLASH_TRY_STATUS(w.set(a + ".rope.dimension_sections", std::move(*sections)));
  if (s.hybrid()) {
    // llama.cpp's keys: state_size = key head dim, group_count = key heads, time_step_rank =
    // value heads, inner_size = value heads x value head dim.
    SPLASH_TRY_STATUS(w.set_u32(a + ".full_attention_interval", s.full_attention_interval));
    SPLASH_TRY_STATUS(w.set_u32(a + ".ssm.conv_kernel", s.linear_conv_kernel));
    SPLASH_TRY_STATUS(w.set_u32(a + ".ssm.state_size", s.linear_key_head_dim));
    SPLASH_TRY_STATUS(w.set_u32(a + ".ssm.group_count", s.linear_n_key_heads));
    SPLASH_TRY_STATUS(w.set_u32(a + ".ssm.time_step_rank", s.linear_n_value_heads));
    SPLASH_TRY_STATUS(w.set_u32(a + ".ssm.inner_size", s.linear_n_value_heads * s.linear_value_head_dim));
  }
  if (s.moe()) {
    SPLASH_TRY_STATUS(w.set_u32(a + ".expert_count", s.n_expert));
    SPLASH_TRY_STATUS(w.set_u32(a + ".expert_used_count", s.n_expert_used));
    SPLASH_TRY_STATUS(w.set_u32(a + ".expert_feed_forward_length", s.n_ff_expert));
    if (s.n_ff_shared_expert > 0)
      SPLASH_TRY_STATUS(w.set_u32(a + ".expert_shared_feed_forward_length", s.n_ff_shared_expert));
    SPLASH_TRY_STATUS(w.set_bool(a + ".expert_weights_norm", s.norm_topk_prob));
  }
  SPLASH_TRY_STATUS(w.set_f32(a + ".rope.freq_base", s.rope_theta));
  SPLASH_TRY_STATUS(w.set_f32(a + ".attention.layer_norm_rms_epsilon", s.rms_eps));
  SPLASH_TRY_STATUS(w.set_u32(a + ".vocab_size", static_cast<uint32_t>(tok.tokens.size())));

  SPLASH_TRY_STATUS(w.set_string("tokenizer.ggml.model", tok.spm ? "llama" : "gpt2"));
  if (!tok.pre.empty()) SPLASH_TRY_STATUS(w.set_string("tokenizer.ggml.pre", tok.pre));
  SPLASH_TRY_STATUS(w.set("tokenizer.ggml.tokens", Value::array_of_strings(tok.tokens)));
  if (tok.spm) {
    std::vector<double> scores(tok.scores.begin(), tok.scores.end());
    SPLASH_TRY_STATUS(w.set("tokenizer.ggml.scores", Value::array_of_floats(ValueType::kF32, std::move(scores))));
  }
  std::vector<int64_t> types;
  types.reserve(tok.token_types.size());
  for (TokenType t : tok.token_types) types.push_back(static_cast<int64_t>(t));
  SPLASH_TRY_STATUS(w.set("tokenizer.ggml.token_type", Value::array_of_ints(ValueType::kI32, std::move(types))));
  if (!tok.spm) SPLASH_TRY_STATUS(w.set("tokenizer.ggml.merges", Value::array_of_strings(tok.merges)));
  if (tok.bos >= 0) SPLASH_TRY_STATUS(w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(tok.bos)));
  if (tok.eos >= 0) SPLASH_TRY_STATUS(w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(tok.eos)));
  if (tok.unk >= 0) SPLASH_TRY_STATUS(w.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(tok.unk)));
  if (tok.pad >= 0) SPLASH_TRY_STATUS(w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(tok.pad)));
  SPLASH_TRY_STATUS(w.set_bool("tokenizer.ggml.add_bos_token", tok.add_bos));
  if (tok.spm) SPLASH_TRY_STATUS(w.set_bool("tokenizer.ggml.add_space_prefix", true));
  if (!tok.chat_template.empty()) SPLASH_TRY_STATUS(w.set_string("tokenizer.chat_template", tok.chat_template));
  return {};
}

// The file type of every planned tensor (names: their GGUF names): matrices in the spec's type or
// as its mix chooses; 1-D tensors, routers and conv weights F32.
Result<std::vector<DType>> gguf_tensor_types(const TestModelSpec& spec, const std::vector<TensorPlan>& plans,
                                             const std::vector<std::string>& names) {
  std::vector<DType> types(plans.size(), DType::kF32);
  std::vector<MixMatrix> matrices;
  std::vector<size_t> at;
  for (size_t i = 0; i < plans.size(); ++i) {
    if (plans[i].kind != TensorKind::kMatrix || plans[i].gguf_f32) continue;
    types[i] = spec.gguf_type;
    matrices.push_back({names[i], plans[i].cols()});
    at.push_back(i);
  }
  if (spec.gguf_mix == GgufMix::kPure) return types;
  SPLASH_TRY(const std::vector<DType> mixed,
             gguf_mix_types(spec.gguf_mix, matrices, spec.n_layer + spec.n_mtp_layers, spec.moe() ? spec.n_expert : 0));
  for (size_t k = 0; k < at.size(); ++k) types[at[k]] = mixed[k];
  return types;
}

// llama.cpp's current qwen3next converter splits in_proj_qkvz ([q_g k_g v_g z_g] per key head g)
// into attn_qkv ([q of every head, k, v], value heads still grouped) and attn_gate (z); in_proj_ba
// stays as it is (ssm_ba). Each part is the fused tensor's plan with the rows it takes.
std::vector<TensorPlan> split_fused_qkvz(const TestModelSpec& s, std::vector<TensorPlan> plans) {
  if (!s.facts().hf_fused_qkvz) return plans;
  const std::string fused = "linear_attn.in_proj_qkvz.weight";
  const uint32_t nk = s.linear_n_key_heads, dk = s.linear_key_head_dim;
  const uint32_t vg = s.linear_n_value_heads / nk * s.linear_value_head_dim, per = 2 * dk + 2 * vg;
  std::vector<TensorPlan> out;
  for (TensorPlan& t : plans) {
    if (!t.hf_name.ends_with(fused)) {
      out.push_back(std::move(t));
      continue;
    }
    const std::string base = t.hf_name.substr(0, t.hf_name.size() - fused.size()) + "linear_attn.";
    TensorPlan qkv = t, z = t;
    qkv.gguf_name = hf_to_gguf_name(base + "in_proj_qkv.weight").value();
    z.gguf_name = hf_to_gguf_name(base + "in_proj_z.weight").value();
    auto rows = [&](std::vector<uint32_t>& perm, uint32_t first, uint32_t n) {
      for (uint32_t g = 0; g < nk; ++g)
        for (uint32_t e = 0; e < n; ++e) perm.push_back(g * per + first + e);
    };
    rows(qkv.gguf_row_perm, 0, dk);
    rows(qkv.gguf_row_perm, dk, dk);
    rows(qkv.gguf_row_perm, 2 * dk, vg);
    rows(z.gguf_row_perm, 2 * dk + vg, vg);
    out.push_back(std::move(qkv));
    out.push_back(std::move(z));
  }
  return out;
}

}  // namespace

uint64_t chunk_rows(uint64_t rows, uint64_t cols, uint32_t head_dim, bool whole_heads) {
  uint64_t n = std::max<uint64_t>(1, (uint64_t{1} << 20) / std::max<uint64_t>(cols, 1));
  if (whole_heads) n = std::max<uint64_t>(head_dim, n / head_dim * head_dim);
  return std::min(n, rows);
}

Status write_gguf_model(const TestModelSpec& spec, const TokenizerData& tok, uint32_t n_vocab,
                        const std::string& path) {
  gguf::GgufWriter w;
  SPLASH_TRY_STATUS(set_metadata(w, spec, tok));
  const std::vector<TensorPlan> plans = split_fused_qkvz(spec, plan_tensors(spec, n_vocab));
  std::vector<std::string> names;
  for (const TensorPlan& t : plans) {
    const auto name = t.gguf_name.empty() ? hf_to_gguf_name(t.hf_name) : std::optional<std::string>(t.gguf_name);
    SPLASH_CHECK_MSG(name.has_value(), t.hf_name);  // plan_tensors only makes names the map knows
    names.push_back(*name);
  }
  SPLASH_TRY(const std::vector<DType> types, gguf_tensor_types(spec, plans, names));
  for (size_t i = 0; i < plans.size(); ++i) {
    const TensorPlan& t = plans[i];
    const std::string& name = names[i];
    const DType type = types[i];
    std::vector<uint64_t> shape;  // GGUF: innermost first; conv weights lose their middle 1
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it)
      if (!(t.kind == TensorKind::kConv && *it == 1)) shape.push_back(*it);
    if (t.gguf_flat) shape = {t.n_elems()};
    if (!t.gguf_row_perm.empty()) shape = {t.cols(), t.gguf_row_perm.size()};  // the rows it takes
    const uint64_t seed = spec.seed;
    const uint32_t head_dim = spec.head_dim;
    auto produce = [t, type, seed, head_dim](gguf::ByteSink& sink) -> Status {
      const uint64_t rows = t.gguf_row_perm.empty() ? t.rows() : t.gguf_row_perm.size();
      const uint64_t cols = t.cols();
      const bool permute = t.rope_heads != 0;
      const uint64_t step = chunk_rows(rows, cols, head_dim, permute);
      std::vector<float> vals;
      std::vector<uint8_t> bytes;
      for (uint64_t r = 0; r < rows; r += step) {
        const uint64_t n = std::min(step, rows - r);
        gguf_values(t, seed, r, n, vals);
        // HF rows are in rotate-half order; llama GGUF files store them for interleaved RoPE.
        if (permute) {
          permute_rope_rows(vals.data(), cols * sizeof(float), static_cast<int>(n / head_dim),
                            static_cast<int>(head_dim), /*to_interleaved=*/true);
        }
        bytes.clear();
        SPLASH_TRY_STATUS(encode_rows(type, vals, cols, bytes));
        SPLASH_TRY_STATUS(sink.write(bytes));
      }
      return {};
    };
    SPLASH_TRY_STATUS(w.add_tensor_producer(name, type, std::move(shape), std::move(produce)));
  }
  return w.write(path);
}

}  // namespace splash::testmodel
