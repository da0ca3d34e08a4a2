// Byte-level BPE: the byte <-> code point table and rank-ordered merging of one word.
#include <queue>

#include "tokenizer/tokenizer_impl.h"

namespace splash::detail {

namespace {

// GPT-2's table: printable Latin-1 bytes map to themselves, the other 68 bytes to 256, 257, ... in
// byte order, so every byte becomes a visible, non-space code point.
struct ByteTable {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 512> from_cp{};
  ByteTable() {
    from_cp.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      to_cp[b] = printable ? static_cast<uint32_t>(b) : next++;
      from_cp[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteTable& byte_table() {
  static const ByteTable table;  // immutable after construction
  return table;
}

// Decodes one UTF-8 code point at s[i]; returns its length, or 0 if the bytes are not valid UTF-8.
size_t decode_utf8(std::string_view s, size_t i, uint32_t& cp) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n;
  if (c < 0x80) {
    cp = c;
    return 1;
  } else if ((c >> 5) == 0x6) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c >> 4) == 0xE) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c >> 3) == 0x1E) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc >> 6) != 0x2) return 0;
    cp = (cp << 6) | (cc & 0x3F);
  }
  return n;
}

}  // namespace

uint32_t byte_to_codepoint(uint8_t b) { return byte_table().to_cp[b]; }

int byte_from_codepoint(uint32_t cp) { return cp < 512 ? byte_table().from_cp[cp] : -1; }

std::string byte_level_map(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(out, byte_to_codepoint(static_cast<uint8_t>(c)));
  return out;
}

std::string byte_level_unmap(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    uint32_t cp = 0;
    size_t n = decode_utf8(text, i, cp);
    if (n == 0) {  // not UTF-8: keep the byte as it is
      out.push_back(text[i]);
      ++i;
      continue;
    }
    int b = byte_from_codepoint(cp);
    if (b >= 0) {
      out.push_back(static_cast<char>(b));
    } else {
      out.append(text.substr(i, n));
    }
    i += n;
  }
  return out;
}

// --- merging

namespace {

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
};

struct Candidate {
  int32_t rank;
  int32_t left;
  int32_t left_id;
  int32_t right_id;
  // Lowest rank first; on a tie the leftmost pair, as the reference implementations do.
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
};

}  // namespace

void bpe_encode_word(const TokenizerImpl& t, std::string_view word, std::vector<int32_t>& out) {
  if (word.empty()) return;
  if (t.ignore_merges) {
    auto it = t.index.find(byte_level_map(word));
    if (it != t.index.end()) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  for (char c : word) {
    int32_t id = t.byte_ids[static_cast<uint8_t>(c)];
    if (id < 0) id = t.unk_id;
    if (id < 0) continue;  // a vocabulary without this byte and without <unk>: the byte is dropped
    int32_t k = static_cast<int32_t>(sym.size());
    sym.push_back({id, k - 1, k + 1});
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  // A heap of adjacent pairs keyed by merge rank: O(n log n) per word, so one long word (a run of
  // digits or a base64 blob) does not go quadratic.
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push_pair = [&](int32_t left) {
    if (left < 0) return;
    int32_t right = sym[left].next;
    if (right < 0) return;
    uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(sym[left].id)) << 32) |
                   static_cast<uint32_t>(sym[right].id);
    auto it = t.merges.find(key);
    if (it == t.merges.end()) return;
    heap.push({it->second.rank, left, sym[left].id, sym[right].id});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) push_pair(i);

  while (!heap.empty()) {
    Candidate c = heap.top();
    heap.pop();
    Symbol& l = sym[c.left];
    if (l.id != c.left_id || l.next < 0) continue;  // stale: left was merged or removed
    Symbol& r = sym[l.next];
    if (r.id != c.right_id) continue;
    uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(l.id)) << 32) | static_cast<uint32_t>(r.id);
    l.id = t.merges.at(key).merged;
    r.id = -1;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    push_pair(l.prev);
    push_pair(c.left);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

}  // namespace splash::detail
