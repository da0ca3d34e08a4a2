#include "formats/architecture_facts.h"

#include <array>

namespace splash {

namespace {

constexpr std::string_view kLlamaClasses[] = {"LlamaForCausalLM"};
constexpr std::string_view kQwen2Classes[] = {"Qwen2ForCausalLM"};
constexpr std::string_view kQwen3Classes[] = {"Qwen3ForCausalLM"};
constexpr std::string_view kQwen3MoeClasses[] = {"Qwen3MoeForCausalLM"};
constexpr std::string_view kQwen3NextClasses[] = {"Qwen3NextForCausalLM"};
constexpr std::string_view kQwen35Classes[] = {"Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration",
                                               "Qwen3_5MoeForCausalLM", "Qwen3_5MoeForConditionalGeneration"};

constexpr ArchitectureFacts llama() {
  ArchitectureFacts a;
  a.name = "llama";
  a.hf_classes = kLlamaClasses;
  a.hf_model_type = "llama";
  a.gguf_name = "llama";
  a.hf_bias_keys = true;
  a.gguf_qk_rope_interleaved = true;
  return a;
}

constexpr ArchitectureFacts qwen2() {
  ArchitectureFacts a;
  a.name = "qwen2";
  a.hf_classes = kQwen2Classes;
  a.hf_model_type = "qwen2";
  a.gguf_name = "qwen2";
  a.attention_bias = true;
  return a;
}

constexpr ArchitectureFacts qwen3() {
  ArchitectureFacts a;
  a.name = "qwen3";
  a.hf_classes = kQwen3Classes;
  a.hf_model_type = "qwen3";
  a.gguf_name = "qwen3";
  a.qk_norm = true;
  a.explicit_head_dim = true;
  return a;
}

constexpr ArchitectureFacts qwen3_moe() {
  ArchitectureFacts a = qwen3();
  a.name = "qwen3_moe";
  a.hf_classes = kQwen3MoeClasses;
  a.hf_model_type = "qwen3_moe";
  a.gguf_name = "qwen3moe";
  a.experts_required = true;
  a.hf_per_expert_tensors = true;
  return a;
}

constexpr ArchitectureFacts hybrid(ArchitectureFacts a) {
  a.qk_norm = true;
  a.explicit_head_dim = true;
  a.hybrid = true;
  a.partial_rotary_factor = 0.25f;
  a.zero_centred_norms = true;
  return a;
}

constexpr ArchitectureFacts qwen3_next() {
  ArchitectureFacts a;
  a.name = "qwen3_next";
  a.hf_classes = kQwen3NextClasses;
  a.hf_model_type = "qwen3_next";
  a.gguf_name = "qwen3next";
  a.raw_gain_marker = RawGainMarker::kPerExpertTensors;
  a.hf_fused_qkvz = true;
  a.hf_per_expert_tensors = true;
  a.hf_moe_keys_always = true;
  return hybrid(a);
}

constexpr ArchitectureFacts qwen3_5() {
  ArchitectureFacts a;
  a.name = "qwen3_5";
  a.hf_classes = kQwen35Classes;
  a.hf_moe_class = "Qwen3_5MoeForCausalLM";
  a.hf_model_type = "qwen3_5_text";
  a.hf_moe_model_type = "qwen3_5_moe_text";
  a.hf_wrapper_class = "Qwen3_5ForConditionalGeneration";
  a.hf_moe_wrapper_class = "Qwen3_5MoeForConditionalGeneration";
  a.hf_wrapper_model_type = "qwen3_5";
  a.hf_moe_wrapper_model_type = "qwen3_5_moe";
  a.gguf_name = "qwen35";
  a.gguf_moe_name = "qwen35moe";
  a.raw_gain_marker = RawGainMarker::kMtpTensors;
  a.gguf_v_heads_tiled = true;
  a.gguf_rope_sections = true;
  return hybrid(a);
}

constexpr std::array<ArchitectureFacts, 6> kFacts = {llama(), qwen2(), qwen3(), qwen3_moe(), qwen3_next(), qwen3_5()};

constexpr ArchitectureFacts kUnknown{};

}  // namespace

const ArchitectureFacts& architecture_facts(std::string_view name) {
  for (const ArchitectureFacts& a : kFacts)
    if (a.name == name) return a;
  return kUnknown;
}

bool is_known_architecture(std::string_view name) { return !architecture_facts(name).name.empty(); }

const ArchitectureFacts* architecture_facts_for_hf_class(std::string_view hf_class) {
  for (const ArchitectureFacts& a : kFacts)
    for (std::string_view c : a.hf_classes)
      if (c == hf_class) return &a;
  return nullptr;
}

const ArchitectureFacts* architecture_facts_for_gguf(std::string_view gguf_arch) {
  for (const ArchitectureFacts& a : kFacts)
    if (a.gguf_name == gguf_arch || (!a.gguf_moe_name.empty() && a.gguf_moe_name == gguf_arch)) return &a;
  return nullptr;
}

std::span<const ArchitectureFacts> all_architecture_facts() { return kFacts; }

std::string_view gguf_arch_name_of(const ArchitectureFacts& a, bool moe) {
  return moe && !a.gguf_moe_name.empty() ? a.gguf_moe_name : a.gguf_name;
}

std::string_view hf_class_of(const ArchitectureFacts& a, bool moe) {
  if (moe && !a.hf_moe_class.empty()) return a.hf_moe_class;
  return a.hf_classes.empty() ? std::string_view() : a.hf_classes[0];
}

}  // namespace splash
