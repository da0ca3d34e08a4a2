// Tokenizers for test models: a small synthetic one trained at generation time (byte-level BPE in
// the Qwen style, or a SentencePiece-style vocabulary with byte fallback in the Llama style), or a
// real Hugging Face tokenizer.json read from disk. Either way the result carries what both output
// formats need: GGUF tokenizer.ggml.* arrays and the HF tokenizer.json / tokenizer_config.json text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace splash::testmodel {

// GGUF token types (llama.cpp's llama_token_type).
enum class TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct TokenizerData {
  bool spm = false;                  // true: GGUF model "llama" (scores); false: "gpt2" (merges)
  std::vector<std::string> tokens;   // by id, as GGUF stores them (byte-level text / "▁" pieces)
  std::vector<float> scores;         // one per token (SPM ranks; 0 for byte-level BPE)
  std::vector<TokenType> token_types;
  std::vector<std::string> merges;   // "left right", in priority order
  int32_t bos = -1, eos = -1, pad = -1, unk = -1;  // -1 = none
  bool add_bos = false;
  std::string pre = "";              // GGUF tokenizer.ggml.pre ("qwen2" for byte-level BPE)
  std::string chat_template;
  std::string tokenizer_json;        // HF tokenizer.json text
  std::string tokenizer_config_json; // HF tokenizer_config.json text
};

// Trains merges on a built-in English corpus until the vocabulary has about `target_size` tokens.
// `spm` selects the Llama-style vocabulary; otherwise byte-level BPE with ChatML special tokens.
Result<TokenizerData> make_synthetic_tokenizer(bool spm, uint32_t target_size);

// Reads a byte-level BPE tokenizer.json (and tokenizer_config.json beside it, when present).
Result<TokenizerData> load_hf_tokenizer(const std::string& tokenizer_json_path);

// Appends "[PAD<i>]" tokens (user-defined) until there are n_vocab tokens. Error if there are more.
Status pad_vocab(TokenizerData& t, uint32_t n_vocab);

}  // namespace splash::testmodel
