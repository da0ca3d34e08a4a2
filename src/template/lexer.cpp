#include "template/lexer.h"

#include <cctype>
#include <cstdint>

#include "core/result.h"
#include "core/utf8.h"
#include "template/value.h"

namespace splash::jinja {

const char* tok_name(Tok t) {
  switch (t) {
    case Tok::kText: return "text";
    case Tok::kNumber: return "number";
    case Tok::kString: return "string";
    case Tok::kIdentifier: return "identifier";
    case Tok::kEquals: return "'='";
    case Tok::kOpenParen: return "'('";
    case Tok::kCloseParen: return "')'";
    case Tok::kOpenStatement: return "'{%'";
    case Tok::kCloseStatement: return "'%}'";
    case Tok::kOpenExpression: return "'{{'";
    case Tok::kCloseExpression: return "'}}'";
    case Tok::kOpenSquare: return "'['";
    case Tok::kCloseSquare: return "']'";
    case Tok::kOpenCurly: return "'{'";
    case Tok::kCloseCurly: return "'}'";
    case Tok::kComma: return "','";
    case Tok::kDot: return "'.'";
    case Tok::kColon: return "':'";
    case Tok::kPipe: return "'|'";
    case Tok::kAdditive: return "additive operator";
    case Tok::kMultiplicative: return "multiplicative operator";
    case Tok::kPower: return "'**'";
    case Tok::kComparison: return "comparison operator";
    case Tok::kUnary: return "unary operator";
    case Tok::kComment: return "comment";
  }
  return "?";
}

namespace {

// Template text with the original source line of every byte, so that errors found after the
// whitespace preprocessing still name the line the author wrote.
struct Src {
  std::string text;
  std::vector<int> line;

