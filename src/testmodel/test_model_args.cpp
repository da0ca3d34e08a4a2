#include "testmodel/test_model_args.h"

#include <charconv>
#include <cstdlib>
#include <tuple>

namespace splash {
namespace {

Result<uint64_t> parse_uint(const std::string& flag, const std::string& v) {
  uint64_t x = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size()) return make_error(flag, ": '", v, "' is not a non-negative integer");
  return x;
}

Result<uint32_t> parse_u32(const std::string& flag, const std::string& v) {
  SPLASH_TRY(uint64_t x, parse_uint(flag, v));
  if (x > 0xFFFFFFFFull) return make_error(flag, ": ", v, " is too large");
  return static_cast<uint32_t>(x);
}

Result<float> parse_float(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const float x = std::strtof(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || !(x > 0.0f)) return make_error(flag, ": '", v, "' is not a positive number");
  return x;
}

}  // namespace

std::string test_model_usage() {
  return "usage: splash make-test-model [--preset NAME] [--format gguf|safetensors] [--type T] [--dtype T]\n"
         "       [--mlx-bits N] [--mlx-group N] [--arch A] [--dim N] [--layers N] [--heads N] [--kv-heads N]\n"
         "       [--head-dim N] [--ffn N] [--vocab N] [--ctx N] [--rope-theta F] [--rms-eps F] [--tie|--no-tie]\n"
         "       MoE (qwen3_moe, hybrids with --moe): [--experts N] [--experts-used N] [--expert-ffn N]\n"
         "       [--shared-expert-ffn N] [--no-norm-topk] [--fused-experts (safetensors gate_up_proj)]\n"
         "       [--seed N] [--tokenizer tokenizer.json]\n"
         "       hybrids (qwen3_next, qwen3_5): [--moe] [--interval N] [--layer-types] [--linear-heads K,V]\n"
         "       [--linear-head-dim N] [--mlx-linear-bits N] [--mtp 1] --out PATH\n"
         "       --type T (GGUF): f32 f16 bf16 q8_0 q4_0 q4_k q5_k q6_k: every matrix in T; q4_k_m, q5_k_m:\n"
         "       llama-quantize's Q4_K_M / Q5_K_M mix (Q4_K / Q5_K, with Q6_K for the output or tied embeddings\n"
         "       and about half of the attn_v and ffn_down matrices)\n";
}

