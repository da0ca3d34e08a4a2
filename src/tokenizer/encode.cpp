// The encode pipeline: added tokens -> normalize -> pre-tokenize -> BPE / SPM, streamed and bounded.
//
// Nothing is split all at once: added tokens are found as the scan reaches them, the split rules
// run match by match (SplitRegex::Matcher) and hand each word on as soon as it is final, and
// SentencePiece text is merged in chunks cut where no vocabulary entry can span. So a long text
// costs at most one normalized copy (none for ASCII) plus what the ids need, and a bounded encode
// stops as soon as the ids pass max_tokens. The streamed split gives the same words as splitting
// everything first: the regex runs over the same whole subject, from the same positions.
#include <algorithm>
#include <cstdlib>
#include <deque>
#include <unordered_map>

#include <utf8proc.h>

#include "tokenizer/tokenizer_impl.h"

namespace splash::detail {

namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_word_byte(char c) {
  auto u = static_cast<unsigned char>(c);
  return u >= 0x80 || u == '_' || (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z');
}

// Collects ids up to a bound.
struct Sink {
  std::vector<int32_t>& out;
  size_t max_tokens;
  bool push(int32_t id) {
    out.push_back(id);
    return out.size() <= max_tokens;
  }
  // True when `bytes` more bytes of text must give more ids than the bound leaves room for: each id
  // stands for at most max_token_bytes bytes.
  bool cannot_fit(const TokenizerImpl& t, size_t bytes) const {
    return t.every_byte_encodes && out.size() <= max_tokens && bytes / t.max_token_bytes > max_tokens - out.size();
  }
};

// Calls on_raw(text, index) for each run of raw text and on_added(id, index) for each added token,
// in order (index counts fragments); leftmost match first, longest at a position (the list is sorted
// so). Stops when a callback returns false and returns false then.
template <class OnRaw, class OnAdded>
bool for_each_fragment(const TokenizerImpl& t, std::string_view text, bool parse_special, OnRaw&& on_raw,
                       OnAdded&& on_added) {
  size_t start = 0;  // beginning of the pending raw text
  size_t i = 0;
  size_t k = 0;
  while (i < text.size()) {
    const auto& cands = t.added_by_first_byte[static_cast<uint8_t>(text[i])];
    const AddedToken* hit = nullptr;
    for (uint16_t c : cands) {
      const AddedToken& a = t.added[c];
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
    if (b > start && !on_raw(text.substr(start, b - start), k++)) return false;
    if (!on_added(hit->id, k++)) return false;
    start = i = e;
  }
  if (start < text.size()) return on_raw(text.substr(start), k);
  return true;
}

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

// The text as the model sees it: `raw` itself when normalizing changes nothing (no normalizer, or
// ASCII, which all four forms keep) and no prefix space is asked for; otherwise a normalized copy,
// with ' ' in front when `prefix_space`, appended to `keep` (a deque, so earlier views stay valid).
// An ASCII prompt is never copied.
std::string_view normalized(const TokenizerImpl& t, std::string_view raw, bool prefix_space,
                            std::deque<std::string>& keep) {
  const bool unchanged = t.normalizers.empty() || is_ascii(raw);
  if (unchanged && !prefix_space) return raw;
  std::string s;
  s.reserve(raw.size() + 1);
  if (prefix_space) s += ' ';
  if (unchanged) {
    s += raw;
    return keep.emplace_back(std::move(s));
  }
  std::string n(raw);
  for (Normalizer nf : t.normalizers) {
    int opts = UTF8PROC_STABLE;
    switch (nf) {
      case Normalizer::kNfc: opts |= UTF8PROC_COMPOSE; break;
      case Normalizer::kNfd: opts |= UTF8PROC_DECOMPOSE; break;
      case Normalizer::kNfkc: opts |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
      case Normalizer::kNfkd: opts |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    utf8proc_uint8_t* dst = nullptr;
    utf8proc_ssize_t len = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(n.data()),
                                        static_cast<utf8proc_ssize_t>(n.size()), &dst,
                                        static_cast<utf8proc_option_t>(opts));
    // Invalid UTF-8 cannot be normalized; it is tokenized as it is (through the byte tokens).
    if (len >= 0 && dst != nullptr) n.assign(reinterpret_cast<const char*>(dst), static_cast<size_t>(len));
    std::free(dst);
  }
  if (!prefix_space) return keep.emplace_back(std::move(n));
  s += n;
  return keep.emplace_back(std::move(s));
}

// --- pre-tokenize

// Applies split rules [r, end) to `w` and passes each final word to `emit` (false: stop). Each rule
// works on every piece the previous one produced, its matches taken one at a time; a piece is handed
// on once no later span can merge into it.
template <class Emit>
bool split_words(const TokenizerImpl& t, size_t r, std::string_view w, Emit& emit) {
  if (r == t.splits.size()) return emit(w);
  const CompiledSplit& rule = t.splits[r];
  std::string_view held;  // the last piece, which a following span may still extend
  bool have_held = false, pending = false;
  auto extend = [](std::string_view& p, std::string_view s) {
    p = std::string_view(p.data(), p.size() + s.size());  // spans are contiguous in w
  };
  auto hold = [&](std::string_view s) {
    if (have_held && !split_words(t, r + 1, held, emit)) return false;
    held = s;
    have_held = true;
    return true;
  };
  // One gap or match span; `is_match` is already flipped by invert.
  auto on_span = [&](std::string_view s, bool is_match) {
    switch (rule.behavior) {
      case SplitBehavior::kIsolated:
        return split_words(t, r + 1, s, emit);
      case SplitBehavior::kRemoved:
        return is_match || split_words(t, r + 1, s, emit);
      case SplitBehavior::kMergedWithPrevious:
        if (is_match && have_held) {
          extend(held, s);
          return true;
        }
        return hold(s);
      case SplitBehavior::kMergedWithNext: {
        const bool merge = pending;
        pending = is_match;
        if (merge) {
          extend(held, s);
          return true;
        }
        return hold(s);
      }
    }
    return true;
  };
  SplitRegex::Matcher m(rule.regex, w);
  size_t pos = 0, b = 0, e = 0;
  while (m.next(b, e)) {
    if (b > pos && !on_span(w.substr(pos, b - pos), rule.invert)) return false;
    if (!on_span(w.substr(b, e - b), !rule.invert)) return false;
    pos = e;
  }
  if (pos < w.size() && !on_span(w.substr(pos), rule.invert)) return false;
  return !have_held || split_words(t, r + 1, held, emit);
}

// --- byte-level BPE

struct BpeState {
  // Per-call cache of word -> ids: prompts repeat words a lot, and a call-local cache needs no lock.
  // Its keys point into the caller's text or into `keep`.
  std::unordered_map<std::string_view, std::vector<int32_t>> cache;
  std::deque<std::string> keep;  // normalized copies
};

bool encode_bpe_text(const TokenizerImpl& t, std::string_view raw, Sink& sink, BpeState& st) {
  std::string_view text = normalized(t, raw, false, st.keep);
  // The prefix space goes before a normalized text that does not start with one.
  if (t.byte_level_prefix_space && (text.empty() || text[0] != ' ')) text = normalized(t, text, true, st.keep);
  auto emit = [&](std::string_view w) {
    if (w.empty()) return true;
    auto it = st.cache.find(w);
    if (it == st.cache.end()) {
      if (sink.cannot_fit(t, w.size())) return false;  // one long word (a blob) refused unmerged
      std::vector<int32_t> ids;
      bpe_encode_word(t, w, ids);
      it = st.cache.emplace(w, std::move(ids)).first;
    }
    for (int32_t id : it->second)
      if (!sink.push(id)) return false;
    return true;
  };
  return split_words(t, 0, text, emit);
}

// --- SentencePiece

// Where a chunk may end: before a space whose previous byte is another character (not a space, not
// U+2581), with three ASCII bytes before it so no UTF-8 lead byte there reaches across. With
// spm_cut_before_space no vocabulary entry spans such a point, so merging each chunk on its own
// gives the ids of merging the whole (pairs never cross it, and the order of merges on each side
// does not depend on the other).
size_t spm_chunk_end(std::string_view s, size_t from, size_t min_bytes) {
  if (min_bytes >= s.size() - from) return s.size();
  for (size_t i = std::max<size_t>(from + min_bytes, 3); i < s.size(); ++i) {
    if (s[i] != ' ' || s[i - 1] == ' ') continue;
    if ((static_cast<unsigned char>(s[i - 1]) | static_cast<unsigned char>(s[i - 2]) |
         static_cast<unsigned char>(s[i - 3])) < 0x80)
      return i;
  }
  return s.size();
}

bool encode_spm_text(const TokenizerImpl& t, std::string_view raw, bool prefix_allowed, size_t chunk_bytes,
                     Sink& sink) {
  std::deque<std::string> keep;
  const std::string_view s = normalized(t, raw, false, keep);
  bool prefix = t.add_space_prefix && prefix_allowed;
  if (prefix && t.space_prefix_unless_space && (s.starts_with(' ') || s.starts_with(kSpmSpace))) prefix = false;
  if (!t.spm_cut_before_space) chunk_bytes = s.size();
  // The prefix space is written in front of the first chunk; cut points (at index 3 or later) are
  // the same with it as without.
  std::string chunk;
  std::vector<int32_t> ids;
  bool first = true;
  for (size_t from = 0; first || from < s.size(); first = false) {
    const size_t to = spm_chunk_end(s, from, chunk_bytes);
    const bool lead = first && prefix;
    const size_t spaces = static_cast<size_t>(std::count(s.begin() + static_cast<ptrdiff_t>(from),
                                                         s.begin() + static_cast<ptrdiff_t>(to), ' '));
    const size_t bytes = to - from + (spaces + (lead ? 1 : 0)) * kSpmSpace.size() - spaces;
    if (sink.cannot_fit(t, bytes)) return false;  // before copying it
    chunk.clear();
    if (lead) chunk += kSpmSpace;
    for (size_t i = from; i < to; ++i) {
      if (s[i] == ' ') chunk += kSpmSpace;
      else chunk += s[i];
    }
    ids.clear();
    spm_encode(t, chunk, ids);
    for (int32_t id : ids)
      if (!sink.push(id)) return false;
    from = to;
  }
  return true;
}

}  // namespace

bool encode_text(const TokenizerImpl& t, std::string_view text, bool add_special, bool parse_special,
                 size_t max_tokens, size_t spm_chunk_bytes, std::vector<int32_t>& out) {
  out.clear();
  out.reserve(std::min(text.size() / 3, max_tokens) + 2);
  Sink sink{out, max_tokens};
  if (add_special && t.add_bos && !sink.push(t.bos_id)) return false;
  auto on_added = [&](int32_t id, size_t) { return sink.push(id); };
  bool ok;
  if (t.kind == TokenizerKind::kByteLevelBpe) {
    BpeState st;
    ok = for_each_fragment(
        t, text, parse_special, [&](std::string_view raw, size_t) { return encode_bpe_text(t, raw, sink, st); },
        on_added);
  } else {
    // llama.cpp's rule: a space is prepended to text at the start of the input and after a special token.
    // A tokenizer.json Metaspace narrows it (see TokenizerSpec::space_prefix_first_only).
    bool prev_special = true;
    ok = for_each_fragment(
        t, text, parse_special,
        [&](std::string_view raw, size_t k) {
          const bool allowed = prev_special && !(t.space_prefix_first_only && k > 0);
          prev_special = false;
          return encode_spm_text(t, raw, allowed, spm_chunk_bytes, sink);
        },
        [&](int32_t id, size_t) {
          prev_special = true;
          return sink.push(id);
        });
  }
  if (!ok) return false;
  if (add_special && t.add_eos && !sink.push(t.eos_id)) return false;
  return true;
}

}  // namespace splash::detail
