// llama2.c tokenizer.bin -> SentencePiece TokenizerSpec. The file is parsed by the formats module
// (formats/llama2c.h), which also restores the SentencePiece spelling of the pieces ('▁', <0xXX>,
// <s>); here we check the Llama-2 layout and mark token types, so the vocabulary encodes exactly
// like the GGUF "llama" one.
#include <cstdio>

#include "core/mapped_file.h"
#include "formats/llama2c.h"
#include "tokenizer/tokenizer.h"

namespace splash {

Result<Tokenizer> load_tokenizer_llama2c_bytes(std::span<const uint8_t> bytes, const std::string& source) {
  SPLASH_TRY(Llama2cVocab vocab, parse_llama2c_tokenizer(bytes, source, /*n_vocab=*/0));
  TokenizerSpec spec;
  spec.kind = TokenizerKind::kSentencePiece;
  spec.source = source;
  spec.tokens = llama2c_sentencepiece_pieces(vocab);
  spec.scores = std::move(vocab.scores);
  const size_t n = spec.tokens.size();
  if (n < 259 || spec.scores.size() != n)
    return make_error(source, ": ", n, " tokens; the Llama-2 layout needs at least 259");
  spec.types.assign(n, TokenType::kNormal);
  spec.tokens[0] = "<unk>";  // llama2.c writes it as is; any spelling is the unknown token
  spec.types[0] = TokenType::kUnknown;
  const char* names[2] = {"<s>", "</s>"};
  for (int i = 1; i <= 2; ++i) {
    if (spec.tokens[i] != names[i - 1])
      return make_error(source, ": token ", i, " is '", spec.tokens[i], "', expected ", names[i - 1]);
    spec.types[i] = TokenType::kControl;
  }
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    if (spec.tokens[3 + b] != hex) return make_error(source, ": token ", 3 + b, " should be the byte token ", hex);
    spec.types[3 + b] = TokenType::kByte;
  }
  spec.unk_id = 0;
  spec.bos_id = 1;
  spec.eos_id = 2;
  spec.add_bos = true;
  spec.add_space_prefix = true;
  for (int i = 0; i < 3; ++i) {
    AddedToken a;
    a.id = i;
    a.content = spec.tokens[i];
    a.special = true;
    spec.added.push_back(a);
  }
  return Tokenizer::build(std::move(spec));
}

Result<Tokenizer> load_tokenizer_llama2c(const std::string& path) {
  SPLASH_TRY(MappedFile file, MappedFile::open(path));
  return load_tokenizer_llama2c_bytes(file.bytes(), path);
}

}  // namespace splash