Result<TestModelArgs> parse_test_model_args(std::span<const std::string> args) {
  // The preset comes first, whatever its position, so the other flags override it.
  std::string preset = "tiny-llama";
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--preset") preset = args[i + 1];
  }
  TestModelArgs out;
  SPLASH_TRY(out.spec, test_model_preset(preset));
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& f = args[i];
    if (f == "--tie") { out.spec.tie_embeddings = true; continue; }
    if (f == "--no-tie") { out.spec.tie_embeddings = false; continue; }
    if (f == "--no-norm-topk") { out.spec.norm_topk_prob = false; continue; }
    if (f == "--layer-types") { out.spec.use_layer_types = true; continue; }
    if (f == "--moe") { out.spec.hybrid_moe = true; continue; }
    if (f == "--fused-experts") { out.spec.hf_fused_experts = true; continue; }
    if (i + 1 >= args.size()) return make_error(f, ": missing value (", test_model_usage(), ")");
    const std::string& v = args[++i];
    TestModelSpec& s = out.spec;
    if (f == "--preset") continue;
    if (f == "--out") { out.out_path = v; continue; }
    if (f == "--tokenizer") { s.tokenizer_json = v; continue; }
    if (f == "--arch") { s.arch = v; continue; }
    if (f == "--format") {
      if (v == "gguf") s.format = TestModelFormat::kGguf;
      else if (v == "safetensors" || v == "hf" || v == "mlx") s.format = TestModelFormat::kSafetensors;
      else return make_error("--format: '", v, "' is not gguf or safetensors");
      continue;
    }
    if (f == "--type") {
      auto t = gguf_type_from_name(v);
      if (!t) return make_error(f, ": unknown type '", v, "' (f32 f16 bf16 q8_0 q4_0 q4_k q5_k q6_k q4_k_m q5_k_m)");
      std::tie(s.gguf_type, s.gguf_mix) = *t;
      continue;
    }
    if (f == "--dtype") {
      auto t = dtype_from_name(v);
      if (!t) return make_error(f, ": unknown type '", v, "'");
      s.safetensors_dtype = *t;
      continue;
    }
    if (f == "--mlx-bits") { SPLASH_TRY(s.mlx_bits, parse_u32(f, v)); s.format = TestModelFormat::kSafetensors; continue; }
    if (f == "--mlx-group") { SPLASH_TRY(s.mlx_group_size, parse_u32(f, v)); continue; }
    if (f == "--dim") { SPLASH_TRY(s.n_embd, parse_u32(f, v)); continue; }
    if (f == "--layers") { SPLASH_TRY(s.n_layer, parse_u32(f, v)); continue; }
    if (f == "--heads") { SPLASH_TRY(s.n_head, parse_u32(f, v)); continue; }
    if (f == "--kv-heads") { SPLASH_TRY(s.n_head_kv, parse_u32(f, v)); continue; }
    if (f == "--head-dim") { SPLASH_TRY(s.head_dim, parse_u32(f, v)); continue; }
    if (f == "--ffn") { SPLASH_TRY(s.n_ff, parse_u32(f, v)); continue; }
    if (f == "--vocab") { SPLASH_TRY(s.n_vocab, parse_u32(f, v)); continue; }
    if (f == "--experts") { SPLASH_TRY(s.n_expert, parse_u32(f, v)); continue; }
    if (f == "--experts-used") { SPLASH_TRY(s.n_expert_used, parse_u32(f, v)); continue; }
    if (f == "--expert-ffn") { SPLASH_TRY(s.n_ff_expert, parse_u32(f, v)); continue; }
    if (f == "--shared-expert-ffn") { SPLASH_TRY(s.n_ff_shared_expert, parse_u32(f, v)); continue; }
    if (f == "--ctx") { SPLASH_TRY(s.context_length, parse_u32(f, v)); continue; }
    if (f == "--mtp") { SPLASH_TRY(s.n_mtp_layers, parse_u32(f, v)); continue; }
    if (f == "--interval") { SPLASH_TRY(s.full_attention_interval, parse_u32(f, v)); continue; }
    if (f == "--mlx-linear-bits") { SPLASH_TRY(s.mlx_linear_bits, parse_u32(f, v)); continue; }
    if (f == "--linear-head-dim") {
      SPLASH_TRY(s.linear_key_head_dim, parse_u32(f, v));
      s.linear_value_head_dim = s.linear_key_head_dim;
      continue;
    }
    if (f == "--linear-heads") {
      const size_t comma = v.find(',');
      if (comma == std::string::npos) return make_error(f, ": '", v, "' is not K,V (key heads, value heads)");
      SPLASH_TRY(s.linear_n_key_heads, parse_u32(f, v.substr(0, comma)));
      SPLASH_TRY(s.linear_n_value_heads, parse_u32(f, v.substr(comma + 1)));
      continue;
    }
    if (f == "--seed") { SPLASH_TRY(s.seed, parse_uint(f, v)); continue; }
    if (f == "--rope-theta") { SPLASH_TRY(s.rope_theta, parse_float(f, v)); continue; }
    if (f == "--rms-eps") { SPLASH_TRY(s.rms_eps, parse_float(f, v)); continue; }
    return make_error("unknown option '", f, "'\n", test_model_usage());
  }
  if (out.out_path.empty()) return make_error("--out is required\n", test_model_usage());
  SPLASH_TRY_STATUS(validate_test_model_spec(out.spec));
  return out;
}

}  // namespace splash
