#include "testmodel/test_model.h"

#include <algorithm>
#include <cctype>
#include <exception>

#include "formats/mlx_quant.h"
#include "testmodel/encode.h"
#include "testmodel/gguf_mix.h"
#include "testmodel/tokenizer_gen.h"
#include "testmodel/writers.h"

namespace splash {
namespace {

constexpr uint32_t kSyntheticVocab = 400;

TestModelSpec tiny(const char* arch) {
  TestModelSpec s;
  s.arch = arch;
  return s;
}

TestModelSpec bench_qwen3(uint32_t hidden, uint32_t ffn) {
  TestModelSpec s;
  s.arch = "qwen3";
  s.n_vocab = 151936;
  s.n_embd = hidden;
  s.n_ff = ffn;
  s.n_layer = 28;
  s.n_head = 16;
  s.n_head_kv = 8;
  s.head_dim = 128;
  s.context_length = 40960;
  s.rope_theta = 1000000.0f;
  s.rms_eps = 1e-6f;
  s.tie_embeddings = true;
  s.gguf_type = DType::kQ8_0;
  return s;
}

TestModelSpec tiny_hybrid(const char* arch) {
  TestModelSpec s = tiny(arch);
  s.n_layer = 4;      // 3 Gated DeltaNet layers, then gated attention
  s.head_dim = 32;    // partial rotary 0.25: 8 rotated dims of 32
  s.tie_embeddings = true;
  return s;
}

}  // namespace

std::vector<std::string> test_model_preset_names() {
  return {"tiny-llama", "tiny-qwen2", "tiny-qwen3", "tiny-llama-k", "tiny-qwen3-k", "qwen3-0.6b", "qwen3-1.7b", "tiny-qwen3-moe", "qwen3-moe-bench",
          "tiny-qwen3-next", "tiny-qwen3-next-mtp", "tiny-qwen3-5", "hybrid-0.6b", "hybrid-1.7b", "tiny-qwen3-next-moe",
          "tiny-qwen3-next-moe-mtp", "tiny-qwen3-5-moe", "qwen3-next-bench"};
}

Result<TestModelSpec> test_model_preset(std::string_view name) {
  if (name == "tiny-llama") return tiny("llama");
  if (name == "tiny-qwen2") {
    TestModelSpec s = tiny("qwen2");
    s.tie_embeddings = true;
    return s;
  }
  if (name == "tiny-qwen3") {
    TestModelSpec s = tiny("qwen3");
    s.head_dim = 32;  // 4 heads x 32 = 128 != n_embd 64: the q/k/o shapes differ from dim
    return s;
  }
  if (name == "tiny-llama-k" || name == "tiny-qwen3-k") {
    const bool qwen = name == "tiny-qwen3-k";
    TestModelSpec s = tiny(qwen ? "qwen3" : "llama");
    s.n_embd = 256;
    s.n_ff = 512;
    s.head_dim = qwen ? 128 : 64;  // qwen3: 4 x 128 = 512 != 256
    s.gguf_type = DType::kQ4_K;
    return s;
  }
  if (name == "tiny-qwen3-next") return tiny_hybrid("qwen3_next");
  if (name == "tiny-qwen3-next-mtp") {
    TestModelSpec s = tiny_hybrid("qwen3_next");
    s.format = TestModelFormat::kSafetensors;
    s.n_mtp_layers = 1;
    return s;
  }
  if (name == "tiny-qwen3-5") return tiny_hybrid("qwen3_5");
  if (name == "tiny-qwen3-next-moe" || name == "tiny-qwen3-5-moe") {
    const bool next = name == "tiny-qwen3-next-moe";
    TestModelSpec s = tiny_hybrid(next ? "qwen3_next" : "qwen3_5");
    s.hybrid_moe = true;
    s.n_ff_shared_expert = 64;
    if (next) s.mlp_only_layers = {1};  // a dense layer among sparse ones (Qwen3-Next's mlp_only_layers)
    return s;
  }
  if (name == "tiny-qwen3-next-moe-mtp") {
    TestModelSpec s = test_model_preset("tiny-qwen3-next-moe").value();
    s.format = TestModelFormat::kSafetensors;
    s.n_mtp_layers = 1;  // an MTP layer with the MoE block, as real Qwen3-Next checkpoints have
    return s;
  }
  if (name == "qwen3-next-bench") {
    TestModelSpec s = bench_qwen3(1024, 3072);
    s.arch = "qwen3_next";
    s.hybrid_moe = true;
    s.n_layer = 12;  // 9 Gated DeltaNet + 3 gated attention
    s.n_head = 8;
    s.n_head_kv = 2;
    s.head_dim = 256;
    s.linear_n_key_heads = 8;
    s.linear_key_head_dim = 128;
    s.linear_n_value_heads = 16;
    s.linear_value_head_dim = 128;
    s.n_expert = 64;  // 1/8 of the experts per token; Qwen3.5-35B-A3B's shared-expert size
    s.n_expert_used = 8;
    s.n_ff_expert = 256;
    s.n_ff_shared_expert = 512;
    s.gguf_type = DType::kQ4_0;
    return s;
  }
  if (name == "hybrid-0.6b") {
    TestModelSpec s = bench_qwen3(1024, 3072);
    s.arch = "qwen3_5";
    s.n_layer = 24;
    s.n_head = 8;
    s.n_head_kv = 2;
    s.head_dim = 256;
    s.linear_n_key_heads = 16;
    s.linear_key_head_dim = 128;
    s.linear_n_value_heads = 16;
    s.linear_value_head_dim = 128;
    return s;
  }
  if (name == "hybrid-1.7b") {
    TestModelSpec s = test_model_preset("hybrid-0.6b").value();
    s.n_embd = 2048;
    s.n_ff = 6144;
    return s;
  }
  if (name == "tiny-qwen3-moe") {
    TestModelSpec s = tiny("qwen3_moe");
    s.n_layer = 3;
    s.head_dim = 32;
    s.mlp_only_layers = {1};  // a dense layer between two MoE layers
    return s;
  }
  if (name == "qwen3-moe-bench") {
    TestModelSpec s = bench_qwen3(2048, 6144);
    s.arch = "qwen3_moe";
    s.n_layer = 8;
    s.n_head = 32;
    s.n_head_kv = 4;
    s.n_expert = 128;
    s.n_expert_used = 8;
    s.n_ff_expert = 768;
    s.gguf_type = DType::kQ4_0;
    return s;
  }
  if (name == "qwen3-0.6b") return bench_qwen3(1024, 3072);
  if (name == "qwen3-1.7b") return bench_qwen3(2048, 6144);
  std::string known;
  for (const auto& n : test_model_preset_names()) known += (known.empty() ? "" : ", ") + n;
  return make_error("unknown test-model preset '", name, "' (known: ", known, ")");
}

std::optional<std::pair<DType, GgufMix>> gguf_type_from_name(std::string_view name) {
  for (GgufMix mix : {GgufMix::kQ4_K_M, GgufMix::kQ5_K_M}) {
    const std::string_view mix_name = mix == GgufMix::kQ4_K_M ? "Q4_K_M" : "Q5_K_M";
    bool eq = name.size() == mix_name.size();
    for (size_t i = 0; eq && i < name.size(); ++i)
      eq = std::toupper(static_cast<unsigned char>(name[i])) == mix_name[i];
    if (eq) return std::pair{testmodel::gguf_mix_base_type(mix), mix};
  }
  if (auto t = dtype_from_name(name)) return std::pair{*t, GgufMix::kPure};
  return std::nullopt;
}

Status validate_test_model_spec(const TestModelSpec& s) {
  if (!is_known_architecture(s.arch)) {
    std::string known;
    for (const ArchitectureFacts& a : all_architecture_facts()) known += str_cat(known.empty() ? "" : ", ", a.name);
    return make_error("test model: arch '", s.arch, "' is not one of ", known);
  }
  if (s.hybrid()) {
    const std::pair<const char*, uint32_t> lin[] = {
        {"linear_n_key_heads", s.linear_n_key_heads}, {"linear_key_head_dim", s.linear_key_head_dim},
        {"linear_n_value_heads", s.linear_n_value_heads}, {"linear_value_head_dim", s.linear_value_head_dim},
        {"linear_conv_kernel", s.linear_conv_kernel}, {"full_attention_interval", s.full_attention_interval}};
    for (const auto& [field, v] : lin)
      if (v == 0 || v > 4096) return make_error("test model: ", field, " = ", v, " must be in [1, 4096]");
    if (s.linear_n_value_heads % s.linear_n_key_heads != 0)
      return make_error("test model: linear_n_value_heads ", s.linear_n_value_heads,
                        " is not a multiple of linear_n_key_heads ", s.linear_n_key_heads);
    if (!(s.partial_rotary_factor > 0.0f && s.partial_rotary_factor <= 1.0f))
      return make_error("test model: partial_rotary_factor must be in (0, 1]");
  }
  if (s.hf_fused_experts && (!s.moe() || s.format != TestModelFormat::kSafetensors || s.mlx_bits != 0))
    return make_error("test model: --fused-experts is a plain safetensors layout of MoE experts (not GGUF or MLX)");
  if (s.hybrid_moe && !s.hybrid())
    return make_error("test model: --moe (MoE MLPs) is for the hybrids qwen3_next and qwen3_5; arch '", s.arch,
                      "' (use qwen3_moe for a MoE transformer)");
  if (s.n_mtp_layers > 0) {
    if (!s.hybrid()) return make_error("test model: an MTP head (--mtp) needs a hybrid arch (qwen3_next, qwen3_5)");
    if (s.mlx_bits != 0) return make_error("test model: MTP heads are written in GGUF and plain safetensors (no --mlx-bits)");
    if (s.n_mtp_layers > 1) return make_error("test model: n_mtp_layers ", s.n_mtp_layers, " (only 1 is written)");
  }
  if (s.moe()) {
    if (s.n_expert == 0 || s.n_expert > 512)
      return make_error("test model: n_expert = ", s.n_expert, " must be in [1, 512]");
    if (s.n_expert_used == 0 || s.n_expert_used > s.n_expert)
      return make_error("test model: n_expert_used = ", s.n_expert_used, " must be in [1, n_expert = ", s.n_expert, "]");
    for (uint32_t l : s.mlp_only_layers)
      if (l >= s.n_layer) return make_error("test model: mlp_only_layers entry ", l, " is not a layer");
    // Expert rows must fit the quantization blocks like every other matrix.
    uint32_t block = 1;
    if (s.format == TestModelFormat::kGguf && testmodel::gguf_type_supported(s.gguf_type))
      block = dtype_traits(s.gguf_type).block_elems;
    if (s.format == TestModelFormat::kSafetensors && s.mlx_bits != 0) block = s.mlx_group_size;
    if (s.n_ff_expert == 0) return make_error("test model: n_ff_expert must be positive");
    for (uint32_t f : {s.n_ff_expert, s.n_ff_shared_expert})
      if (f > (1u << 16) || f % block != 0)
        return make_error("test model: expert intermediate size ", f, " must be at most 65536 and a multiple of ",
                          block, " (the matrix type's block or MLX group)");
  }
  constexpr uint32_t kMaxDim = 1u << 16;
  const std::pair<const char*, uint32_t> dims[] = {
      {"n_embd", s.n_embd}, {"n_layer", s.n_layer}, {"n_head", s.n_head}, {"n_head_kv", s.n_head_kv},
      {"head_dim", s.head_dim}, {"n_ff", s.n_ff}, {"context_length", s.context_length}};
  for (const auto& [field, v] : dims) {
    if (v == 0 || v > kMaxDim) return make_error("test model: ", field, " = ", v, " must be in [1, ", kMaxDim, "]");
  }
  if (s.n_vocab > (1u << 22)) return make_error("test model: n_vocab ", s.n_vocab, " is larger than 4M");
  if (s.n_head % s.n_head_kv != 0) {
    return make_error("test model: n_head ", s.n_head, " is not a multiple of n_head_kv ", s.n_head_kv);
  }
  if (s.head_dim % 2 != 0) return make_error("test model: head_dim ", s.head_dim, " must be even (RoPE pairs)");
  if (!s.facts().explicit_head_dim && s.n_head * s.head_dim != s.n_embd) {
    return make_error("test model: ", s.arch, " needs n_head * head_dim (", s.n_head * s.head_dim,
                      ") == n_embd (", s.n_embd, "); its config has no explicit head_dim");
  }
  if (!(s.rms_eps > 0.0f) || !(s.rope_theta > 0.0f)) {
    return make_error("test model: rms_eps and rope_theta must be positive");
  }
  const uint64_t row_lengths[] = {s.n_embd, s.n_ff, uint64_t{s.n_head} * s.head_dim,
                                  s.hybrid() ? uint64_t{s.linear_n_value_heads} * s.linear_value_head_dim : s.n_embd};
  if (s.gguf_mix != GgufMix::kPure) {
    const char* mix = s.gguf_mix == GgufMix::kQ4_K_M ? "Q4_K_M" : "Q5_K_M";
    if (s.format != TestModelFormat::kGguf)
      return make_error("test model: ", mix, " is a GGUF file type (llama-quantize's mix), not a safetensors one");
    if (s.gguf_type != testmodel::gguf_mix_base_type(s.gguf_mix))
      return make_error("test model: ", mix, " mixes over ", dtype_name(testmodel::gguf_mix_base_type(s.gguf_mix)),
                        ", but gguf_type is ", dtype_name(s.gguf_type));
  }
  if (s.format == TestModelFormat::kGguf) {
    if (!testmodel::gguf_type_supported(s.gguf_type)) {
      return make_error("test model: GGUF type ", dtype_name(s.gguf_type),
                        " is not one of F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K (or the mixes Q4_K_M, Q5_K_M)");
    }
    const uint32_t block = dtype_traits(s.gguf_type).block_elems;
    for (uint64_t n : row_lengths) {
      if (n % block != 0) {
        // llama-quantize would give such rows Q5_0 / Q5_1 / Q8_0 in a mix; Splash does not run the first two.
        return make_error("test model: ", dtype_name(s.gguf_type), s.gguf_mix != GgufMix::kPure ? " (the mix's base)" : "",
                          " needs rows that are multiples of ", block, " values, but a matrix has rows of ", n,
                          " (n_embd, n_ff and n_head * head_dim must all be multiples)");
      }
    }
  } else {
    if (s.safetensors_dtype != DType::kF32 && s.safetensors_dtype != DType::kF16 &&
        s.safetensors_dtype != DType::kBF16) {
      return make_error("test model: safetensors dtype ", dtype_name(s.safetensors_dtype), " is not F32, F16 or BF16");
    }
    if (s.mlx_linear_bits != 0) {
      if (s.mlx_bits == 0 || !s.hybrid())
        return make_error("test model: mixed MLX bits need --mlx-bits and a hybrid architecture");
      SPLASH_TRY_STATUS(validate_mlx_quant_params({s.mlx_group_size, s.mlx_linear_bits}, "test model"));
    }
    if (s.mlx_bits != 0) {
      SPLASH_TRY_STATUS(validate_mlx_quant_params({s.mlx_group_size, s.mlx_bits}, "test model"));
      for (uint64_t n : row_lengths) {
        if (n % s.mlx_group_size != 0) {
          return make_error("test model: MLX group size ", s.mlx_group_size, " does not divide a row of ", n);
        }
      }
    }
  }
  return {};
}

namespace {

Status write_impl(const TestModelSpec& spec, const std::string& out_path) {
  SPLASH_TRY_STATUS(validate_test_model_spec(spec));
  testmodel::TokenizerData tok;
  if (spec.tokenizer_json.empty()) {
    // Presets: llama test models get a SentencePiece vocabulary (as llama2-era checkpoints), the
    // others a byte-level BPE one.
    constexpr std::string_view kSpmArchitectures[] = {"llama"};
    const bool spm = std::ranges::find(kSpmArchitectures, std::string_view(spec.arch)) != std::end(kSpmArchitectures);
    SPLASH_TRY(tok, testmodel::make_synthetic_tokenizer(spm, kSyntheticVocab));
  } else {
    SPLASH_TRY(tok, testmodel::load_hf_tokenizer(spec.tokenizer_json));
  }
  const uint32_t n_vocab = spec.n_vocab != 0 ? spec.n_vocab : static_cast<uint32_t>(tok.tokens.size());
  SPLASH_TRY_STATUS(testmodel::pad_vocab(tok, n_vocab));
  if (spec.format == TestModelFormat::kGguf) return testmodel::write_gguf_model(spec, tok, n_vocab, out_path);
  return testmodel::write_safetensors_model(spec, tok, n_vocab, out_path);
}

}  // namespace

Status write_test_model(const TestModelSpec& spec, const std::string& out_path) {
  try {
    return write_impl(spec, out_path);
  } catch (const std::exception& e) {  // JSON, filesystem, allocation: report, never escape
    return make_error("writing test model ", out_path, ": ", e.what());
  }
}

}  // namespace splash
