// Text <-> token ids, exactly as the model's own tokenizer does it. Two algorithms behind one type:
// byte-level BPE (Qwen2/Qwen3 tokenizer.json, GGUF "gpt2" vocabularies) and SentencePiece-style
// score merging with byte fallback (GGUF "llama" vocabularies, llama2.c tokenizer.bin).
//
// A Tokenizer is immutable after loading; encode/decode are const and safe to call from many threads
// at once. Loaders (below) return a Result naming the file and field on bad input.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "tokenizer/tokenizer_spec.h"

namespace splash {

namespace gguf {
class GgufFile;
}  // namespace gguf

namespace detail {
struct TokenizerImpl;
}  // namespace detail

class Tokenizer {
 public:
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;
  ~Tokenizer();

  // Validates a filled-in spec (ids in range, no duplicates, merges that name vocabulary entries,
  // regexes that compile) and builds the lookup tables. Every loader ends here.
  static Result<Tokenizer> build(TokenizerSpec spec);

  // The spec this tokenizer stands for: build(to_spec()) encodes and decodes exactly like *this.
  // Derived values come back in the form build leaves them (added tokens' types set, eos among the
  // end-of-generation ids, merges in rank order without duplicates, added tokens by id).
  TokenizerSpec to_spec() const;

  // add_special: add BOS/EOS as the tokenizer's own config says (add_bos / add_eos).
  // parse_special: match special added tokens (<|im_start|>, <s>, ...) in the text; when false they
  // are encoded as plain text. Non-special added tokens (<think>, ...) are always matched.
  // Invalid UTF-8 never fails: the bytes are encoded through the byte-level / byte-fallback tokens.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;

  // encode(), bounded: nullopt once the ids (BOS/EOS included) are known to number more than
  // max_tokens. Whenever encode() gives at most max_tokens ids, this gives exactly those. The work
  // and memory then follow max_tokens rather than the text: the text is normalized once (a copy,
  // none for ASCII), split and merged word by word (SentencePiece: in chunks cut before spaces), and
  // a word or chunk too long to fit is refused by its length alone. Servers refuse over-long
  // prompts with it.
  std::optional<std::vector<int32_t>> encode_bounded(std::string_view text, bool add_special, bool parse_special,
                                                     size_t max_tokens) const;
  // The same with SentencePiece chunks of at least `spm_chunk_bytes` bytes instead of 64 KiB, so that
  // tests can put chunk boundaries everywhere.
  std::optional<std::vector<int32_t>> encode_bounded(std::string_view text, bool add_special, bool parse_special,
                                                     size_t max_tokens, size_t spm_chunk_bytes) const;
  // SentencePiece: whether long text is merged in chunks (no vocabulary entry holds U+2581 after
  // another character). Otherwise each run of text between special tokens is merged whole.
  bool encodes_in_chunks() const;

  // The raw bytes the ids stand for (may be invalid UTF-8 if the ids cut a character in half).
  // skip_special drops control tokens (BOS, <|im_end|>, ...) from the output.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // The bytes one token decodes to on its own (byte-level unmapped, '▁' -> ' ', <0xXX> -> byte;
  // special tokens give their text). Out-of-range ids give "".
  std::string token_to_piece(int32_t id) const;
  // The vocabulary string as stored in the file (e.g. "Ġthe", "▁the", "<0x0A>").
  const std::string& token_text(int32_t id) const;
  std::optional<int32_t> token_id(std::string_view vocab_text) const;

  int32_t n_vocab() const;
  TokenizerKind kind() const;
  TokenType token_type(int32_t id) const;
  bool is_special(int32_t id) const;  // control tokens and special added tokens
  // End-of-generation: eos plus the other tokens that end a turn (<|im_end|>, <|endoftext|>, <|eot_id|>).
  bool is_eog(int32_t id) const;
  int32_t bos_id() const;  // -1 when the vocabulary has none
  int32_t eos_id() const;
  int32_t unk_id() const;
  int32_t pad_id() const;
  const std::vector<int32_t>& eog_ids() const;
  bool add_bos() const;
  bool add_eos() const;
  // The chat template carried with the tokenizer (tokenizer_config.json / tokenizer.chat_template), or "".
  const std::string& chat_template() const;

  // Appends one token's decoded bytes to `out`. `at_start` is true until the first non-empty piece is
  // written; SentencePiece vocabularies drop the one leading space their encoder added there.
  // decode() and IncrementalDetokenizer both go through this, so they cannot disagree.
  void append_piece(int32_t id, bool skip_special, bool& at_start, std::string& out) const;

 private:
  explicit Tokenizer(std::unique_ptr<detail::TokenizerImpl> impl);
  std::unique_ptr<detail::TokenizerImpl> impl_;
};

// --- loaders

// A Hugging Face tokenizer: `path` is tokenizer.json or a model directory holding tokenizer.json and
// (optionally) tokenizer_config.json, which supplies bos/eos/pad, add_bos_token/add_eos_token and
// chat_template. Byte-level BPE files, and the Llama-2 form of SentencePiece vocabularies (BPE with
// byte_fallback; Prepend + Replace or Metaspace), which loads as TokenizerKind::kSentencePiece.
Result<Tokenizer> load_tokenizer_json(const std::string& path);
// tokenizer.json text already in memory (fuzzing, tests); `config_json` may be empty.
Result<Tokenizer> load_tokenizer_json_text(std::string_view tokenizer_json, std::string_view config_json,
                                           const std::string& source);

// A GGUF file's tokenizer.ggml.* metadata ("llama" SentencePiece or "gpt2" byte-level BPE).
Result<Tokenizer> load_tokenizer_gguf(const gguf::GgufFile& file);

// llama2.c tokenizer.bin (max_token_length, then per token: f32 score, i32 length, bytes), read to
// the end of the file. Uses the Llama-2 layout: 0 <unk>, 1 <s>, 2 </s>, 3..258 the byte tokens.
Result<Tokenizer> load_tokenizer_llama2c(const std::string& path);
Result<Tokenizer> load_tokenizer_llama2c_bytes(std::span<const uint8_t> bytes, const std::string& source);

}  // namespace splash
