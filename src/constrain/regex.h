// Regular expressions into grammar expressions (issue 39: the `regex` request field and JSON
// Schema `pattern`). The subset, documented in docs/SERVER.md "Structured output":
//   literals and escapes (\n \t \r \f \v \0 \xHH \uHHHH \. \\ ...), classes [a-z_] [^"] with
//   \d \w \s \D \W \S, `.` (any character but a newline), groups ( ) (?: ), alternation |,
//   quantifiers * + ? {n} {n,} {n,m} (lazy and possessive forms are refused), ^ and $ at the ends.
// Refused with a message naming the construct: backreferences, lookaround, named groups, \b,
// Unicode properties, classes with non-ASCII ranges.
// Characters are matched as UTF-8: `.` and negated classes take whole multi-byte characters.
#pragma once

#include <string>
#include <string_view>

#include "constrain/grammar.h"
#include "core/result.h"

namespace splash::constrain {

enum class RegexTarget : uint8_t {
  kRaw,         // the text itself
  kJsonString,  // the text as it appears inside a JSON string: '"', '\' and controls escaped
};

struct RegexExpr {
  GrammarBuilder::ExprId expr;
  bool anchored_start = false;  // began with ^
  bool anchored_end = false;    // ended with $
};

Result<RegexExpr> compile_regex(std::string_view pattern, RegexTarget target, GrammarBuilder& b);

// One character of the target, as a grammar expression (a whole UTF-8 sequence; in kJsonString, a
// plain character or an escape sequence).
GrammarBuilder::ExprId any_char(RegexTarget target, GrammarBuilder& b, bool allow_newline = true);

// Any well-formed multi-byte UTF-8 character (what `.` and negated ASCII classes also admit).
GrammarBuilder::ExprId utf8_multibyte(GrammarBuilder& b);

// Parses a bracket class starting at pattern[pos] == '['; on success pos is past the ']' and the
// ASCII members are in `set` (`negated` when it began with ^). Used by GBNF too.
Result<void> parse_class(std::string_view pattern, size_t& pos, ByteSet& set, bool& negated);

}  // namespace splash::constrain
