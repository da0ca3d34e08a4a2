// llama2.c tokenizer.bin -> SentencePiece TokenizerSpec. The file stores pieces with '▁' already turned
// into ' ' and byte tokens either as "<0xXX>" or as the byte's Latin-1 character, so both are mapped
// back to the GGUF conventions here; the vocabulary then encodes exactly like the GGUF "llama" one.
// (Written here because src/formats has no llama2.c tokenizer parser.)
#include <cstring>

#include "core/byte_reader.h"
#include "core/mapped_file.h"
#include "tokenizer/tokenizer.h"

namespace splash {

namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";

std::string latin1_utf8(int b) {
  std::string s;
  if (b < 0x80) {
    s.push_back(static_cast<char>(b));
  } else {
    s.push_back(static_cast<char>(0xC0 | (b >> 6)));
    s.push_back(static_cast<char>(0x80 | (b & 0x3F)));
  }
  return s;
}

std::string trim_newlines(const std::string& s) {
  size_t b = s.find_first_not_of('\n');
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of('\n');
  return s.substr(b, e - b + 1);
}

}  // namespace

Result<Tokenizer> load_tokenizer_llama2c_bytes(std::span<const uint8_t> bytes, const std::string& source) {
  ByteReader r(bytes, source);
  SPLASH_TRY(int32_t max_len, r.read<int32_t>("max_token_length"));
  if (max_len <= 0 || max_len > 4096)
    return make_error(source, ": max_token_length ", max_len, " is not in [1, 4096]");
  TokenizerSpec spec;
  spec.kind = TokenizerKind::kSentencePiece;
  spec.source = source;
  while (r.remaining() > 0) {
    std::string what = str_cat("token ", spec.tokens.size());
    SPLASH_TRY(float score, r.read<float>(what.c_str()));
    SPLASH_TRY(int32_t len, r.read<int32_t>(what.c_str()));
    if (len < 0 || len > max_len)
      return make_error(source, ": ", what, " has length ", len, " (max_token_length ", max_len, ")");
    SPLASH_TRY(std::string text, r.read_string(static_cast<uint64_t>(len), what.c_str()));
    spec.tokens.push_back(std::move(text));
    spec.scores.push_back(score);
  }
  const size_t n = spec.tokens.size();
  if (n < 259) return make_error(source, ": ", n, " tokens; the Llama-2 layout needs at least 259");
  spec.types.assign(n, TokenType::kNormal);
  spec.tokens[0] = "<unk>";
  spec.types[0] = TokenType::kUnknown;
  const char* names[2] = {"<s>", "</s>"};
  for (int i = 1; i <= 2; ++i) {
    // llama2.c's exporter wrote BOS / EOS as "\n<s>\n" / "\n</s>\n".
    if (trim_newlines(spec.tokens[i]) != names[i - 1])
      return make_error(source, ": token ", i, " is '", spec.tokens[i], "', expected ", names[i - 1]);
    spec.tokens[i] = names[i - 1];
    spec.types[i] = TokenType::kControl;
  }
  for (int b = 0; b < 256; ++b) {
    std::string& s = spec.tokens[3 + b];
    char hex[8];
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    if (s != hex && s != latin1_utf8(b))
      return make_error(source, ": token ", 3 + b, " should be the byte token ", hex);
    s = hex;
    spec.types[3 + b] = TokenType::kByte;
  }
  for (size_t i = 259; i < n; ++i) {
    std::string& s = spec.tokens[i];
    std::string out;
    for (char c : s) {
      if (c == ' ') out.append(kSpmSpace);
      else out.push_back(c);
    }
    s = std::move(out);
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
