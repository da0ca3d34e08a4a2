// SentencePiece-style encoding as llama.cpp's SPM tokenizer does it: start from UTF-8 characters,
// repeatedly merge the adjacent pair whose concatenation is the highest-scoring vocabulary entry
// (leftmost on ties), then emit each final piece, falling back to <0xXX> byte tokens for characters
// the vocabulary lacks.
#include <queue>

#include "tokenizer/tokenizer_impl.h"

namespace splash::detail {

namespace {

struct Piece {
  size_t begin;
  size_t len;  // 0 once merged into its left neighbour
  int32_t prev;
  int32_t next;
};

struct Bigram {
  float score;
  int32_t left;
  int32_t right;
  size_t len;
  bool operator<(const Bigram& o) const {  // max-heap: higher score first, then leftmost
    return score != o.score ? score < o.score : left > o.left;
  }
};

size_t utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c >> 5) == 0x6) return 2;
  if ((c >> 4) == 0xE) return 3;
  if ((c >> 3) == 0x1E) return 4;
  return 1;
}

struct Session {
  const TokenizerImpl& t;
  std::string_view text;
  std::vector<Piece> pieces;
  std::priority_queue<Bigram> heap;

  void try_add(int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    std::string_view s = text.substr(pieces[left].begin, pieces[left].len + pieces[right].len);
    auto it = t.index.find(s);
    if (it == t.index.end()) return;
    int32_t id = it->second;
    heap.push({t.scores[id], left, right, s.size()});
  }

  // Every merge result is a vocabulary entry, so a final piece is either in the vocabulary or a single
  // character that is not, which falls back to its <0xXX> byte tokens (or <unk>).
  void emit(int32_t p, std::vector<int32_t>& out) const {
    std::string_view cur = text.substr(pieces[p].begin, pieces[p].len);
    auto it = t.index.find(cur);
    if (it != t.index.end()) {
      out.push_back(it->second);
      return;
    }
    for (char c : cur) {
      int32_t id = t.byte_ids[static_cast<uint8_t>(c)];
      if (id < 0) id = t.unk_id;
      if (id >= 0) out.push_back(id);
    }
  }
};

}  // namespace

void spm_encode(const TokenizerImpl& t, std::string_view text, std::vector<int32_t>& out) {
  if (text.empty()) return;
  Session s{t, text, {}, {}};
  s.pieces.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t n = std::min(utf8_len(static_cast<unsigned char>(text[i])), text.size() - i);
    int32_t k = static_cast<int32_t>(s.pieces.size());
    s.pieces.push_back({i, n, k - 1, k + 1});
    i += n;
  }
  s.pieces.back().next = -1;
  for (int32_t i = 1; i < static_cast<int32_t>(s.pieces.size()); ++i) s.try_add(i - 1, i);

  while (!s.heap.empty()) {
    Bigram b = s.heap.top();
    s.heap.pop();
    Piece& l = s.pieces[b.left];
    Piece& r = s.pieces[b.right];
    // Stale if either side was merged away or grew since the pair was queued.
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) s.pieces[r.next].prev = b.left;
    s.try_add(l.prev, b.left);
    s.try_add(b.left, l.next);
  }
  for (int32_t i = 0; i >= 0; i = s.pieces[i].next) s.emit(i, out);
}

}  // namespace splash::detail
