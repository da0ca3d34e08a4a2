// The named pre-tokenizer regexes of byte-level BPE vocabularies: llama.cpp's `tokenizer.ggml.pre`
// names and the split pattern each stands for. One table, so the GGUF loader (name -> pattern) and the
// exporter (pattern -> name) cannot drift apart.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace splash {

// The PCRE2 pattern for a tokenizer.ggml.pre name ("qwen2", "qwen35", "gpt-2", "gpt2", "default"),
// or nullopt for a name we do not know.
std::optional<std::string> pretokenizer_pattern(std::string_view gguf_name);

// The canonical GGUF name of a split pattern (exact string match), or nullopt.
std::optional<std::string> pretokenizer_gguf_name(std::string_view pattern);

// "qwen2, qwen35, gpt-2, gpt2, default": the accepted names, for error messages.
std::string pretokenizer_gguf_names();

}  // namespace splash
