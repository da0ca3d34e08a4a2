// Internal state of a Tokenizer, shared by tokenizer.cpp (build, encode, decode), bpe.cpp and spm.cpp.
// Not part of the public API.
#pragma once

#include "core/utf8.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/regex_split.h"
#include "tokenizer/tokenizer_spec.h"

namespace splash::detail {

// Heterogeneous lookup so encode can probe the vocabulary with string_views into the input.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIndex = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct BpeMerge {
  int32_t rank;
  int32_t merged;  // id of left+right
};

struct CompiledSplit {
  std::string pattern;  // as given in the spec, so to_spec can give it back
  SplitRegex regex;
  SplitBehavior behavior;
  bool invert;
};

struct AddedMatcher {
  AddedToken token;
};

struct TokenizerImpl {
  TokenizerKind kind = TokenizerKind::kByteLevelBpe;
  std::string source;

  std::vector<std::string> tokens;   // [n_vocab] vocabulary strings
  std::vector<std::string> pieces;   // [n_vocab] decoded bytes of each token
  std::vector<float> scores;         // [n_vocab]
  std::vector<TokenType> types;      // [n_vocab]
  std::vector<uint8_t> special;      // [n_vocab] 1 for control / special added tokens
  TokenIndex index;                  // vocabulary string -> id

  // BPE: (left id << 32 | right id) -> rank and result.
  std::unordered_map<uint64_t, BpeMerge> merges;
  // BPE: id of the byte-level character of each byte; SPM: id of <0xXX>. -1 when absent.
  std::array<int32_t, 256> byte_ids{};

  std::vector<AddedToken> added;                     // longest content first
  std::array<std::vector<uint16_t>, 256> added_by_first_byte;  // indices into `added`

  std::vector<Normalizer> normalizers;
  std::vector<CompiledSplit> splits;
  bool byte_level_prefix_space = false;
  bool ignore_merges = false;
  bool add_space_prefix = false;
  bool space_prefix_first_only = false;
  bool space_prefix_unless_space = false;

  // Set by build for the bounded encode: no id stands for more than max_token_bytes bytes of the text
  // it encodes, so a word of W bytes gives at least W / max_token_bytes ids when every byte has a
  // token (its own, or <unk>) and none is dropped.
  size_t max_token_bytes = 1;
  bool every_byte_encodes = false;
  // SentencePiece: no vocabulary entry holds U+2581 after another character, so no merge crosses the
  // start of a run of spaces and a long text may be merged in chunks cut there (encode.cpp).
  bool spm_cut_before_space = false;

  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;
  std::vector<int32_t> eog_ids;
  bool add_bos = false, add_eos = false;
  std::string chat_template;

  int32_t n_vocab() const { return static_cast<int32_t>(tokens.size()); }
};

// GPT-2 byte <-> printable code point mapping.
uint32_t byte_to_codepoint(uint8_t b);
int byte_from_codepoint(uint32_t cp);  // -1 if cp is not in the mapping
using splash::append_utf8;  // core/utf8.h
// Vocabulary string (byte-level mapped) -> raw bytes; code points outside the mapping are kept as UTF-8.
std::string byte_level_unmap(std::string_view text);
// Raw bytes -> byte-level mapped vocabulary string.
std::string byte_level_map(std::string_view bytes);

// The whole encode pipeline (encode.cpp): false, with `out` holding more than max_tokens ids, once
// the result is known to exceed max_tokens; SentencePiece text is merged in chunks of at least
// spm_chunk_bytes bytes.
bool encode_text(const TokenizerImpl& t, std::string_view text, bool add_special, bool parse_special,
                 size_t max_tokens, size_t spm_chunk_bytes, std::vector<int32_t>& out);

// Appends the BPE ids of one pre-tokenized word (raw bytes).
void bpe_encode_word(const TokenizerImpl& t, std::string_view word, std::vector<int32_t>& out);
// Appends the SPM ids of `text` (spaces already replaced by U+2581).
void spm_encode(const TokenizerImpl& t, std::string_view text, std::vector<int32_t>& out);

}  // namespace splash::detail
