#include "tokenizer/pretokenizers.h"

#include <array>

namespace splash {

namespace {

struct NamedPattern {
  std::string_view name;
  std::string_view pattern;
};

constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5 adds combining marks (\p{M}) to letter runs.
constexpr std::string_view kQwen35Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// The first entry for a pattern is its canonical name (what the exporter writes).
constexpr std::array<NamedPattern, 5> kTable{{
    {"qwen2", kQwen2Pattern},
    {"qwen35", kQwen35Pattern},
    {"gpt-2", kGpt2Pattern},
    {"gpt2", kGpt2Pattern},
    {"default", kGpt2Pattern},
}};

}  // namespace

std::optional<std::string> pretokenizer_pattern(std::string_view gguf_name) {
  for (const NamedPattern& e : kTable)
    if (e.name == gguf_name) return std::string(e.pattern);
  return std::nullopt;
}

std::optional<std::string> pretokenizer_gguf_name(std::string_view pattern) {
  for (const NamedPattern& e : kTable)
    if (e.pattern == pattern) return std::string(e.name);
  return std::nullopt;
}

std::string pretokenizer_gguf_names() {
  std::string out;
  for (const NamedPattern& e : kTable) {
    if (!out.empty()) out += ", ";
    out += e.name;
  }
  return out;
}

}  // namespace splash
