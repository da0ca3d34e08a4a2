#include "template/parser.h"

#include <algorithm>
#include <set>
#include <string_view>

#include "core/result.h"
#include "template/value.h"

namespace splash::jinja {

namespace {

constexpr std::string_view kKnownFilters[] = {
    "safe", "tojson", "list",  "first",      "last",      "length",     "reverse", "sort",
    "join", "string", "unique", "upper",     "lower",     "title",      "capitalize", "trim",
    "indent", "int",  "float", "abs",        "items",     "bool",       "default", "selectattr",
    "rejectattr", "map", "replace", "get",  "keys",      "values",     "dictsort",
};
constexpr std::string_view kKnownTests[] = {
    "boolean", "callable", "odd",     "even",     "false",    "true",    "none",
    "string",  "number",   "integer", "iterable", "mapping",  "sequence", "lower",
    "upper",   "defined",  "undefined", "equalto", "eq",
};
// Jinja statements this engine does not implement: named so the error says what to change.
constexpr std::string_view kUnsupportedStatements[] = {
    "include", "extends", "import", "from", "block", "with", "raw", "autoescape", "do", "trans",
};
constexpr int kMaxNesting = 200;

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  std::vector<NodePtr> program() {
    std::vector<NodePtr> out;
    while (pos_ < t_.size()) out.push_back(parse_any());
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    int line = t_.empty() ? 1 : t_[std::min(pos_, t_.size() - 1)].line;
    throw TemplateError(str_cat("line ", line, ": ", what));
  }
  int line() const { return t_.empty() ? 1 : t_[std::min(pos_, t_.size() - 1)].line; }
  bool is(Tok type, size_t ahead = 0) const {
    return pos_ + ahead < t_.size() && t_[pos_ + ahead].type == type;
  }
  bool is_ident(std::string_view name, size_t ahead = 0) const {
    return is(Tok::kIdentifier, ahead) && t_[pos_ + ahead].value == name;
  }
  bool is_statement(std::initializer_list<std::string_view> names) const {
    if (!is(Tok::kOpenStatement) || !is(Tok::kIdentifier, 1)) return false;
    return std::find(names.begin(), names.end(), t_[pos_ + 1].value) != names.end();
  }
  const Token& expect(Tok type, std::string_view what) {
    if (pos_ >= t_.size()) fail(str_cat("expected ", what, " but the template ended"));
    if (t_[pos_].type != type) {
      fail(str_cat("expected ", what, ", got ", tok_name(t_[pos_].type), " '", t_[pos_].value, "'"));
    }
    return t_[pos_++];
  }
  void expect_ident(std::string_view name) {
    if (!is_ident(name)) fail(str_cat("expected '", name, "'"));
    ++pos_;
  }
  // Reads body nodes until one of the closing statements; fails naming the opener if the
  // template ends first.
  std::vector<NodePtr> parse_until(std::initializer_list<std::string_view> closers,
                                   std::string_view opener, int open_line) {
    std::vector<NodePtr> body;
    while (!is_statement(closers)) {
      if (pos_ >= t_.size()) {
        throw TemplateError(str_cat("line ", open_line, ": '", opener, "' block is never closed (expected '",
                                    *closers.begin(), "')"));
      }
      body.push_back(parse_any());
    }
    return body;
  }

  NodePtr parse_any();
  NodePtr parse_statement();
  NodePtr parse_set(int line);
  NodePtr parse_if(int line);
  NodePtr parse_for(int line);
  NodePtr parse_macro(int line);

  NodePtr parse_expression();
  NodePtr parse_sequence(bool primary);
  NodePtr parse_if_expression();
  NodePtr parse_or();
  NodePtr parse_and();
  NodePtr parse_not();
  NodePtr parse_comparison();
  NodePtr parse_additive();
  NodePtr parse_multiplicative();
  NodePtr parse_power();
  NodePtr parse_test();
  NodePtr parse_filter();
  NodePtr parse_unary_sign();
  NodePtr parse_call_member();
  NodePtr parse_call(NodePtr callee);
  std::vector<NodePtr> parse_args(bool parameters);
  NodePtr parse_member(NodePtr object);
  NodePtr parse_subscript();
  NodePtr parse_primary();
  NodePtr binary(std::string op, NodePtr a, NodePtr b, int line) {
    auto n = make_node(NodeKind::kBinary, line);
    n->str = std::move(op);
    n->a = std::move(a);
    n->b = std::move(b);
    return n;
  }

