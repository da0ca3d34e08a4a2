// Tokenizer: building from a TokenizerSpec, the encode pipeline (added tokens -> normalize ->
// pre-tokenize -> BPE / SPM) and decoding.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <unordered_map>

#include <utf8proc.h>

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
  return Tokenizer(std::move(t));
}

// --- encode

namespace {

struct Fragment {
  std::string_view text;  // raw text when id < 0
  int32_t id = -1;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_word_byte(char c) {
  auto u = static_cast<unsigned char>(c);
  return u >= 0x80 || u == '_' || (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z');
}

// Splits `text` at added tokens: leftmost match first, longest at a position (the list is sorted so).
std::vector<Fragment> split_added(const TokenizerImpl& t, std::string_view text, bool parse_special) {
  std::vector<Fragment> out;
  size_t start = 0;  // beginning of the pending raw text
  size_t i = 0;
  while (i < text.size()) {
    const auto& cands = t.added_by_first_byte[static_cast<uint8_t>(text[i])];
    const AddedToken* hit = nullptr;
    for (uint16_t k : cands) {
      const AddedToken& a = t.added[k];
      if (a.special && !parse_special) continue;
      if (text.compare(i, a.content.size(), a.content) != 0) continue;
      if (a.single_word) {
        size_t e = i + a.content.size();
        if ((i > 0 && is_word_byte(text[i - 1])) || (e < text.size() && is_word_byte(text[e]))) continue;
      }
      hit = &a;
      break;
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    size_t b = i, e = i + hit->content.size();
    if (hit->lstrip)
      while (b > start && is_space(text[b - 1])) --b;
    if (hit->rstrip)
      while (e < text.size() && is_space(text[e])) ++e;
    if (b > start) out.push_back({text.substr(start, b - start), -1});
    out.push_back({{}, hit->id});
    start = i = e;
  }
  if (start < text.size()) out.push_back({text.substr(start), -1});
  return out;
}

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

std::string normalize(const TokenizerImpl& t, std::string_view text) {
  std::string s(text);
  // ASCII is invariant under all four normal forms; most of a code prompt is ASCII.
  if (t.normalizers.empty() || is_ascii(s)) return s;
  for (Normalizer nf : t.normalizers) {
    int opts = UTF8PROC_STABLE;
    switch (nf) {
      case Normalizer::kNfc: opts |= UTF8PROC_COMPOSE; break;
      case Normalizer::kNfd: opts |= UTF8PROC_DECOMPOSE; break;
      case Normalizer::kNfkc: opts |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
      case Normalizer::kNfkd: opts |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    utf8proc_uint8_t* dst = nullptr;
    utf8proc_ssize_t len = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                        static_cast<utf8proc_ssize_t>(s.size()), &dst,
                                        static_cast<utf8proc_option_t>(opts));
    // Invalid UTF-8 cannot be normalized; it is tokenized as it is (through the byte tokens).
    if (len >= 0 && dst != nullptr) s.assign(reinterpret_cast<const char*>(dst), static_cast<size_t>(len));
    std::free(dst);
  }
  return s;
}

// Applies the split rules in order; each works on every piece the previous one produced.
void pre_tokenize(const TokenizerImpl& t, std::string_view text, std::vector<std::string_view>& words) {
  words.clear();
  words.push_back(text);
  std::vector<std::string_view> next;
  std::vector<std::pair<size_t, size_t>> m;
  for (const detail::CompiledSplit& rule : t.splits) {
    next.clear();
    for (std::string_view w : words) {
      m.clear();
      rule.regex.find_all(w, m);
      // Alternate gap / match spans; `is_match` is flipped by invert.
      std::vector<std::pair<std::string_view, bool>> spans;
      size_t pos = 0;
      for (auto [b, e] : m) {
        if (b > pos) spans.emplace_back(w.substr(pos, b - pos), rule.invert);
        spans.emplace_back(w.substr(b, e - b), !rule.invert);
        pos = e;
      }
      if (pos < w.size()) spans.emplace_back(w.substr(pos), rule.invert);
      switch (rule.behavior) {
        case SplitBehavior::kIsolated:
          for (auto& [s, is_match] : spans) next.push_back(s);
          break;
        case SplitBehavior::kRemoved:
          for (auto& [s, is_match] : spans)
            if (!is_match) next.push_back(s);
          break;
        case SplitBehavior::kMergedWithPrevious: {
          bool have_prev = false;
          for (auto& [s, is_match] : spans) {
            if (is_match && have_prev) {
              std::string_view& p = next.back();
              p = std::string_view(p.data(), p.size() + s.size());  // spans are contiguous in w
            } else {
              next.push_back(s);
              have_prev = true;
            }
          }
          break;
        }
        case SplitBehavior::kMergedWithNext: {
          bool pending = false;
          for (auto& [s, is_match] : spans) {
            if (pending) {
              std::string_view& p = next.back();
              p = std::string_view(p.data(), p.size() + s.size());
              pending = is_match;
            } else {
              next.push_back(s);
              pending = is_match;
            }
          }
          break;
        }
      }
    }
    words.swap(next);
  }
}

void encode_bpe_text(const TokenizerImpl& t, std::string_view raw, std::vector<int32_t>& out,
                     std::unordered_map<std::string_view, std::vector<int32_t>>& cache, std::deque<std::string>& keep) {
  std::string s = normalize(t, raw);
  if (t.byte_level_prefix_space && (s.empty() || s[0] != ' ')) s.insert(s.begin(), ' ');
  keep.push_back(std::move(s));  // the cache keys point into it
  std::string_view text = keep.back();
  std::vector<std::string_view> words;
  pre_tokenize(t, text, words);
  for (std::string_view w : words) {
    if (w.empty()) continue;
    auto it = cache.find(w);
    if (it == cache.end()) {
      std::vector<int32_t> ids;
      detail::bpe_encode_word(t, w, ids);
      it = cache.emplace(w, std::move(ids)).first;
    }
    out.insert(out.end(), it->second.begin(), it->second.end());
  }
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const TokenizerImpl& t = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && t.add_bos) out.push_back(t.bos_id);
  std::vector<Fragment> frags = split_added(t, text, parse_special);
  if (t.kind == TokenizerKind::kByteLevelBpe) {
    // Per-call cache of word -> ids: prompts repeat words a lot, and a call-local cache needs no lock.
    std::unordered_map<std::string_view, std::vector<int32_t>> cache;
    std::deque<std::string> keep;  // normalized fragments; a deque so the cache's views stay valid
    for (const Fragment& f : frags) {
      if (f.id >= 0) {
        out.push_back(f.id);
      } else {
        encode_bpe_text(t, f.text, out, cache, keep);
      }
    }
  } else {
    // llama.cpp's rule: a space is prepended to text at the start of the input and after a special token.
    // A tokenizer.json Metaspace narrows it (see TokenizerSpec::space_prefix_first_only).
    bool prev_special = true;
    for (size_t k = 0; k < frags.size(); ++k) {
      const Fragment& f = frags[k];
      if (f.id >= 0) {
        out.push_back(f.id);
        prev_special = true;
        continue;
      }
      std::string s = normalize(t, f.text);
      bool prefix = t.add_space_prefix && prev_special && !(t.space_prefix_first_only && k > 0);
      if (prefix && t.space_prefix_unless_space && (s.starts_with(' ') || s.starts_with(kSpmSpace))) prefix = false;
      if (prefix) s.insert(s.begin(), ' ');
      detail::spm_encode(t, replace_all(s, " ", kSpmSpace), out);
      prev_special = false;
    }
  }
  if (add_special && t.add_eos) out.push_back(t.eos_id);
  return out;
}

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
