// Tokenizer: building from a TokenizerSpec, and decoding (the encode pipeline is in encode.cpp).
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdlib>
#include <cstdint>
#include <unordered_map>

#include "tokenizer/tokenizer_impl.h"

namespace splash {

using detail::TokenizerImpl;

Tokenizer::Tokenizer(std::unique_ptr<TokenizerImpl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

// --- build

namespace {

bool parse_byte_token(std::string_view s, int& byte) {
  // "<0xAB>"
  if (s.size() != 6 || s.substr(0, 3) != "<0x" || s[5] != '>') return false;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  int hi = hex(s[3]), lo = hex(s[4]);
  if (hi < 0 || lo < 0) return false;
  byte = hi * 16 + lo;
  return true;
}

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (true) {
    size_t j = s.find(from, i);
    if (j == std::string_view::npos) break;
    out.append(s.substr(i, j - i));
    out.append(to);
    i = j + from.size();
  }
  out.append(s.substr(i));
  return out;
}

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

Status check_id(const TokenizerSpec& spec, int32_t id, const char* field) {
  if (id < -1 || id >= static_cast<int32_t>(spec.tokens.size()))
    return make_error(spec.source, ": ", field, " id ", id, " is out of range (vocabulary has ",
                      spec.tokens.size(), " tokens)");
  return {};
}

}  // namespace

Result<Tokenizer> Tokenizer::build(TokenizerSpec spec) {
  auto t = std::make_unique<TokenizerImpl>();
  const size_t n = spec.tokens.size();
  if (n == 0) return make_error(spec.source, ": the vocabulary is empty");
  if (n > static_cast<size_t>(INT32_MAX / 2)) return make_error(spec.source, ": vocabulary of ", n, " tokens is too large");
  if (!spec.scores.empty() && spec.scores.size() != n)
    return make_error(spec.source, ": ", spec.scores.size(), " scores for ", n, " tokens");
  if (!spec.types.empty() && spec.types.size() != n)
    return make_error(spec.source, ": ", spec.types.size(), " token types for ", n, " tokens");
  if (spec.kind == TokenizerKind::kSentencePiece && spec.scores.empty())
    return make_error(spec.source, ": a SentencePiece vocabulary needs token scores");
  SPLASH_TRY_STATUS(check_id(spec, spec.bos_id, "bos"));
  SPLASH_TRY_STATUS(check_id(spec, spec.eos_id, "eos"));
  SPLASH_TRY_STATUS(check_id(spec, spec.unk_id, "unk"));
  SPLASH_TRY_STATUS(check_id(spec, spec.pad_id, "pad"));
  for (int32_t id : spec.eog_ids) SPLASH_TRY_STATUS(check_id(spec, id, "end-of-generation"));

  t->kind = spec.kind;
  t->source = spec.source;
  t->tokens = std::move(spec.tokens);
  t->scores = spec.scores.empty() ? std::vector<float>(n, 0.0f) : std::move(spec.scores);
  t->types = spec.types.empty() ? std::vector<TokenType>(n, TokenType::kNormal) : std::move(spec.types);
  for (const AddedToken& a : spec.added) {
    if (a.id < 0 || static_cast<size_t>(a.id) >= n)
      return make_error(spec.source, ": added token '", a.content, "' has id ", a.id, " outside the vocabulary (", n,
                        " tokens)");
    if (a.content.empty()) return make_error(spec.source, ": added token ", a.id, " has empty content");
    // Formats with their own token types (GGUF, llama2.c) keep them; tokenizer.json ones get derived.
    if (t->types[a.id] == TokenType::kNormal || t->types[a.id] == TokenType::kUnused)
      t->types[a.id] = a.special ? TokenType::kControl : TokenType::kUserDefined;
  }

  t->index.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (t->types[i] == TokenType::kUnused && t->tokens[i].empty()) continue;
    auto [it, inserted] = t->index.emplace(t->tokens[i], static_cast<int32_t>(i));
    // Some vocabularies list the same string twice (unused slots); the first id wins, as in llama.cpp.
    (void)it;
    (void)inserted;
  }

