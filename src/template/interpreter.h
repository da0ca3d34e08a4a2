// Evaluator of the template syntax tree. Scoping follows @huggingface/jinja: `for` opens a scope
// (so plain `set` inside a loop does not leak out; namespaces do), `if` does not, macros resolve
// free names in the caller's scope. Errors are thrown as TemplateError with the statement's line;
// the public API (jinja.h) turns them into Result.
#pragma once

#include <chrono>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "template/ast.h"
#include "template/value.h"

namespace splash::jinja {

// A scope of variables. Owned by the evaluation stack frame that opened it; parents outlive
// children. Not thread-safe (one render at a time uses its own environments).
class Environment {
 public:
  explicit Environment(Environment* parent = nullptr) : parent_(parent) {}
  Value lookup(const std::string& name) const;
  void set(const std::string& name, Value value) { vars_[name] = std::move(value); }
  bool has_own(const std::string& name) const { return vars_.count(name) != 0; }

 private:
  std::unordered_map<std::string, Value> vars_;
  Environment* parent_;
};

class Interpreter {
 public:
  explicit Interpreter(std::chrono::system_clock::time_point now) : now_(now) {}

  // Renders a parsed program; `globals` already holds the builtins and the context.
  std::string render(const std::vector<NodePtr>& program, Environment& globals);

  Value eval(const Node& n, Environment& env);
  // Positional arguments, with keyword arguments appended as one kKwargs value when present
  // (or always, with `always_kwargs`), the calling convention of Function.
  std::vector<Value> eval_call_args(const std::vector<NodePtr>& args, Environment& env,
                                    bool always_kwargs = false);
  std::pair<std::vector<Value>, Object> eval_args(const std::vector<NodePtr>& args, Environment& env);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec_block(const std::vector<NodePtr>& body, Environment& env, std::string& out);
  Flow exec(const Node& n, Environment& env, std::string& out);
  Flow exec_for(const Node& n, Environment& env, std::string& out);
  void exec_set(const Node& n, Environment& env, const Value& rhs);
  void define_macro(const Node& n, Environment& env);
  std::string exec_call_block(const Node& n, Environment& env);
  void bind_macro_args(const std::string& display_name, const Node& owner, std::vector<Value> args,
                       Environment& scope);

  Value eval_binary(const Node& n, Environment& env);
  Value eval_member(const Node& n, Environment& env);
  Value eval_slice(const Value& object, const Node& slice, Environment& env);

  std::chrono::system_clock::time_point now_;
  int call_depth_ = 0;
};

// --- builtins.cpp ---
void install_globals(Environment& env, std::chrono::system_clock::time_point now);
Value apply_filter(Interpreter& in, const Value& operand, const Node& filter, Environment& env);
bool run_test(const std::string& name, const Value& operand, const Value& arg);
// Methods and properties of strings, arrays and dicts (`s.split`, `d.items`, `xs.length`);
// undefined when the value has no such builtin.
Value builtin_member(const Value& object, const std::string& name);
// The reference's compareRuntimeValues (sort, dictsort): -1, 0, 1.
int compare_values(const Value& a, const Value& b, bool case_sensitive);

}  // namespace splash::jinja
