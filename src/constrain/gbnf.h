// GBNF, the grammar notation llama.cpp users write (`grammar` on /v1/completions and chat), into a
// Grammar. Supported: `name ::= ...` rules (the output matches `root`), "literals" with the escapes
// n t r \\ " xHH uHHHH UHHHHHHHH, [classes] with ranges, ^ negation and escapes (ASCII members),
// `.`, ( groups ), `|`, `*` `+` `?` `{m}` `{m,}` `{m,n}`, and # comments. Refused with a message
// naming the line: token references (<[id]>), non-ASCII class members, left recursion.
#pragma once

#include <memory>
#include <string_view>

#include "constrain/grammar.h"
#include "core/result.h"

namespace splash::constrain {

Result<std::shared_ptr<const Grammar>> compile_gbnf(std::string_view text);
// The same rules added to `b`; returns the `root` rule.
Result<int32_t> add_gbnf(std::string_view text, GrammarBuilder& b);

// A regular expression (regex.h's subset) over the whole output, as a Grammar.
Result<std::shared_ptr<const Grammar>> compile_regex_grammar(std::string_view pattern);

}  // namespace splash::constrain
