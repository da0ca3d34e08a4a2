#include "constrain/gbnf.h"

#include <map>
#include <string>

#include "constrain/regex.h"
#include "core/utf8.h"

namespace splash::constrain {

namespace {

using ExprId = GrammarBuilder::ExprId;

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}


class GbnfParser {
 public:
  GbnfParser(std::string_view t, GrammarBuilder& b) : t_(t), b_(b) {}

  Result<int32_t> run() {
    skip_space(true);
    while (pos_ < t_.size()) {
      const std::string name = read_name();
      if (name.empty()) return fail("expected a rule name");
      skip_space(false);
      if (t_.substr(pos_, 3) != "::=") return fail("expected '::=' after rule name '" + name + "'");
      pos_ += 3;
      const int32_t rule = rule_id(name);
      if (b_.is_defined(rule)) return fail("rule '" + name + "' is defined twice");
      auto body = alternatives(0);
      if (!body) return body.error();
      b_.define_rule(rule, *body);
      skip_space(true);
    }
    for (const auto& [name, id] : rules_) {
      if (!b_.is_defined(id)) return make_error("grammar: rule '", name, "' is used but not defined");
    }
    auto root = rules_.find("root");
    if (root == rules_.end()) return make_error("grammar: no 'root' rule");
    return root->second;
  }

 private:
  Error fail(const std::string& what) const {
    size_t line = 1;
    for (size_t i = 0; i < pos_ && i < t_.size(); ++i) line += t_[i] == '\n';
    return make_error("grammar line ", line, ": ", what);
  }

