// Jinja parser: tokens -> syntax tree, with the grammar (and operator precedence) of
// @huggingface/jinja. Everything the engine cannot evaluate is rejected here, at load time:
// unknown or unsupported statements (include, extends, import, block, ...), unknown filters and
// unknown tests, each named with its line.
#pragma once

#include <vector>

#include "template/ast.h"
#include "template/lexer.h"

namespace splash::jinja {

// Throws TemplateError ("line N: ...") on a syntax error or unsupported construct.
std::vector<NodePtr> parse_tokens(const std::vector<Token>& tokens);

bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);

}  // namespace splash::jinja
