// Syntax tree of a parsed template. One node type for statements and expressions keeps the
// evaluator a single switch; which fields a kind uses is listed next to the kind.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace splash::jinja {

enum class NodeKind {
  // statements
  kText,         // str: literal output
  kComment,      // nothing
  kIf,           // a: test, body, alt (else / elif chain)
  kFor,          // a: loop target (identifier or tuple), b: iterable, body, alt: else block
  kBreak,
  kContinue,
  kSet,          // a: target, b: value (null for a block set), body: block set content
  kMacro,        // str: name, list: parameters, flag: reads varargs/kwargs (see special)
  kCallBlock,    // a: call expression, list: caller parameters, body
  kFilterBlock,  // a: filter (identifier or call), body
  // expressions
  kInt,        // num
  kFloat,      // num
  kString,     // str
  kArray,      // list
  kTuple,      // list
  kObject,     // pairs
  kIdentifier, // str
  kMember,     // a: object, b: property, flag: computed (subscript)
  kCall,       // a: callee, list: arguments
  kUnary,      // str: operator, a
  kBinary,     // str: operator, a, b
  kFilter,     // a: operand, b: filter (identifier or call)
  kTest,       // a: operand, str: test name, flag: negated
  kSelect,     // a: value, b: condition (`x if c` without else)
  kTernary,    // a: condition, b: if true, c: if false
  kSlice,      // a: start, b: stop, c: step (each may be null)
  kKwarg,      // str: name, a: value
  kSpread,     // a: `*expr`
  kKwSpread,   // a: `**expr`
};

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Node {
  NodeKind kind;
  int line = 0;
  std::string str;
  double num = 0;
  bool flag = false;
  NodePtr a, b, c;
  std::vector<NodePtr> list;
  std::vector<NodePtr> body;
  std::vector<NodePtr> alt;
  std::vector<std::pair<NodePtr, NodePtr>> pairs;
  bool uses_varargs = false;  // macros / call blocks: body reads `varargs`
  bool uses_kwargs = false;   // macros / call blocks: body reads `kwargs`
};

inline NodePtr make_node(NodeKind kind, int line) {
  auto n = std::make_unique<Node>();
  n->kind = kind;
  n->line = line;
  return n;
}

}  // namespace splash::jinja
