#include "constrain/regex.h"

#include <cstdio>
#include <string>

#include "core/utf8.h"

namespace splash::constrain {

namespace {

using ExprId = GrammarBuilder::ExprId;

std::string utf8_string(uint32_t cp) {
  std::string s;
  append_utf8(s, cp);
  return s;
}

}  // namespace

// Every well-formed multi-byte UTF-8 sequence (no surrogates, nothing past U+10FFFF).
ExprId utf8_multibyte(GrammarBuilder& b) {
  auto r = [&](uint8_t lo, uint8_t hi) { return b.bytes(ByteSet::range(lo, hi)); };
  auto cont = [&] { return r(0x80, 0xBF); };
  ByteSet e1 = ByteSet::range(0xE1, 0xEC);
  e1.add_range(0xEE, 0xEF);
  return b.alt({
      b.seq({r(0xC2, 0xDF), cont()}),
      b.seq({r(0xE0, 0xE0), r(0xA0, 0xBF), cont()}),
      b.seq({b.bytes(e1), cont(), cont()}),
      b.seq({r(0xED, 0xED), r(0x80, 0x9F), cont()}),
      b.seq({r(0xF0, 0xF0), r(0x90, 0xBF), cont(), cont()}),
      b.seq({r(0xF1, 0xF3), cont(), cont(), cont()}),
      b.seq({r(0xF4, 0xF4), r(0x80, 0x8F), cont(), cont()}),
  });
}

namespace {

// How an ASCII character is written inside a JSON string.
std::string json_escaped(uint8_t c) {
  switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\t': return "\\t";
    case '\r': return "\\r";
    case '\b': return "\\b";
    case '\f': return "\\f";
    default: break;
  }
  if (c < 0x20 || c == 0x7F) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04x", c);
    return buf;
  }
  return std::string(1, static_cast<char>(c));
}

bool json_plain(uint8_t c) { return c >= 0x20 && c != '"' && c != '\\' && c < 0x80; }

// An ASCII set as an expression of the target.
ExprId ascii_set(const ByteSet& set, RegexTarget target, GrammarBuilder& b) {
  if (target == RegexTarget::kRaw) return b.bytes(set);
  ByteSet plain;
  std::vector<ExprId> options;
  for (int c = 0; c < 128; ++c) {
    if (!set.has(static_cast<uint8_t>(c))) continue;
    if (json_plain(static_cast<uint8_t>(c))) {
      plain.add(static_cast<uint8_t>(c));
    } else {
      options.push_back(b.literal(json_escaped(static_cast<uint8_t>(c))));
    }
  }
  if (!plain.empty()) options.push_back(b.bytes(plain));
  return b.alt(std::move(options));
}

ExprId literal_of(std::string_view text, RegexTarget target, GrammarBuilder& b) {
  if (target == RegexTarget::kRaw) return b.literal(text);
  std::string out;
  for (char c : text) {
    const auto u = static_cast<uint8_t>(c);
    out += u >= 0x80 ? std::string(1, c) : json_escaped(u);
  }
  return b.literal(out);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Reads `n` hex digits at pattern[pos]; -1 if they are not there.
int64_t read_hex(std::string_view p, size_t& pos, int n) {
  int64_t v = 0;
  for (int i = 0; i < n; ++i) {
    if (pos >= p.size() || hex_value(p[pos]) < 0) return -1;
    v = v * 16 + hex_value(p[pos++]);
  }
  return v;
}

// The class escapes \d \w \s and their negations; false if `c` is not one.
bool class_escape(char c, ByteSet& set, bool& negated) {
  ByteSet s;
  switch (c | 0x20) {
    case 'd': s.add_range('0', '9'); break;
    case 'w': s.add_range('a', 'z'); s.add_range('A', 'Z'); s.add_range('0', '9'); s.add('_'); break;
    case 's': for (char w : std::string_view(" \t\n\r\f\v")) s.add(static_cast<uint8_t>(w)); break;
    default: return false;
  }
  set = s;
  negated = (c >= 'A' && c <= 'Z');
  return true;
}

// A single-character escape after '\' (not a class escape); the code point, or -1 with `error` set.
int64_t char_escape(std::string_view p, size_t& pos, std::string& error) {
  const char c = p[pos++];
  switch (c) {
    case 'n': return '\n';
    case 't': return '\t';
    case 'r': return '\r';
    case 'f': return '\f';
    case 'v': return '\v';
    case '0': return 0;
    case 'x': {
      const int64_t v = read_hex(p, pos, 2);
      if (v < 0) error = "\\x needs two hex digits";
      return v;
    }
    case 'u': {
      const int64_t v = read_hex(p, pos, 4);
      if (v < 0) error = "\\u needs four hex digits";
      return v;
    }
    case 'b': case 'B': error = "word boundaries (\\b, \\B) are not supported"; return -1;
    case 'p': case 'P': error = "Unicode property escapes (\\p, \\P) are not supported"; return -1;
    case 'k': error = "named backreferences are not supported"; return -1;
    default: break;
  }
  if (c >= '1' && c <= '9') {
    error = "backreferences are not supported";
    return -1;
  }
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
    error = std::string("unknown escape \\") + c;
    return -1;
  }
  return static_cast<uint8_t>(c);
}