  // Byte tokens and decoded pieces.
  t->byte_ids.fill(-1);
  t->pieces.resize(n);
  t->special.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const std::string& s = t->tokens[i];
    TokenType ty = t->types[i];
    if (ty == TokenType::kControl || ty == TokenType::kUnknown) t->special[i] = 1;
    if (t->kind == TokenizerKind::kByteLevelBpe) {
      t->pieces[i] = (ty == TokenType::kNormal) ? detail::byte_level_unmap(s) : s;
    } else {
      int b = 0;
      if (ty == TokenType::kByte && parse_byte_token(s, b)) {
        t->pieces[i] = std::string(1, static_cast<char>(b));
        if (t->byte_ids[b] < 0) t->byte_ids[b] = static_cast<int32_t>(i);
      } else if (ty == TokenType::kNormal || ty == TokenType::kUserDefined) {
        t->pieces[i] = replace_all(s, kSpmSpace, " ");
      } else {
        t->pieces[i] = s;
      }
    }
  }
  for (const AddedToken& a : spec.added) {
    t->pieces[a.id] = a.content;
    t->special[a.id] = a.special ? 1 : 0;
  }
  if (t->kind == TokenizerKind::kByteLevelBpe) {
    for (int b = 0; b < 256; ++b) {
      std::string ch;
      detail::append_utf8(ch, detail::byte_to_codepoint(static_cast<uint8_t>(b)));
      auto it = t->index.find(ch);
      if (it != t->index.end()) t->byte_ids[b] = it->second;
    }
  }

  // Merges: both halves and their concatenation must be vocabulary entries.
  t->merges.reserve(spec.merges.size());
  for (size_t r = 0; r < spec.merges.size(); ++r) {
    const auto& [a, b] = spec.merges[r];
    auto ia = t->index.find(a), ib = t->index.find(b), im = t->index.find(a + b);
    if (ia == t->index.end() || ib == t->index.end() || im == t->index.end())
      return make_error(spec.source, ": merge ", r, " ('", a, "' '", b, "') names a token missing from the vocabulary");
    uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(ia->second)) << 32) |
                   static_cast<uint32_t>(ib->second);
    t->merges.emplace(key, detail::BpeMerge{static_cast<int32_t>(r), im->second});  // first (best) rank wins
  }

  // Added tokens: longest first so matching at one position prefers the longest.
  t->added = std::move(spec.added);
  std::stable_sort(t->added.begin(), t->added.end(),
                   [](const AddedToken& x, const AddedToken& y) { return x.content.size() > y.content.size(); });
  if (t->added.size() > 65535) return make_error(spec.source, ": too many added tokens (", t->added.size(), ")");
  for (size_t k = 0; k < t->added.size(); ++k)
    t->added_by_first_byte[static_cast<uint8_t>(t->added[k].content[0])].push_back(static_cast<uint16_t>(k));

  t->normalizers = std::move(spec.normalizers);
  for (const SplitRule& rule : spec.splits) {
    auto re = SplitRegex::compile(rule.pattern);
    if (!re.ok()) return make_error(spec.source, ": ", re.error_message());
    t->splits.push_back({rule.pattern, std::move(re).value(), rule.behavior, rule.invert});
  }
  t->byte_level_prefix_space = spec.byte_level_prefix_space;
  t->ignore_merges = spec.ignore_merges;
  t->add_space_prefix = spec.add_space_prefix;
  t->space_prefix_first_only = spec.space_prefix_first_only;
  t->space_prefix_unless_space = spec.space_prefix_unless_space;
  t->bos_id = spec.bos_id;
  t->eos_id = spec.eos_id;
  t->unk_id = spec.unk_id;
  t->pad_id = spec.pad_id;
  t->eog_ids = std::move(spec.eog_ids);
  if (t->eos_id >= 0 && std::find(t->eog_ids.begin(), t->eog_ids.end(), t->eos_id) == t->eog_ids.end())
    t->eog_ids.push_back(t->eos_id);
  t->add_bos = spec.add_bos && t->bos_id >= 0;
  t->add_eos = spec.add_eos && t->eos_id >= 0;
  t->chat_template = std::move(spec.chat_template);

  // Bounds for the streamed encode (see TokenizerImpl).
  for (size_t i = 0; i < n; ++i)
    t->max_token_bytes = std::max({t->max_token_bytes, t->tokens[i].size(), t->pieces[i].size()});
  t->max_token_bytes = std::max<size_t>(t->max_token_bytes, 4);  // <unk> may stand for one whole character
  t->every_byte_encodes =
      t->unk_id >= 0 || std::all_of(t->byte_ids.begin(), t->byte_ids.end(), [](int32_t id) { return id >= 0; });
  if (t->kind == TokenizerKind::kSentencePiece) {
    t->spm_cut_before_space = true;
    for (const auto& [text, id] : t->index) {
      for (size_t p = text.find(kSpmSpace, 1); p != std::string::npos; p = text.find(kSpmSpace, p + 1)) {
        if (p < kSpmSpace.size() || text.compare(p - kSpmSpace.size(), kSpmSpace.size(), kSpmSpace) != 0) {
          t->spm_cut_before_space = false;
          break;
        }
      }
      if (!t->spm_cut_before_space) break;
    }
  }
  return Tokenizer(std::move(t));
}