  // Spaces and comments; newlines too when `newlines` (a rule body continues past a newline only
  // inside parentheses or after '|', as in llama.cpp).
  void skip_space(bool newlines) {
    while (pos_ < t_.size()) {
      const char c = t_[pos_];
      if (c == '#') {
        while (pos_ < t_.size() && t_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string read_name() {
    const size_t s = pos_;
    while (pos_ < t_.size() && name_char(t_[pos_])) ++pos_;
    return std::string(t_.substr(s, pos_ - s));
  }

  int32_t rule_id(const std::string& name) {
    auto it = rules_.find(name);
    if (it != rules_.end()) return it->second;
    const int32_t id = b_.declare_rule(name);
    rules_.emplace(name, id);
    return id;
  }

  Result<ExprId> alternatives(int depth) {
    std::vector<ExprId> options;
    for (;;) {
      auto s = sequence(depth);
      if (!s) return s;
      options.push_back(*s);
      skip_space(depth > 0);
      if (pos_ < t_.size() && t_[pos_] == '|') {
        ++pos_;
        skip_space(true);
        continue;
      }
      return b_.alt(std::move(options));
    }
  }

  // Does a new rule (`name ::=`) start at pos_?
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < t_.size() && name_char(t_[p])) ++p;
    if (p == pos_) return false;
    while (p < t_.size() && (t_[p] == ' ' || t_[p] == '\t')) ++p;
    return t_.substr(p, 3) == "::=";
  }

  Result<ExprId> sequence(int depth) {
    std::vector<ExprId> parts;
    for (;;) {
      skip_space(depth > 0);
      if (pos_ >= t_.size()) break;
      const char c = t_[pos_];
      if (c == '|' || c == ')' || c == '\n') break;
      if (depth == 0 && at_rule_start()) break;
      auto a = atom(depth);
      if (!a) return a;
      auto q = quantified(*a);
      if (!q) return q;
      parts.push_back(*q);
    }
    return b_.seq(std::move(parts));
  }

  Result<ExprId> quantified(ExprId item) {
    for (;;) {
      if (pos_ >= t_.size()) return item;
      const char c = t_[pos_];
      if (c == '*') {
        ++pos_;
        item = b_.star(item);
      } else if (c == '+') {
        ++pos_;
        item = b_.plus(item);
      } else if (c == '?') {
        ++pos_;
        item = b_.optional(item);
      } else if (c == '{') {
        ++pos_;
        auto number = [&](int32_t& v) {
          const size_t s = pos_;
          int64_t n = 0;
          while (pos_ < t_.size() && t_[pos_] >= '0' && t_[pos_] <= '9' && n < 100000) n = n * 10 + (t_[pos_++] - '0');
          v = static_cast<int32_t>(n);
          return pos_ > s;
        };
        int32_t min = 0, max = 0;
        if (!number(min)) return fail("expected a number after '{'");
        max = min;
        if (pos_ < t_.size() && t_[pos_] == ',') {
          ++pos_;
          max = -1;
          if (pos_ < t_.size() && t_[pos_] != '}' && !number(max)) return fail("bad repetition bound");
        }
        if (pos_ >= t_.size() || t_[pos_] != '}') return fail("expected '}'");
        ++pos_;
        if (max >= 0 && max < min) return fail("repetition {m,n} with n < m");
        item = b_.repeat(item, min, max);
      } else {
        return item;
      }
    }
  }

  Result<ExprId> atom(int depth) {
    const char c = t_[pos_];
    if (c == '"') return literal();
    if (c == '[') {
      ByteSet set;
      bool negated = false;
      if (auto r = parse_class(t_, pos_, set, negated); !r) return fail(r.error().message);
      if (!negated) return b_.bytes(set);
      ByteSet rest = set.inverted();
      rest.remove(ByteSet::range(0x80, 0xFF));
      return b_.alt({b_.bytes(rest), utf8_multibyte(b_)});
    }
    if (c == '.') {
      ++pos_;
      return any_char(RegexTarget::kRaw, b_, true);
    }
    if (c == '(') {
      ++pos_;
      skip_space(true);
      auto inner = alternatives(depth + 1);
      if (!inner) return inner;
      skip_space(true);
      if (pos_ >= t_.size() || t_[pos_] != ')') return fail("expected ')'");
      ++pos_;
      return inner;
    }
    if (c == '<') return fail("token references (<[id]>) are not supported");
    if (name_char(c)) return b_.ref(rule_id(read_name()));
    return fail(std::string("unexpected character '") + c + "'");
  }

  Result<ExprId> literal() {
    ++pos_;  // '"'
    std::string text;
    while (pos_ < t_.size() && t_[pos_] != '"') {
      char c = t_[pos_++];
      if (c == '\n') return fail("unterminated string literal");
      if (c != '\\') {
        text += c;
        continue;
      }
      if (pos_ >= t_.size()) break;
      c = t_[pos_++];
      auto hex = [&](int n) -> int64_t {
        int64_t v = 0;
        for (int i = 0; i < n; ++i) {
          if (pos_ >= t_.size()) return -1;
          const char h = t_[pos_++];
          int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
          if (d < 0) return -1;
          v = v * 16 + d;
        }
        return v;
      };
      int64_t cp = -1;
      switch (c) {
        case 'n': cp = '\n'; break;
        case 't': cp = '\t'; break;
        case 'r': cp = '\r'; break;
        case '\\': cp = '\\'; break;
        case '"': cp = '"'; break;
        case '[': cp = '['; break;
        case ']': cp = ']'; break;
        case 'x': cp = hex(2); break;
        case 'u': cp = hex(4); break;
        case 'U': cp = hex(8); break;
        default: return fail(std::string("unknown escape \\") + c);
      }
      if (cp < 0 || cp > 0x10FFFF) return fail("bad escape in string literal");
      append_utf8(text, static_cast<uint32_t>(cp));
    }
    if (pos_ >= t_.size()) return fail("unterminated string literal");
    ++pos_;
    return b_.literal(text);
  }

  std::string_view t_;
  size_t pos_ = 0;
  GrammarBuilder& b_;
  std::map<std::string, int32_t> rules_;
};

}  // namespace

Result<int32_t> add_gbnf(std::string_view text, GrammarBuilder& b) { return GbnfParser(text, b).run(); }

Result<std::shared_ptr<const Grammar>> compile_gbnf(std::string_view text) {
  GrammarBuilder b;
  auto root = add_gbnf(text, b);
  if (!root) return root.error();
  auto g = b.build(*root);
  if (!g) return make_error("grammar: ", g.error().message);
  return std::make_shared<const Grammar>(std::move(*g));
}

Result<std::shared_ptr<const Grammar>> compile_regex_grammar(std::string_view pattern) {
  GrammarBuilder b;
  auto re = compile_regex(pattern, RegexTarget::kRaw, b);
  if (!re) return re.error();
  const int32_t root = b.declare_rule("regex");
  b.define_rule(root, re->expr);  // the whole output matches: ^ and $ are implied
  auto g = b.build(root);
  if (!g) return make_error("regex: ", g.error().message);
  return std::make_shared<const Grammar>(std::move(*g));
}

}  // namespace splash::constrain