  const std::vector<Token>& t_;
  size_t pos_ = 0;
  int depth_ = 0;
};

// Marks a macro / call block that reads `varargs` or `kwargs`, so calls accept extra arguments.
void scan_special(const Node* n, Node* owner) {
  if (!n) return;
  if (n->kind == NodeKind::kIdentifier) {
    if (n->str == "varargs") owner->uses_varargs = true;
    if (n->str == "kwargs") owner->uses_kwargs = true;
  }
  for (const Node* child : {n->a.get(), n->b.get(), n->c.get()}) scan_special(child, owner);
  for (const auto& v : {&n->list, &n->body, &n->alt}) {
    for (const auto& child : *v) scan_special(child.get(), owner);
  }
  for (const auto& [k, v] : n->pairs) {
    scan_special(k.get(), owner);
    scan_special(v.get(), owner);
  }
}

void mark_special(Node* owner) {
  for (const auto& child : owner->body) scan_special(child.get(), owner);
  for (const auto& p : owner->list) {
    if (p->kind == NodeKind::kKwarg) scan_special(p->a.get(), owner);
    if (p->str == "varargs" && p->kind == NodeKind::kIdentifier) owner->uses_varargs = false;
    if (p->str == "kwargs" && p->kind == NodeKind::kIdentifier) owner->uses_kwargs = false;
  }
}

NodePtr Parser::parse_any() {
  const Token& tok = t_[pos_];
  switch (tok.type) {
    case Tok::kComment: {
      ++pos_;
      return make_node(NodeKind::kComment, tok.line);
    }
    case Tok::kText: {
      auto n = make_node(NodeKind::kText, tok.line);
      n->str = tok.value;
      ++pos_;
      return n;
    }
    case Tok::kOpenStatement: return parse_statement();
    case Tok::kOpenExpression: {
      ++pos_;
      NodePtr e = parse_expression();
      expect(Tok::kCloseExpression, "'}}'");
      return e;
    }
    default: fail(str_cat("unexpected ", tok_name(tok.type), " '", tok.value, "'"));
  }
}

NodePtr Parser::parse_statement() {
  expect(Tok::kOpenStatement, "'{%'");
  if (!is(Tok::kIdentifier)) fail("expected a statement name after '{%'");
  std::string name = t_[pos_].value;
  int ln = t_[pos_].line;
  ++pos_;
  if (name == "set") return parse_set(ln);
  if (name == "if") {
    NodePtr n = parse_if(ln);
    expect(Tok::kOpenStatement, "'{%'");
    expect_ident("endif");
    expect(Tok::kCloseStatement, "'%}'");
    return n;
  }
  if (name == "for") {
    NodePtr n = parse_for(ln);
    expect(Tok::kOpenStatement, "'{%'");
    expect_ident("endfor");
    expect(Tok::kCloseStatement, "'%}'");
    return n;
  }
  if (name == "macro") {
    NodePtr n = parse_macro(ln);
    expect(Tok::kOpenStatement, "'{%'");
    expect_ident("endmacro");
    expect(Tok::kCloseStatement, "'%}'");
    return n;
  }
  if (name == "call") {
    auto n = make_node(NodeKind::kCallBlock, ln);
    if (is(Tok::kOpenParen)) n->list = parse_args(true);
    NodePtr callee = parse_primary();
    if (callee->kind != NodeKind::kIdentifier) fail("expected a macro name after 'call'");
    auto call = make_node(NodeKind::kCall, ln);
    call->a = std::move(callee);
    call->list = parse_args(false);
    n->a = std::move(call);
    expect(Tok::kCloseStatement, "'%}'");
    n->body = parse_until({"endcall"}, "call", ln);
    pos_ += 2;
    expect(Tok::kCloseStatement, "'%}'");
    mark_special(n.get());
    return n;
  }
  if (name == "break" || name == "continue") {
    expect(Tok::kCloseStatement, "'%}'");
    return make_node(name == "break" ? NodeKind::kBreak : NodeKind::kContinue, ln);
  }
  if (name == "filter") {
    auto n = make_node(NodeKind::kFilterBlock, ln);
    NodePtr filter = parse_primary();
    if (filter->kind != NodeKind::kIdentifier) fail("expected a filter name after 'filter'");
    if (!is_known_filter(filter->str)) fail(str_cat("unknown filter '", filter->str, "'"));
    if (is(Tok::kOpenParen)) filter = parse_call(std::move(filter));
    n->a = std::move(filter);
    expect(Tok::kCloseStatement, "'%}'");
    n->body = parse_until({"endfilter"}, "filter", ln);
    pos_ += 2;
    expect(Tok::kCloseStatement, "'%}'");
    return n;
  }
  for (std::string_view u : kUnsupportedStatements) {
    if (name == u) {
      throw TemplateError(str_cat("line ", ln, ": unsupported statement '", name, "'"));
    }
  }
  throw TemplateError(str_cat("line ", ln, ": unknown statement '", name, "'"));
}

NodePtr Parser::parse_set(int ln) {
  auto n = make_node(NodeKind::kSet, ln);
  n->a = parse_sequence(false);
  if (is(Tok::kEquals)) {
    ++pos_;
    n->b = parse_sequence(false);
  } else {
    expect(Tok::kCloseStatement, "'%}' or '='");
    n->body = parse_until({"endset"}, "set", ln);
    pos_ += 2;
  }
  expect(Tok::kCloseStatement, "'%}'");
  return n;
}

NodePtr Parser::parse_if(int ln) {
  auto n = make_node(NodeKind::kIf, ln);
  n->a = parse_expression();
  expect(Tok::kCloseStatement, "'%}'");
  n->body = parse_until({"elif", "else", "endif"}, "if", ln);
  if (is_statement({"elif"})) {
    int elif_line = t_[pos_ + 1].line;
    pos_ += 2;
    n->alt.push_back(parse_if(elif_line));
  } else if (is_statement({"else"})) {
    pos_ += 2;
    expect(Tok::kCloseStatement, "'%}'");
    n->alt = parse_until({"endif"}, "if", ln);
  }
  return n;
}

NodePtr Parser::parse_for(int ln) {
  auto n = make_node(NodeKind::kFor, ln);
  n->a = parse_sequence(true);
  if (n->a->kind != NodeKind::kIdentifier && n->a->kind != NodeKind::kTuple) {
    fail("expected a name or tuple of names as the loop variable");
  }
  if (!is_ident("in")) fail("expected 'in' after the loop variable");
  ++pos_;
  n->b = parse_expression();
  expect(Tok::kCloseStatement, "'%}'");
  n->body = parse_until({"endfor", "else"}, "for", ln);
  if (is_statement({"else"})) {
    pos_ += 2;
    expect(Tok::kCloseStatement, "'%}'");
    n->alt = parse_until({"endfor"}, "for", ln);
  }
  return n;
}

NodePtr Parser::parse_macro(int ln) {
  auto n = make_node(NodeKind::kMacro, ln);
  NodePtr name = parse_primary();
  if (name->kind != NodeKind::kIdentifier) fail("expected a name after 'macro'");
  n->str = name->str;
  n->list = parse_args(true);
  expect(Tok::kCloseStatement, "'%}'");
  n->body = parse_until({"endmacro"}, "macro", ln);
  mark_special(n.get());
  return n;
}

NodePtr Parser::parse_expression() {
  if (++depth_ > kMaxNesting) fail("expression nested too deeply");
  NodePtr e = parse_if_expression();
  --depth_;
  return e;
}

NodePtr Parser::parse_sequence(bool primary) {
  int ln = line();
  NodePtr first = primary ? parse_primary() : parse_expression();
  if (!is(Tok::kComma)) return first;
  auto tuple = make_node(NodeKind::kTuple, ln);
  tuple->list.push_back(std::move(first));
  while (is(Tok::kComma)) {
    ++pos_;
    tuple->list.push_back(primary ? parse_primary() : parse_expression());
  }
  return tuple;
}

NodePtr Parser::parse_if_expression() {
  int ln = line();
  NodePtr a = parse_or();
  if (is_ident("if")) {
    ++pos_;
    NodePtr test = parse_or();
    if (is_ident("else")) {
      ++pos_;
      auto n = make_node(NodeKind::kTernary, ln);
      n->a = std::move(test);
      n->b = std::move(a);
      n->c = parse_if_expression();
      return n;
    }
    auto n = make_node(NodeKind::kSelect, ln);
    n->a = std::move(a);
    n->b = std::move(test);
    return n;
  }
  return a;
}

NodePtr Parser::parse_or() {
  NodePtr left = parse_and();
  while (is_ident("or")) {
    int ln = line();
    ++pos_;
    left = binary("or", std::move(left), parse_and(), ln);
  }
  return left;
}

NodePtr Parser::parse_and() {
  NodePtr left = parse_not();
  while (is_ident("and")) {
    int ln = line();
    ++pos_;
    left = binary("and", std::move(left), parse_not(), ln);
  }
  return left;
}

NodePtr Parser::parse_not() {
  if (is_ident("not")) {
    int ln = line();
    ++pos_;
    if (++depth_ > kMaxNesting) fail("expression nested too deeply");
    auto n = make_node(NodeKind::kUnary, ln);
    n->str = "not";
    n->a = parse_not();
    --depth_;
    return n;
  }
  return parse_comparison();
}

NodePtr Parser::parse_comparison() {
  NodePtr left = parse_additive();
  while (true) {
    int ln = line();
    std::string op;
    if (is_ident("not") && is_ident("in", 1)) {
      op = "not in";
      pos_ += 2;
    } else if (is_ident("in")) {
      op = "in";
      ++pos_;
    } else if (is(Tok::kComparison)) {
      op = t_[pos_++].value;
    } else {
      break;
    }
    left = binary(op, std::move(left), parse_additive(), ln);
  }
  return left;
}

NodePtr Parser::parse_additive() {
  NodePtr left = parse_multiplicative();
  while (is(Tok::kAdditive)) {
    int ln = line();
    std::string op = t_[pos_++].value;
    left = binary(op, std::move(left), parse_multiplicative(), ln);
  }
  return left;
}

NodePtr Parser::parse_multiplicative() {
  NodePtr left = parse_power();
  while (is(Tok::kMultiplicative)) {
    int ln = line();
    std::string op = t_[pos_++].value;
    left = binary(op, std::move(left), parse_power(), ln);
  }
  return left;
}

NodePtr Parser::parse_power() {
  NodePtr left = parse_test();
  while (is(Tok::kPower)) {
    int ln = line();
    ++pos_;
    left = binary("**", std::move(left), parse_test(), ln);
  }
  return left;
}

NodePtr Parser::parse_test() {
  NodePtr operand = parse_filter();
  while (is_ident("is")) {
    int ln = line();
    ++pos_;
    bool negate = is_ident("not");
    if (negate) ++pos_;
    if (!is(Tok::kIdentifier)) fail("expected a test name after 'is'");
    std::string name = t_[pos_++].value;
    if (!is_known_test(name)) fail(str_cat("unknown test '", name, "'"));
    if (is(Tok::kOpenParen)) fail(str_cat("test '", name, "' with arguments is not supported"));
    auto n = make_node(NodeKind::kTest, ln);
    n->a = std::move(operand);
    n->str = name;
    n->flag = negate;
    operand = std::move(n);
  }
  return operand;
}

NodePtr Parser::parse_filter() {
  NodePtr operand = parse_unary_sign();
  while (is(Tok::kPipe)) {
    int ln = line();
    ++pos_;
    if (!is(Tok::kIdentifier)) fail("expected a filter name after '|'");
    NodePtr filter = parse_primary();
    if (!is_known_filter(filter->str)) fail(str_cat("unknown filter '", filter->str, "'"));
    if (is(Tok::kOpenParen)) filter = parse_call(std::move(filter));
    auto n = make_node(NodeKind::kFilter, ln);
    n->a = std::move(operand);
    n->b = std::move(filter);
    operand = std::move(n);
  }
  return operand;
}

NodePtr Parser::parse_unary_sign() {
  if ((is(Tok::kUnary) || is(Tok::kAdditive)) && (t_[pos_].value == "-" || t_[pos_].value == "+")) {
    auto n = make_node(NodeKind::kUnary, line());
    n->str = t_[pos_++].value;
    if (++depth_ > kMaxNesting) fail("expression nested too deeply");
    n->a = parse_unary_sign();
    --depth_;
    return n;
  }
  return parse_call_member();
}

NodePtr Parser::parse_call_member() {
  NodePtr member = parse_member(parse_primary());
  if (is(Tok::kOpenParen)) return parse_call(std::move(member));
  return member;
}

NodePtr Parser::parse_call(NodePtr callee) {
  auto n = make_node(NodeKind::kCall, line());
  n->a = std::move(callee);
  n->list = parse_args(false);
  NodePtr e = parse_member(std::move(n));
  if (is(Tok::kOpenParen)) e = parse_call(std::move(e));
  return e;
}

std::vector<NodePtr> Parser::parse_args(bool parameters) {
  expect(Tok::kOpenParen, "'('");
  std::vector<NodePtr> args;
  std::set<std::string> names;
  bool saw_keyword = false, saw_spread = false;
  while (!is(Tok::kCloseParen)) {
    if (pos_ >= t_.size()) fail("argument list is never closed (expected ')')");
    int ln = line();
    bool kw_spread = is(Tok::kPower);
    bool spread = is(Tok::kMultiplicative) && t_[pos_].value == "*";
    if (parameters && (kw_spread || spread)) fail("argument unpacking in a parameter list");
    if (kw_spread) {
      ++pos_;
      auto n = make_node(NodeKind::kKwSpread, ln);
      n->a = parse_expression();
      args.push_back(std::move(n));
      if (is(Tok::kComma)) ++pos_;
      if (!is(Tok::kCloseParen)) fail("'**' must be applied to the final argument");
      break;
    }
    NodePtr arg;
    if (spread) {
      if (saw_spread) fail("only one '*' argument unpacking is allowed");
      saw_spread = true;
      ++pos_;
      arg = make_node(NodeKind::kSpread, ln);
      arg->a = parse_expression();
    } else {
      arg = parse_expression();
      if (is(Tok::kEquals)) {
        ++pos_;
        if (arg->kind != NodeKind::kIdentifier) fail("expected a name before '=' in an argument list");
        auto kw = make_node(NodeKind::kKwarg, ln);
        kw->str = arg->str;
        kw->a = parse_expression();
        arg = std::move(kw);
      }
      if (parameters) {
        if (arg->kind != NodeKind::kIdentifier && arg->kind != NodeKind::kKwarg) {
          fail("expected a parameter name");
        }
        if (!names.insert(arg->str).second) fail(str_cat("duplicate parameter '", arg->str, "'"));
      }
      if (arg->kind == NodeKind::kKwarg) {
        saw_keyword = true;
      } else if (saw_keyword) {
        fail(parameters ? "parameter without default follows one with a default"
                        : "positional argument follows a keyword argument");
      } else if (saw_spread) {
        fail("positional argument follows '*' unpacking");
      }
    }
    args.push_back(std::move(arg));
    if (is(Tok::kComma)) ++pos_;
  }
  expect(Tok::kCloseParen, "')'");
  return args;
}

NodePtr Parser::parse_subscript() {
  int ln = line();
  std::vector<NodePtr> parts;
  bool is_slice = false;
  while (!is(Tok::kCloseSquare)) {
    if (pos_ >= t_.size()) fail("subscript is never closed (expected ']')");
    if (is(Tok::kColon)) {
      parts.push_back(nullptr);
      ++pos_;
      is_slice = true;
    } else {
      parts.push_back(parse_expression());
      if (is(Tok::kColon)) {
        ++pos_;
        is_slice = true;
      }
    }
  }
  if (parts.empty()) fail("empty subscript '[]'");
  if (!is_slice) {
    if (parts.size() != 1) fail("subscript with more than one value");
    return std::move(parts[0]);
  }
  if (parts.size() > 3) fail("slice with more than 3 parts");
  auto n = make_node(NodeKind::kSlice, ln);
  n->a = std::move(parts[0]);
  if (parts.size() > 1) n->b = std::move(parts[1]);
  if (parts.size() > 2) n->c = std::move(parts[2]);
  return n;
}

NodePtr Parser::parse_member(NodePtr object) {
  while (is(Tok::kDot) || is(Tok::kOpenSquare)) {
    int ln = line();
    bool computed = is(Tok::kOpenSquare);
    ++pos_;
    auto n = make_node(NodeKind::kMember, ln);
    n->flag = computed;
    if (computed) {
      n->b = parse_subscript();
      expect(Tok::kCloseSquare, "']'");
    } else {
      n->b = parse_primary();
      if (n->b->kind != NodeKind::kIdentifier && n->b->kind != NodeKind::kInt) {
        fail("expected a name or integer after '.'");
      }
    }
    n->a = std::move(object);
    object = std::move(n);
  }
  return object;
}

NodePtr Parser::parse_primary() {
  if (pos_ >= t_.size()) fail("expected an expression but the template ended");
  if (++depth_ > kMaxNesting) fail("expression nested too deeply");
  const Token& tok = t_[pos_++];
  NodePtr n;
  switch (tok.type) {
    case Tok::kNumber: {
      bool is_float = tok.value.find('.') != std::string::npos;
      n = make_node(is_float ? NodeKind::kFloat : NodeKind::kInt, tok.line);
      n->num = std::strtod(tok.value.c_str(), nullptr);
      break;
    }
    case Tok::kString: {
      n = make_node(NodeKind::kString, tok.line);
      n->str = tok.value;
      while (is(Tok::kString)) n->str += t_[pos_++].value;  // adjacent literals concatenate
      break;
    }
    case Tok::kIdentifier:
      n = make_node(NodeKind::kIdentifier, tok.line);
      n->str = tok.value;
      break;
    case Tok::kOpenParen:
      n = parse_sequence(false);
      expect(Tok::kCloseParen, "')'");
      break;
    case Tok::kOpenSquare:
      n = make_node(NodeKind::kArray, tok.line);
      while (!is(Tok::kCloseSquare)) {
        if (pos_ >= t_.size()) fail("list literal is never closed (expected ']')");
        n->list.push_back(parse_expression());
        if (is(Tok::kComma)) ++pos_;
      }
      ++pos_;
      break;
    case Tok::kOpenCurly:
      n = make_node(NodeKind::kObject, tok.line);
      while (!is(Tok::kCloseCurly)) {
        if (pos_ >= t_.size()) fail("dict literal is never closed (expected '}')");
        NodePtr key = parse_expression();
        expect(Tok::kColon, "':' between key and value");
        NodePtr value = parse_expression();
        n->pairs.emplace_back(std::move(key), std::move(value));
        if (is(Tok::kComma)) ++pos_;
      }
      ++pos_;
      break;
    default:
      --pos_;
      fail(str_cat("unexpected ", tok_name(tok.type), " '", tok.value, "'"));
  }
  --depth_;
  return n;
}

}  // namespace

bool is_known_filter(const std::string& name) {
  return std::find(std::begin(kKnownFilters), std::end(kKnownFilters), name) != std::end(kKnownFilters);
}

bool is_known_test(const std::string& name) {
  return std::find(std::begin(kKnownTests), std::end(kKnownTests), name) != std::end(kKnownTests);
}

std::vector<NodePtr> parse_tokens(const std::vector<Token>& tokens) {
  return Parser(tokens).program();
}

}  // namespace splash::jinja