// --- encode (the pipeline is in encode.cpp)

namespace {
constexpr size_t kSpmChunkBytes = 64 << 10;  // long enough that chunking costs nothing measurable
}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<int32_t> out;
  detail::encode_text(*impl_, text, add_special, parse_special, SIZE_MAX, kSpmChunkBytes, out);
  return out;
}

std::optional<std::vector<int32_t>> Tokenizer::encode_bounded(std::string_view text, bool add_special,
                                                              bool parse_special, size_t max_tokens) const {
  return encode_bounded(text, add_special, parse_special, max_tokens, kSpmChunkBytes);
}

std::optional<std::vector<int32_t>> Tokenizer::encode_bounded(std::string_view text, bool add_special,
                                                              bool parse_special, size_t max_tokens,
                                                              size_t spm_chunk_bytes) const {
  std::vector<int32_t> out;
  if (!detail::encode_text(*impl_, text, add_special, parse_special, max_tokens, std::max<size_t>(spm_chunk_bytes, 1),
                           out))
    return std::nullopt;
  return out;
}

bool Tokenizer::encodes_in_chunks() const { return impl_->spm_cut_before_space; }

// --- decode

void Tokenizer::append_piece(int32_t id, bool skip_special, bool& at_start, std::string& out) const {
  const TokenizerImpl& t = *impl_;
  if (id < 0 || id >= t.n_vocab()) return;
  if (skip_special && t.special[id]) return;
  std::string_view p = t.pieces[id];
  // Only the first token written can carry the encoder's prefix space (HF's Strip decoder, llama.cpp's
  // remove_space); a shown special token (<s>) ends the start too, as in HF.
  if (at_start && t.kind == TokenizerKind::kSentencePiece && t.add_space_prefix && !t.special[id] &&
      !p.empty() && p[0] == ' ')
    p.remove_prefix(1);
  at_start = false;
  out.append(p);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  bool at_start = true;
  for (int32_t id : ids) append_piece(id, skip_special, at_start, out);
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id) const {
  if (id < 0 || id >= impl_->n_vocab()) return {};
  return impl_->pieces[id];
}

const std::string& Tokenizer::token_text(int32_t id) const {
  static const std::string kEmpty;
  if (id < 0 || id >= impl_->n_vocab()) return kEmpty;
  return impl_->tokens[id];
}

std::optional<int32_t> Tokenizer::token_id(std::string_view vocab_text) const {
  auto it = impl_->index.find(vocab_text);
  if (it == impl_->index.end()) return std::nullopt;
  return it->second;
}

int32_t Tokenizer::n_vocab() const { return impl_->n_vocab(); }
TokenizerKind Tokenizer::kind() const { return impl_->kind; }
TokenType Tokenizer::token_type(int32_t id) const {
  return (id < 0 || id >= impl_->n_vocab()) ? TokenType::kUnused : impl_->types[id];
}
bool Tokenizer::is_special(int32_t id) const { return id >= 0 && id < impl_->n_vocab() && impl_->special[id]; }
bool Tokenizer::is_eog(int32_t id) const {
  return std::find(impl_->eog_ids.begin(), impl_->eog_ids.end(), id) != impl_->eog_ids.end();
}
int32_t Tokenizer::bos_id() const { return impl_->bos_id; }
int32_t Tokenizer::eos_id() const { return impl_->eos_id; }
int32_t Tokenizer::unk_id() const { return impl_->unk_id; }
int32_t Tokenizer::pad_id() const { return impl_->pad_id; }
const std::vector<int32_t>& Tokenizer::eog_ids() const { return impl_->eog_ids; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::add_eos() const { return impl_->add_eos; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }

}  // namespace splash