class Parser {
 public:
  Parser(std::string_view p, RegexTarget target, GrammarBuilder& b) : p_(p), target_(target), b_(b) {}

  Result<RegexExpr> run() {
    RegexExpr out;
    if (!p_.empty() && p_[0] == '^') {
      out.anchored_start = true;
      ++pos_;
    }
    size_t end = p_.size();
    if (end > pos_ && p_[end - 1] == '$' && !(end >= 2 && p_[end - 2] == '\\')) {
      out.anchored_end = true;
      --end;
    }
    p_ = p_.substr(0, end);
    auto e = alternation();
    if (!e) return e.error();
    if (pos_ < p_.size()) return fail(p_[pos_] == ')' ? "unbalanced ')'" : "unexpected character");
    out.expr = *e;
    return out;
  }

 private:
  Error fail(std::string_view what) const { return make_error("regex: ", what, " at offset ", pos_); }

  Result<ExprId> alternation() {
    std::vector<ExprId> options;
    for (;;) {
      auto c = concat();
      if (!c) return c.error();
      options.push_back(*c);
      if (pos_ < p_.size() && p_[pos_] == '|') {
        ++pos_;
        continue;
      }
      return b_.alt(std::move(options));
    }
  }

  Result<ExprId> concat() {
    std::vector<ExprId> parts;
    while (pos_ < p_.size() && p_[pos_] != '|' && p_[pos_] != ')') {
      auto a = atom();
      if (!a) return a.error();
      auto q = quantified(*a);
      if (!q) return q.error();
      parts.push_back(*q);
    }
    return b_.seq(std::move(parts));
  }

  Result<ExprId> quantified(ExprId item) {
    while (pos_ < p_.size()) {
      int32_t min = 0, max = -1;
      const char c = p_[pos_];
      if (c == '*') {
        ++pos_;
      } else if (c == '+') {
        min = 1;
        ++pos_;
      } else if (c == '?') {
        max = 1;
        ++pos_;
      } else if (c == '{') {
        size_t q = pos_ + 1;
        auto number = [&](int32_t& v) {
          const size_t s = q;
          int64_t n = 0;
          while (q < p_.size() && p_[q] >= '0' && p_[q] <= '9' && n < 1000000) n = n * 10 + (p_[q++] - '0');
          v = static_cast<int32_t>(n);
          return q > s;
        };
        if (!number(min)) return fail("'{' must start a repetition {n}, {n,} or {n,m}");
        max = min;
        if (q < p_.size() && p_[q] == ',') {
          ++q;
          max = -1;
          if (q < p_.size() && p_[q] != '}' && !number(max)) return fail("bad repetition bound");
        }
        if (q >= p_.size() || p_[q] != '}') return fail("unterminated repetition {");
        if (max >= 0 && max < min) return fail("repetition {n,m} with m < n");
        pos_ = q + 1;
      } else {
        return item;
      }
      // A lazy quantifier matches the same language; a possessive one does not.
      if (pos_ < p_.size() && p_[pos_] == '?') ++pos_;
      else if (pos_ < p_.size() && p_[pos_] == '+') return fail("possessive quantifiers are not supported");
      item = b_.counted(item, min, max);
    }
    return item;
  }

  Result<ExprId> atom() {
    const char c = p_[pos_];
    if (c == '(') {
      ++pos_;
      if (p_.substr(pos_, 2) == "?:") {
        pos_ += 2;
      } else if (pos_ < p_.size() && p_[pos_] == '?') {
        return fail("lookaround and named groups are not supported");
      }
      auto inner = alternation();
      if (!inner) return inner;
      if (pos_ >= p_.size() || p_[pos_] != ')') return fail("missing ')'");
      ++pos_;
      return inner;
    }
    if (c == '[') {
      ByteSet set;
      bool negated = false;
      auto r = parse_class(p_, pos_, set, negated);
      if (!r) return r.error();
      return class_expr(set, negated);
    }
    if (c == '.') {
      ++pos_;
      return any_char(target_, b_, false);
    }
    if (c == '^' || c == '$') return fail("anchors are only supported at the start and end of the pattern");
    if (c == '*' || c == '+' || c == '?' || c == '{') return fail("quantifier without anything to repeat");
    if (c == '\\') {
      ++pos_;
      if (pos_ >= p_.size()) return fail("pattern ends with '\\'");
      ByteSet set;
      bool negated = false;
      if (class_escape(p_[pos_], set, negated)) {
        ++pos_;
        return class_expr(set, negated);
      }
      std::string error;
      const int64_t cp = char_escape(p_, pos_, error);
      if (cp < 0) return fail(error);
      return literal_of(utf8_string(static_cast<uint32_t>(cp)), target_, b_);
    }
    // One UTF-8 character, as written.
    size_t len = 1;
    const auto u = static_cast<uint8_t>(c);
    if (u >= 0xF0) len = 4;
    else if (u >= 0xE0) len = 3;
    else if (u >= 0xC0) len = 2;
    if (pos_ + len > p_.size()) return fail("truncated UTF-8 character");
    const std::string_view ch = p_.substr(pos_, len);
    pos_ += len;
    return literal_of(ch, target_, b_);
  }