  void push(char c, int l) {
    text += c;
    line.push_back(l);
  }
  void append(const Src& from, size_t begin, size_t end) {
    text.append(from.text, begin, end - begin);
    line.insert(line.end(), from.line.begin() + static_cast<std::ptrdiff_t>(begin),
                from.line.begin() + static_cast<std::ptrdiff_t>(end));
  }
};

bool starts_with_at(const std::string& s, size_t i, std::string_view what) {
  return s.compare(i, what.size(), what) == 0 && i + what.size() <= s.size();
}

// JavaScript multiline `^`: after \n, \r, U+2028, U+2029.
bool is_line_start(const std::string& s, size_t i) {
  if (i == 0) return true;
  char p = s[i - 1];
  if (p == '\n' || p == '\r') return true;
  return i >= 3 && s.compare(i - 3, 2, "\xE2\x80") == 0 &&
         (s[i - 1] == '\xA8' || s[i - 1] == '\xA9');
}

// lstrip_blocks: /^[ \t]*({[#%-])/gm -> "$1"
Src lstrip_blocks(const Src& in) {
  Src out;
  const std::string& s = in.text;
  size_t i = 0;
  while (i < s.size()) {
    if (is_line_start(s, i)) {
      size_t q = i;
      while (q < s.size() && (s[q] == ' ' || s[q] == '\t')) ++q;
      if (q + 1 < s.size() && s[q] == '{' && (s[q + 1] == '#' || s[q + 1] == '%' || s[q + 1] == '-')) {
        i = q;  // drop the indentation before the tag
      }
    }
    out.push(s[i], in.line[i]);
    ++i;
  }
  return out;
}

// trim_blocks: /([#%-]})\n/g -> "$1"
Src trim_blocks(const Src& in) {
  Src out;
  const std::string& s = in.text;
  size_t i = 0;
  while (i < s.size()) {
    if (i + 2 < s.size() && (s[i] == '#' || s[i] == '%' || s[i] == '-') && s[i + 1] == '}' &&
        s[i + 2] == '\n') {
      out.push(s[i], in.line[i]);
      out.push(s[i + 1], in.line[i + 1]);
      i += 3;
      continue;
    }
    out.push(s[i], in.line[i]);
    ++i;
  }
  return out;
}

size_t skip_spaces(const std::string& s, size_t i) {
  while (size_t n = js_space_at(s, i)) i += n;
  return i;
}

// Removes `{% generation %}` / `{% endgeneration %}` markers (training-only tags) together with
// the whitespace around them unless the tag asks to keep it, as the reference's preprocess does.
Src strip_generation_tags(const Src& in) {
  Src out;
  const std::string& s = in.text;
  size_t last_end = 0;
  size_t q = s.find("{%");
  while (q != std::string::npos) {
    size_t i = q + 2;
    bool lstrip = i < s.size() && s[i] == '-';
    if (lstrip) ++i;
    i = skip_spaces(s, i);
    if (starts_with_at(s, i, "end")) i += 3;
    bool match = starts_with_at(s, i, "generation");
    bool rstrip = false;
    if (match) {
      i = skip_spaces(s, i + 10);
      rstrip = i < s.size() && s[i] == '-';
      if (rstrip) ++i;
      match = starts_with_at(s, i, "%}");
    }
    if (!match) {
      q = s.find("{%", q + 1);
      continue;
    }
    size_t tag_end = i + 2;
    size_t p = q;
    while (p > last_end) {
      size_t n = js_space_before(s, p);
      if (n == 0 || p - n < last_end) break;
      p -= n;
    }
    size_t after = skip_spaces(s, tag_end);
    out.append(in, last_end, p);
    if (!lstrip) out.append(in, p, q);
    if (!rstrip) out.append(in, tag_end, after);
    last_end = after;
    q = s.find("{%", after);
  }
  out.append(in, last_end, s.size());
  return out;
}

bool is_word(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

struct Mapping {
  std::string_view seq;
  Tok type;
};
constexpr Mapping kMappings[] = {
    {"{%", Tok::kOpenStatement}, {"%}", Tok::kCloseStatement}, {"{{", Tok::kOpenExpression},
    {"}}", Tok::kCloseExpression}, {"(", Tok::kOpenParen},     {")", Tok::kCloseParen},
    {"{", Tok::kOpenCurly},        {"}", Tok::kCloseCurly},    {"[", Tok::kOpenSquare},
    {"]", Tok::kCloseSquare},      {",", Tok::kComma},         {".", Tok::kDot},
    {":", Tok::kColon},            {"|", Tok::kPipe},          {"<=", Tok::kComparison},
    {">=", Tok::kComparison},      {"==", Tok::kComparison},   {"!=", Tok::kComparison},
    {"<", Tok::kComparison},       {">", Tok::kComparison},    {"+", Tok::kAdditive},
    {"-", Tok::kAdditive},         {"~", Tok::kAdditive},      {"**", Tok::kPower},
    {"*", Tok::kMultiplicative},   {"//", Tok::kMultiplicative}, {"/", Tok::kMultiplicative},
    {"%", Tok::kMultiplicative},   {"=", Tok::kEquals},
};

class Lexer {
 public:
  explicit Lexer(Src src) : src_(std::move(src)), s_(src_.text) {}

  std::vector<Token> run();

 private:
  [[noreturn]] void fail(const std::string& what) const {
    int line = src_.line.empty() ? 1 : src_.line[pos_ < src_.line.size() ? pos_ : src_.line.size() - 1];
    throw TemplateError(str_cat("line ", line, ": ", what));
  }
  int line_at(size_t p) const {
    if (src_.line.empty()) return 1;
    return src_.line[p < src_.line.size() ? p : src_.line.size() - 1];
  }
  void push(Tok type, std::string value, size_t start) {
    tokens_.push_back(Token{type, std::move(value), line_at(start)});
  }
  char at(size_t p) const { return p < s_.size() ? s_[p] : '\0'; }
  std::string read_string(char quote);
  void strip_trailing_whitespace();

  Src src_;
  const std::string& s_;
  size_t pos_ = 0;
  int curly_depth_ = 0;
  std::vector<Token> tokens_;
};

std::string Lexer::read_string(char quote) {
  std::string out;
  while (true) {
    if (pos_ >= s_.size()) fail("unterminated string literal");
    char c = s_[pos_];
    if (c == quote) break;
    if (c == '\\') {
      ++pos_;
      if (pos_ >= s_.size()) fail("unterminated string literal");
      char e = s_[pos_++];
      if (e == 'x' || e == 'u') {
        size_t len = e == 'x' ? 2 : 4;
        uint32_t cp = 0;
        for (size_t k = 0; k < len; ++k) {
          char h = at(pos_ + k);
          if (!std::isxdigit(static_cast<unsigned char>(h))) {
            fail(str_cat("invalid hexadecimal escape sequence \\", e));
          }
          cp = cp * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h))
                                                   ? h - '0'
                                                   : (std::tolower(h) - 'a' + 10));
        }
        append_utf8(out, cp);
        pos_ += len;
        continue;
      }
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        default: fail(str_cat("unexpected escaped character '", e, "' in string literal"));
      }
      continue;
    }
    out += c;
    ++pos_;
  }
  ++pos_;  // closing quote
  return out;
}

void Lexer::strip_trailing_whitespace() {
  if (!tokens_.empty() && tokens_.back().type == Tok::kText) {
    tokens_.back().value = js_trim_end(tokens_.back().value);
    if (tokens_.back().value.empty()) tokens_.pop_back();
  }
}

