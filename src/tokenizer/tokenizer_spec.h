// TokenizerSpec: what every tokenizer file format is read into before Tokenizer::build validates it
// and builds lookup tables. Loaders only translate their format's fields; checks live in one place.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace splash {

enum class TokenizerKind : uint8_t {
  kByteLevelBpe,   // GPT-2 style: bytes -> printable code points, merges by rank
  kSentencePiece,  // llama SPM: score-ordered merging of adjacent pieces, '▁' for space, <0xXX> fallback
};

// Same numbering as GGUF tokenizer.ggml.token_type.
enum class TokenType : uint8_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool lstrip = false;       // swallow whitespace on its left
  bool rstrip = false;       // swallow whitespace on its right
  bool single_word = false;  // only match when not inside a word
  bool normalized = false;   // matched against normalized text (we match raw text; see tokenizer.cpp)
};

enum class Normalizer : uint8_t { kNfc, kNfd, kNfkc, kNfkd };

enum class SplitBehavior : uint8_t { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext };

struct SplitRule {
  std::string pattern;  // PCRE2 syntax (UTF + UCP); Oniguruma patterns from tokenizer.json work as-is
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
};

struct TokenizerSpec {
  TokenizerKind kind = TokenizerKind::kByteLevelBpe;
  std::string source;  // file name, for error messages

  std::vector<std::string> tokens;  // [n_vocab] vocabulary strings by id ("" for unused gaps)
  std::vector<float> scores;        // [n_vocab] or empty (SPM needs them)
  std::vector<TokenType> types;     // [n_vocab] or empty (all normal)
  std::vector<std::pair<std::string, std::string>> merges;  // BPE, highest priority first
  std::vector<AddedToken> added;    // matched in the text before pre-tokenization

  std::vector<Normalizer> normalizers;  // applied in order
  std::vector<SplitRule> splits;        // applied in order, each to every piece of the previous one
  bool byte_level_prefix_space = false;  // ByteLevel add_prefix_space
  bool ignore_merges = false;           // a whole word found in the vocabulary is one token
  bool add_space_prefix = false;        // SPM: prepend ' ' to text that starts the input / follows a special
  // SPM from a tokenizer.json Metaspace pre-tokenizer: prefix only the text that starts the input
  // (prepend_scheme "first"), and never text that already starts with a space. GGUF cannot say either.
  bool space_prefix_first_only = false;
  bool space_prefix_unless_space = false;

  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  std::vector<int32_t> eog_ids;  // extra end-of-generation ids besides eos
  bool add_bos = false;
  bool add_eos = false;
  std::string chat_template;
};

// Merges for a SentencePiece vocabulary in the form Hugging Face's converter writes for Llama-2: every
// split of a piece into two pieces that are both in the vocabulary (at character boundaries), ordered
// by the merged piece's score (best first), then by the left and right ids. BPE with these merges
// segments like SentencePiece's score-based merging. Needs spec.scores ([n_vocab]).
std::vector<std::pair<std::string, std::string>> spm_merges_by_score(const TokenizerSpec& spec);

}  // namespace splash