  ExprId class_expr(const ByteSet& set, bool negated) {
    if (!negated) return ascii_set(set, target_, b_);
    ByteSet rest = set.inverted();
    rest.remove(ByteSet::range(0x80, 0xFF));
    return b_.alt({ascii_set(rest, target_, b_), utf8_multibyte(b_)});
  }

  std::string_view p_;
  size_t pos_ = 0;
  RegexTarget target_;
  GrammarBuilder& b_;
};

}  // namespace

Result<void> parse_class(std::string_view p, size_t& pos, ByteSet& set, bool& negated) {
  const size_t start = pos;
  ++pos;  // '['
  negated = pos < p.size() && p[pos] == '^';
  if (negated) ++pos;
  bool first = true;
  auto member = [&](int64_t& cp, bool& is_set, ByteSet& cls) -> Result<void> {
    is_set = false;
    if (p[pos] == '\\') {
      ++pos;
      if (pos >= p.size()) return make_error("character class at offset ", start, " is not closed");
      bool neg = false;
      if (class_escape(p[pos], cls, neg)) {
        ++pos;
        if (neg) {
          ByteSet inv = cls.inverted();
          inv.remove(ByteSet::range(0x80, 0xFF));
          cls = inv;
        }
        is_set = true;
        return {};
      }
      std::string error;
      cp = char_escape(p, pos, error);
      if (cp < 0) return make_error("character class at offset ", start, ": ", error);
      return {};
    }
    cp = static_cast<uint8_t>(p[pos++]);
    return {};
  };
  while (pos < p.size() && (p[pos] != ']' || first)) {
    first = false;
    int64_t lo = 0;
    bool is_set = false;
    ByteSet cls;
    if (auto r = member(lo, is_set, cls); !r) return r;
    if (is_set) {
      set.add(cls);
      continue;
    }
    int64_t hi = lo;
    if (pos + 1 < p.size() && p[pos] == '-' && p[pos + 1] != ']') {
      ++pos;
      if (auto r = member(hi, is_set, cls); !r) return r;
      if (is_set) return make_error("character class at offset ", start, ": a range cannot end in a class escape");
      if (hi < lo) return make_error("character class at offset ", start, ": range out of order");
    }
    if (hi >= 0x80) {
      return make_error("character class at offset ", start, ": non-ASCII members are not supported");
    }
    set.add_range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi));
  }
  if (pos >= p.size()) return make_error("character class at offset ", start, " is not closed");
  ++pos;  // ']'
  return {};
}

ExprId any_char(RegexTarget target, GrammarBuilder& b, bool allow_newline) {
  ByteSet ascii = ByteSet::range(0, 0x7F);
  if (!allow_newline) {
    ascii.remove(ByteSet::of('\n'));
    ascii.remove(ByteSet::of('\r'));
  }
  if (target == RegexTarget::kJsonString) {
    // Any character: plain, one of the short escapes, or \uXXXX.
    ByteSet plain = ByteSet::range(0x20, 0x7F);
    plain.remove(ByteSet::of('"'));
    plain.remove(ByteSet::of('\\'));
    ByteSet hex = ByteSet::range('0', '9');
    hex.add_range('a', 'f');
    hex.add_range('A', 'F');
    ByteSet short_escapes;
    for (char c : std::string_view("\"\\/bfrt")) short_escapes.add(static_cast<uint8_t>(c));
    if (allow_newline) short_escapes.add('n');
    return b.alt({b.bytes(plain),
                  b.seq({b.literal("\\"), b.bytes(short_escapes)}),
                  b.seq({b.literal("\\u"), b.repeat(b.bytes(hex), 4, 4)}),
                  utf8_multibyte(b)});
  }
  return b.alt({b.bytes(ascii), utf8_multibyte(b)});
}

Result<RegexExpr> compile_regex(std::string_view pattern, RegexTarget target, GrammarBuilder& b) {
  return Parser(pattern, target, b).run();
}

}  // namespace splash::constrain