std::vector<Token> Lexer::run() {
  while (pos_ < s_.size()) {
    Tok last = tokens_.empty() ? Tok::kText : tokens_.back().type;
    bool at_text = tokens_.empty() || last == Tok::kCloseStatement || last == Tok::kCloseExpression ||
                   last == Tok::kComment;
    if (at_text) {
      size_t start = pos_;
      while (pos_ < s_.size() &&
             !(s_[pos_] == '{' && (at(pos_ + 1) == '%' || at(pos_ + 1) == '{' || at(pos_ + 1) == '#'))) {
        ++pos_;
      }
      if (pos_ > start) {
        push(Tok::kText, s_.substr(start, pos_ - start), start);
        continue;
      }
    }
    if (s_[pos_] == '{' && at(pos_ + 1) == '#') {
      size_t start = pos_;
      pos_ += 2;
      bool strip_before = at(pos_) == '-';
      if (strip_before) ++pos_;
      size_t end = s_.find("#}", pos_);
      if (end == std::string::npos) fail("unterminated comment (missing '#}')");
      std::string comment = s_.substr(pos_, end - pos_);
      bool strip_after = !comment.empty() && comment.back() == '-';
      if (strip_after) comment.pop_back();
      if (strip_before) strip_trailing_whitespace();
      push(Tok::kComment, comment, start);
      pos_ = end + 2;
      if (strip_after) pos_ = skip_spaces(s_, pos_);
      continue;
    }
    if (s_.compare(pos_, 3, "{%-") == 0) {
      strip_trailing_whitespace();
      push(Tok::kOpenStatement, "{%", pos_);
      pos_ += 3;
      continue;
    }
    if (s_.compare(pos_, 3, "{{-") == 0) {
      strip_trailing_whitespace();
      push(Tok::kOpenExpression, "{{", pos_);
      curly_depth_ = 0;
      pos_ += 3;
      continue;
    }
    pos_ = skip_spaces(s_, pos_);
    if (pos_ >= s_.size()) fail("unexpected end of template inside a tag");
    if (s_.compare(pos_, 3, "-%}") == 0) {
      push(Tok::kCloseStatement, "%}", pos_);
      pos_ = skip_spaces(s_, pos_ + 3);
      continue;
    }
    if (s_.compare(pos_, 3, "-}}") == 0) {
      push(Tok::kCloseExpression, "}}", pos_);
      pos_ = skip_spaces(s_, pos_ + 3);
      continue;
    }
    char c = s_[pos_];
    size_t start = pos_;
    if (c == '-' || c == '+') {
      if (tokens_.empty() || tokens_.back().type == Tok::kText) {
        fail(str_cat("unexpected character '", c, "'"));
      }
      Tok prev = tokens_.back().type;
      bool binary = prev == Tok::kIdentifier || prev == Tok::kNumber || prev == Tok::kString ||
                    prev == Tok::kCloseParen || prev == Tok::kCloseSquare;
      if (!binary) {
        ++pos_;
        std::string num;
        while (is_digit(at(pos_))) num += s_[pos_++];
        if (!num.empty() && at(pos_) == '.' && is_digit(at(pos_ + 1))) {
          ++pos_;
          num += '.';
          while (is_digit(at(pos_))) num += s_[pos_++];
        }
        push(num.empty() ? Tok::kUnary : Tok::kNumber, std::string(1, c) + num, start);
        continue;
      }
    }
    bool mapped = false;
    for (const Mapping& m : kMappings) {
      if (m.seq == "}}" && curly_depth_ > 0) continue;
      if (s_.compare(pos_, m.seq.size(), m.seq) == 0) {
        push(m.type, std::string(m.seq), start);
        if (m.type == Tok::kOpenExpression) {
          curly_depth_ = 0;
        } else if (m.type == Tok::kOpenCurly) {
          ++curly_depth_;
        } else if (m.type == Tok::kCloseCurly) {
          --curly_depth_;
        }
        pos_ += m.seq.size();
        mapped = true;
        break;
      }
    }
    if (mapped) continue;
    if (c == '\'' || c == '"') {
      ++pos_;
      std::string str = read_string(c);
      push(Tok::kString, std::move(str), start);
      continue;
    }
    if (is_digit(c)) {
      std::string num;
      while (is_digit(at(pos_))) num += s_[pos_++];
      bool after_dot = !tokens_.empty() && tokens_.back().type == Tok::kDot;
      if (!after_dot && at(pos_) == '.' && is_digit(at(pos_ + 1))) {
        ++pos_;
        num += '.';
        while (is_digit(at(pos_))) num += s_[pos_++];
      }
      push(Tok::kNumber, std::move(num), start);
      continue;
    }
    if (is_word(c)) {
      std::string word;
      while (pos_ < s_.size() && is_word(s_[pos_])) word += s_[pos_++];
      if (pos_ >= s_.size()) fail("unexpected end of template inside a tag");
      push(Tok::kIdentifier, std::move(word), start);
      continue;
    }
    fail(str_cat("unexpected character '", c, "'"));
  }
  return std::move(tokens_);
}

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  Src src;
  int line = 1;
  for (char c : source) {
    src.push(c, line);
    if (c == '\n') ++line;
  }
  if (!src.text.empty() && src.text.back() == '\n') {
    src.text.pop_back();
    src.line.pop_back();
  }
  src = strip_generation_tags(trim_blocks(lstrip_blocks(src)));
  return Lexer(std::move(src)).run();
}

}  // namespace splash::jinja
