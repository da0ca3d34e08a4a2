// Jinja lexer: source text -> tokens, applying whitespace control the way @huggingface/jinja does
// (trim_blocks and lstrip_blocks on, one trailing newline dropped, `{% generation %}` removed).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace splash::jinja {

enum class Tok {
  kText,
  kNumber,
  kString,
  kIdentifier,
  kEquals,
  kOpenParen,
  kCloseParen,
  kOpenStatement,
  kCloseStatement,
  kOpenExpression,
  kCloseExpression,
  kOpenSquare,
  kCloseSquare,
  kOpenCurly,
  kCloseCurly,
  kComma,
  kDot,
  kColon,
  kPipe,
  kAdditive,        // + - ~
  kMultiplicative,  // * / // %
  kPower,           // **
  kComparison,      // < > <= >= == !=
  kUnary,           // a sign with no number after it
  kComment,
};

struct Token {
  Tok type;
  std::string value;
  int line;  // 1-based line in the original template source
};

const char* tok_name(Tok t);

// Throws TemplateError ("line N: ...") on malformed input.
std::vector<Token> tokenize(std::string_view source);

}  // namespace splash::jinja
