// The architecture registry and the formats' architecture facts list the same architectures, so
// adding one is its arch/ file, its facts entry and its registry line, and nothing is half-added.
#include <gtest/gtest.h>

#include <string>

#include "formats/architecture_facts.h"
#include "model/architecture.h"

namespace splash {
namespace {

TEST(Registry, EveryArchitectureHasFactsAndEveryFactsEntryAnArchitecture) {
  for (std::string_view name : architecture_names()) {
    EXPECT_TRUE(is_known_architecture(name)) << name << " has no ArchitectureFacts entry";
    EXPECT_EQ(architecture_facts(name).name, name);
  }
  for (const ArchitectureFacts& a : all_architecture_facts()) {
    EXPECT_NE(find_architecture(a.name), nullptr) << a.name << " has facts but no registry line";
    EXPECT_FALSE(a.hf_classes.empty()) << a.name;
    EXPECT_FALSE(a.gguf_name.empty()) << a.name;
    // Every name the facts give maps back to the architecture.
    for (std::string_view cls : a.hf_classes) {
      ASSERT_NE(architecture_facts_for_hf_class(cls), nullptr) << cls;
      EXPECT_EQ(architecture_facts_for_hf_class(cls)->name, a.name) << cls;
    }
    for (bool moe : {false, true}) {
      const ArchitectureFacts* back = architecture_facts_for_gguf(gguf_arch_name_of(a, moe));
      ASSERT_NE(back, nullptr) << a.name;
      EXPECT_EQ(back->name, a.name);
      EXPECT_EQ(architecture_facts_for_hf_class(hf_class_of(a, moe))->name, a.name);
    }
  }
  EXPECT_EQ(architecture_facts("no_such_arch").name, "");
  EXPECT_FALSE(architecture_facts("no_such_arch").hybrid);
}

TEST(Registry, FactsOfTheQwenHybrids) {
  // The names llama.cpp and transformers use for the MoE variant of Qwen3.5, and none for Qwen3-Next's.
  EXPECT_EQ(gguf_arch_name_of(architecture_facts("qwen3_5"), true), "qwen35moe");
  EXPECT_EQ(gguf_arch_name_of(architecture_facts("qwen3_5"), false), "qwen35");
  EXPECT_EQ(gguf_arch_name_of(architecture_facts("qwen3_next"), true), "qwen3next");
  EXPECT_EQ(hf_class_of(architecture_facts("qwen3_5"), true), "Qwen3_5MoeForCausalLM");
  EXPECT_TRUE(architecture_facts("qwen3_5").gguf_v_heads_tiled);
  EXPECT_FALSE(architecture_facts("qwen3_next").gguf_v_heads_tiled);
  EXPECT_TRUE(architecture_facts("llama").gguf_qk_rope_interleaved);
  EXPECT_FALSE(architecture_facts("qwen3").gguf_qk_rope_interleaved);
}

}  // namespace
}  // namespace splash
