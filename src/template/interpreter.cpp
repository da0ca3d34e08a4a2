#include "template/interpreter.h"

#include <cmath>

#include "core/result.h"

namespace splash::jinja {

namespace {

constexpr int kMaxCallDepth = 200;

[[noreturn]] void eval_fail(const std::string& what) { throw TemplateError(what); }

bool has_line_prefix(const std::string& msg) { return msg.rfind("line ", 0) == 0; }

std::vector<Value> slice_values(const std::vector<Value>& arr, const Value& start_v,
                                const Value& stop_v, const Value& step_v) {
  // Mirrors the reference's utils.slice (Python slice semantics, clamped).
  double len = static_cast<double>(arr.size());
  double step = step_v.is_undefined() ? 1 : step_v.as_number();
  double dir = step > 0 ? 1 : step < 0 ? -1 : 0;
  double start, stop;
  if (dir >= 0) {
    start = start_v.is_undefined() ? 0 : start_v.as_number();
    start = start < 0 ? std::max(len + start, 0.0) : std::min(start, len);
    stop = stop_v.is_undefined() ? len : stop_v.as_number();
    stop = stop < 0 ? std::max(len + stop, 0.0) : std::min(stop, len);
  } else {
    start = start_v.is_undefined() ? len - 1 : start_v.as_number();
    start = start < 0 ? std::max(len + start, -1.0) : std::min(start, len - 1);
    stop = stop_v.is_undefined() ? -1 : stop_v.as_number();
    stop = stop < -1 ? std::max(len + stop, -1.0) : std::min(stop, len - 1);
  }
  std::vector<Value> out;
  if (dir == 0) return out;
  for (double i = start; dir * i < dir * stop; i += step) {
    if (i >= 0 && i < len) out.push_back(arr[static_cast<size_t>(i)]);
  }
  return out;
}

}  // namespace

Value Environment::lookup(const std::string& name) const {
  for (const Environment* e = this; e; e = e->parent_) {
    auto it = e->vars_.find(name);
    if (it != e->vars_.end()) return it->second;
  }
  return Value();
}

std::string Interpreter::render(const std::vector<NodePtr>& program, Environment& globals) {
  std::string out;
  exec_block(program, globals, out);
  return out;
}

// --- statements ---------------------------------------------------------------------------------

Interpreter::Flow Interpreter::exec_block(const std::vector<NodePtr>& body, Environment& env,
                                          std::string& out) {
  for (const NodePtr& n : body) {
    Flow f = exec(*n, env, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec(const Node& n, Environment& env, std::string& out) {
  try {
    switch (n.kind) {
      case NodeKind::kText: out += n.str; return Flow::kNormal;
      case NodeKind::kComment: return Flow::kNormal;
      case NodeKind::kBreak: return Flow::kBreak;
      case NodeKind::kContinue: return Flow::kContinue;
      case NodeKind::kIf:
        return exec_block(eval(*n.a, env).truthy() ? n.body : n.alt, env, out);
      case NodeKind::kFor: return exec_for(n, env, out);
      case NodeKind::kSet: {
        if (n.b) {
          exec_set(n, env, eval(*n.b, env));
          return Flow::kNormal;
        }
        std::string block;
        Flow f = exec_block(n.body, env, block);
        if (f != Flow::kNormal) return f;
        exec_set(n, env, Value::string(std::move(block)));
        return Flow::kNormal;
      }
      case NodeKind::kMacro: define_macro(n, env); return Flow::kNormal;
      case NodeKind::kCallBlock: out += exec_call_block(n, env); return Flow::kNormal;
      case NodeKind::kFilterBlock: {
        std::string block;
        Flow f = exec_block(n.body, env, block);
        if (f != Flow::kNormal) return f;
        Value v = apply_filter(*this, Value::string(std::move(block)), *n.a, env);
        if (!v.is_null() && !v.is_undefined()) out += to_output_string(v);
        return Flow::kNormal;
      }
      default: {
        Value v = eval(n, env);
        if (!v.is_null() && !v.is_undefined()) out += to_output_string(v);
        return Flow::kNormal;
      }
    }
  } catch (const TemplateError& e) {
    if (has_line_prefix(e.what())) throw;
    throw TemplateError(str_cat("line ", n.line, ": ", e.what()));
  }
}

Interpreter::Flow Interpreter::exec_for(const Node& n, Environment& env, std::string& out) {
  Environment scope(&env);
  const Node* test = nullptr;
  Value iterable;
  if (n.b->kind == NodeKind::kSelect) {
    iterable = eval(*n.b->a, scope);
    test = n.b->b.get();
  } else {
    iterable = eval(*n.b, scope);
  }
  if (!iterable.is_array() && !iterable.is_object()) {
    eval_fail(str_cat("expected an iterable or object in for loop, got ", kind_name(iterable.kind())));
  }
  std::vector<Value> source;
  if (iterable.is_object()) {
    for (const auto& [k, v] : iterable.as_object().entries) source.push_back(Value::string(k));
  } else {
    source = iterable.as_array();
  }
  const Node& target = *n.a;
  auto bind = [&](Environment& into, const Value& item) {
    if (target.kind == NodeKind::kIdentifier) {
      into.set(target.str, item);
      return;
    }
    if (!item.is_array()) eval_fail(str_cat("cannot unpack non-iterable ", kind_name(item.kind())));
    const auto& parts = item.as_array();
    if (parts.size() != target.list.size()) {
      eval_fail(str_cat("too ", target.list.size() > parts.size() ? "few" : "many", " items to unpack"));
    }
    for (size_t j = 0; j < parts.size(); ++j) {
      if (target.list[j]->kind != NodeKind::kIdentifier) eval_fail("cannot unpack into a non-name");
      into.set(target.list[j]->str, parts[j]);
    }
  };
  std::vector<Value> items;
  for (const Value& item : source) {
    if (test) {
      Environment loop_scope(&scope);
      bind(loop_scope, item);
      if (!eval(*test, loop_scope).truthy()) continue;
    }
    items.push_back(item);
  }
  bool no_iteration = true;
  const double len = static_cast<double>(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    Object loop;
    double d = static_cast<double>(i);
    loop.set("index", Value::integer(d + 1));
    loop.set("index0", Value::integer(d));
    loop.set("revindex", Value::integer(len - d));
    loop.set("revindex0", Value::integer(len - d - 1));
    loop.set("first", Value::boolean(i == 0));
    loop.set("last", Value::boolean(i + 1 == items.size()));
    loop.set("length", Value::integer(len));
    loop.set("previtem", i > 0 ? items[i - 1] : Value());
    loop.set("nextitem", i + 1 < items.size() ? items[i + 1] : Value());
    scope.set("loop", Value::object(std::move(loop)));
    bind(scope, items[i]);
    size_t mark = out.size();
    Flow f = exec_block(n.body, scope, out);
    // The reference unwinds break/continue as exceptions: that iteration's output is lost.
    if (f == Flow::kContinue) {
      out.resize(mark);
      continue;
    }
    if (f == Flow::kBreak) {
      out.resize(mark);
      break;
    }
    no_iteration = false;
  }
  if (no_iteration) {
    Flow f = exec_block(n.alt, scope, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

void Interpreter::exec_set(const Node& n, Environment& env, const Value& rhs) {
  const Node& target = *n.a;
  if (target.kind == NodeKind::kIdentifier) {
    env.set(target.str, rhs);
  } else if (target.kind == NodeKind::kTuple) {
    if (!rhs.is_array()) eval_fail(str_cat("cannot unpack non-iterable ", kind_name(rhs.kind()), " in set"));
    const auto& arr = rhs.as_array();
    if (arr.size() != target.list.size()) {
      eval_fail(str_cat("too ", target.list.size() > arr.size() ? "few" : "many", " items to unpack in set"));
    }
    for (size_t i = 0; i < arr.size(); ++i) {
      if (target.list[i]->kind != NodeKind::kIdentifier) eval_fail("cannot unpack into a non-name in set");
      env.set(target.list[i]->str, arr[i]);
    }
  } else if (target.kind == NodeKind::kMember) {
    Value object = eval(*target.a, env);
    if (!object.is(Kind::kNamespace)) eval_fail("cannot assign an attribute of a non-namespace object");
    if (target.flag || target.b->kind != NodeKind::kIdentifier) {
      eval_fail("cannot assign to a member with a non-name property");
    }
    object.as_object_mut().set(target.b->str, rhs);
  } else {
    eval_fail("invalid target of set");
  }
}

void Interpreter::bind_macro_args(const std::string& display_name, const Node& owner,
                                  std::vector<Value> args, Environment& scope) {
  Object kwargs;
  if (!args.empty() && args.back().is(Kind::kKwargs)) {
    kwargs = args.back().as_object();
    args.pop_back();
  }
  std::vector<std::pair<std::string, const Node*>> pending_defaults;
  for (size_t i = 0; i < owner.list.size(); ++i) {
    const Node& p = *owner.list[i];
    const std::string& name = p.str;
    Value v;
    bool have = i < args.size();
    if (have) v = args[i];
    if (!have) {
      for (auto it = kwargs.entries.begin(); it != kwargs.entries.end(); ++it) {
        if (it->first == name) {
          v = it->second;
          have = true;
          kwargs.entries.erase(it);
          break;
        }
      }
    }
    if (!have && p.kind == NodeKind::kKwarg) pending_defaults.emplace_back(name, p.a.get());
    scope.set(name, v);
  }
  if (owner.uses_kwargs) {
    scope.set("kwargs", Value::object(std::move(kwargs)));
  } else if (!kwargs.entries.empty()) {
    eval_fail(str_cat("macro ", display_name, " takes no keyword argument '", kwargs.entries[0].first, "'"));
  }
  if (owner.uses_varargs) {
    Array extra;
    for (size_t i = owner.list.size(); i < args.size(); ++i) extra.push_back(args[i]);
    scope.set("varargs", Value::array(std::move(extra)));
  } else if (args.size() > owner.list.size()) {
    eval_fail(str_cat("macro ", display_name, " takes not more than ", owner.list.size(), " argument(s)"));
  }
  for (const auto& [name, expr] : pending_defaults) scope.set(name, eval(*expr, scope));
}

void Interpreter::define_macro(const Node& n, Environment& env) {
  const Node* node = &n;
  env.set(n.str, Value::function([this, node](std::vector<Value>& args, Environment& caller_env) {
    if (++call_depth_ > kMaxCallDepth) {
      --call_depth_;
      eval_fail(str_cat("macro '", node->str, "' calls nested too deeply"));
    }
    Environment scope(&caller_env);
    std::string out;
    try {
      bind_macro_args("'" + node->str + "'", *node, args, scope);
      exec_block(node->body, scope, out);
    } catch (...) {
      --call_depth_;
      throw;
    }
    --call_depth_;
    return Value::string(std::move(out));
  }));
}

std::string Interpreter::exec_call_block(const Node& n, Environment& env) {
  Environment* def_env = &env;
  const Node* node = &n;
  Value caller = Value::function([this, node, def_env](std::vector<Value>& args, Environment&) {
    Environment scope(def_env);
    bind_macro_args("None", *node, args, scope);
    std::string out;
    exec_block(node->body, scope, out);
    return Value::string(std::move(out));
  });
  std::vector<Value> args = eval_call_args(n.a->list, env, true);
  Value fn = eval(*n.a->a, env);
  if (!fn.is(Kind::kFunction)) eval_fail(str_cat("cannot call a ", kind_name(fn.kind())));
  Environment call_env(&env);
  call_env.set("caller", caller);
  Value r = fn.as_function()(args, call_env);
  return (r.is_null() || r.is_undefined()) ? std::string() : to_output_string(r);
}

// --- expressions --------------------------------------------------------------------------------

std::pair<std::vector<Value>, Object> Interpreter::eval_args(const std::vector<NodePtr>& args,
                                                            Environment& env) {
  std::vector<Value> positional;
  Object keywords;
  for (const NodePtr& a : args) {
    if (a->kind == NodeKind::kSpread) {
      Value v = eval(*a->a, env);
      if (!v.is_array()) eval_fail(str_cat("cannot unpack non-iterable ", kind_name(v.kind())));
      for (const Value& x : v.as_array()) positional.push_back(x);
    } else if (a->kind != NodeKind::kKwarg && a->kind != NodeKind::kKwSpread) {
      positional.push_back(eval(*a, env));
    }
  }
  auto add = [&](const std::string& k, Value v) {
    if (keywords.find(k)) eval_fail(str_cat("got multiple values for keyword argument '", k, "'"));
    keywords.entries.emplace_back(k, std::move(v));
  };
  for (const NodePtr& a : args) {
    if (a->kind == NodeKind::kKwarg) {
      add(a->str, eval(*a->a, env));
    } else if (a->kind == NodeKind::kKwSpread) {
      Value v = eval(*a->a, env);
      if (!v.is_object()) eval_fail(str_cat("argument after ** must be a mapping, not ", kind_name(v.kind())));
      for (const auto& [k, x] : v.as_object().entries) add(k, x);
    }
  }
  return {std::move(positional), std::move(keywords)};
}

std::vector<Value> Interpreter::eval_call_args(const std::vector<NodePtr>& args, Environment& env,
                                               bool always_kwargs) {
  auto [positional, keywords] = eval_args(args, env);
  if (always_kwargs || !keywords.entries.empty()) {
    positional.push_back(Value::object(std::move(keywords), Kind::kKwargs));
  }
  return positional;
}

Value Interpreter::eval(const Node& n, Environment& env) {
  switch (n.kind) {
    case NodeKind::kInt: return Value::integer(n.num);
    case NodeKind::kFloat: return Value::floating(n.num);
    case NodeKind::kString: return Value::string(n.str);
    case NodeKind::kText: return Value::string(n.str);
    case NodeKind::kArray:
    case NodeKind::kTuple: {
      Array items;
      for (const NodePtr& x : n.list) items.push_back(eval(*x, env));
      return Value::array(std::move(items), n.kind == NodeKind::kTuple ? Kind::kTuple : Kind::kArray);
    }
    case NodeKind::kObject: {
      Object obj;
      for (const auto& [k, v] : n.pairs) {
        Value key = eval(*k, env);
        if (!key.is(Kind::kString)) eval_fail(str_cat("dict keys must be strings, got ", kind_name(key.kind())));
        obj.set(key.as_string(), eval(*v, env));
      }
      return Value::object(std::move(obj));
    }
    case NodeKind::kIdentifier: return env.lookup(n.str);
    case NodeKind::kCall: {
      std::vector<Value> args = eval_call_args(n.list, env);
      Value fn = eval(*n.a, env);
      if (!fn.is(Kind::kFunction)) {
        std::string what = n.a->kind == NodeKind::kIdentifier   ? " '" + n.a->str + "'"
                           : n.a->kind == NodeKind::kMember && !n.a->flag ? " '" + n.a->b->str + "'"
                                                                          : std::string();
        eval_fail(str_cat("cannot call", what, ": it is ", kind_name(fn.kind()), ", not a function"));
      }
      return fn.as_function()(args, env);
    }
    case NodeKind::kMember: return eval_member(n, env);
    case NodeKind::kUnary: {
      Value v = eval(*n.a, env);
      if (n.str == "not") return Value::boolean(!v.truthy());
      double sign = n.str == "-" ? -1 : 1;
      if (v.is_number()) {
        return v.is(Kind::kFloat) ? Value::floating(sign * v.as_number())
                                  : Value::integer(sign * v.as_number());
      }
      if (v.is(Kind::kBool)) return Value::integer(sign * (v.as_bool() ? 1 : 0));
      eval_fail(str_cat("unary '", n.str, "' on ", kind_name(v.kind())));
    }
    case NodeKind::kBinary: return eval_binary(n, env);
    case NodeKind::kFilter: return apply_filter(*this, eval(*n.a, env), *n.b, env);
    case NodeKind::kTest: {
      Value v = eval(*n.a, env);
      bool r = run_test(n.str, v, Value());
      return Value::boolean(n.flag ? !r : r);
    }
    case NodeKind::kSelect:
      if (!eval(*n.b, env).truthy()) return Value();
      return eval(*n.a, env);
    case NodeKind::kTernary:
      return eval(*n.a, env).truthy() ? eval(*n.b, env) : eval(*n.c, env);
    default: eval_fail("this statement cannot be used as an expression");
  }
}

Value Interpreter::eval_binary(const Node& n, Environment& env) {
  const std::string& op = n.str;
  Value left = eval(*n.a, env);
  if (op == "and") return left.truthy() ? eval(*n.b, env) : left;
  if (op == "or") return left.truthy() ? left : eval(*n.b, env);
  Value right = eval(*n.b, env);
  if (op == "==") return Value::boolean(js_loose_equal(left, right));
  if (op == "!=") return Value::boolean(!js_loose_equal(left, right));
  if (left.is_undefined() || right.is_undefined()) {
    if (right.is_undefined() && (op == "in" || op == "not in")) return Value::boolean(op == "not in");
    eval_fail(str_cat("cannot apply '", op, "' to an undefined value"));
  }
  if (left.is_null() || right.is_null()) eval_fail(str_cat("cannot apply '", op, "' to none"));
  if (op == "~") return Value::string(js_value_string(left) + js_value_string(right));
  auto numeric_like = [](const Value& v) { return v.is_number() || v.is(Kind::kBool); };
  auto num = [](const Value& v) { return v.is(Kind::kBool) ? (v.as_bool() ? 1.0 : 0.0) : v.as_number(); };
  if (op == "**" && numeric_like(left) && numeric_like(right)) {
    double a = num(left), b = num(right);
    if (a == 0 && b < 0) eval_fail("0.0 cannot be raised to a negative power");
    double r = std::pow(a, b);
    if (!std::isfinite(r)) eval_fail("exponentiation result is not a finite real number");
    bool is_float = left.is(Kind::kFloat) || right.is(Kind::kFloat) || b < 0;
    return is_float ? Value::floating(r) : Value::integer(r);
  }
  if (left.is_number() && right.is_number()) {
    double a = left.as_number(), b = right.as_number();
    bool is_float = left.is(Kind::kFloat) || right.is(Kind::kFloat);
    auto make = [&](double r) { return is_float ? Value::floating(r) : Value::integer(r); };
    if (op == "+") return make(a + b);
    if (op == "-") return make(a - b);
    if (op == "*") return make(a * b);
    if (op == "/") return Value::floating(a / b);
    if (op == "//") return make(std::floor(a / b));
    if (op == "%") return make(std::fmod(a, b));  // JavaScript remainder: sign of the dividend
    if (op == "<") return Value::boolean(a < b);
    if (op == ">") return Value::boolean(a > b);
    if (op == "<=") return Value::boolean(a <= b);
    if (op == ">=") return Value::boolean(a >= b);
  } else if (left.is_array() && right.is_array()) {
    if (op == "+") {
      Array items = left.as_array();
      for (const Value& x : right.as_array()) items.push_back(x);
      return Value::array(std::move(items));
    }
  } else if (right.is_array()) {
    bool member = false;
    for (const Value& x : right.as_array()) {
      if (js_strict_equal(x, left)) {
        member = true;
        break;
      }
    }
    if (op == "in") return Value::boolean(member);
    if (op == "not in") return Value::boolean(!member);
  }
  if (left.is(Kind::kString) && right.is(Kind::kString) && op == "+") {
    // Chat templates join each message's (maybe huge) content with short pieces: a temporary on
    // the left grows in place, anything else is joined in one allocation of the final size.
    const std::string &a = left.as_string(), &b = right.as_string();
    if (std::string* own = left.sole_string()) {
      own->append(b);
      return left;
    }
    std::string joined;
    joined.reserve(a.size() + b.size());
    joined.append(a).append(b);
    return Value::string(std::move(joined));
  }
  if ((left.is(Kind::kString) || right.is(Kind::kString)) && op == "+") {
    return Value::string(js_value_string(left) + js_value_string(right));
  }
  if (left.is(Kind::kString) && right.is(Kind::kString)) {
    bool has = right.as_string().find(left.as_string()) != std::string::npos;
    if (op == "in") return Value::boolean(has);
    if (op == "not in") return Value::boolean(!has);
  }
  if (left.is(Kind::kString) && right.is_object()) {
    bool has = right.as_object().find(left.as_string()) != nullptr;
    if (op == "in") return Value::boolean(has);
    if (op == "not in") return Value::boolean(!has);
  }
  eval_fail(str_cat("unsupported operator '", op, "' between ", kind_name(left.kind()), " and ",
               kind_name(right.kind())));
}

Value Interpreter::eval_slice(const Value& object, const Node& slice, Environment& env) {
  if (!object.is_array() && !object.is(Kind::kString)) eval_fail("only lists and strings can be sliced");
  Value parts[3];
  const Node* nodes[3] = {slice.a.get(), slice.b.get(), slice.c.get()};
  for (int i = 0; i < 3; ++i) {
    if (nodes[i]) parts[i] = eval(*nodes[i], env);
    if (!parts[i].is_undefined() && !parts[i].is(Kind::kInt)) eval_fail("slice bounds must be integers");
  }
  if (object.is_array()) return Value::array(slice_values(object.as_array(), parts[0], parts[1], parts[2]));
  std::vector<Value> chars;
  for (std::string& c : utf8_chars(object.as_string())) chars.push_back(Value::string(std::move(c)));
  std::string out;
  for (const Value& c : slice_values(chars, parts[0], parts[1], parts[2])) out += c.as_string();
  return Value::string(std::move(out));
}

Value Interpreter::eval_member(const Node& n, Environment& env) {
  Value object = eval(*n.a, env);
  Value property;
  if (n.flag) {
    if (n.b->kind == NodeKind::kSlice) return eval_slice(object, *n.b, env);
    property = eval(*n.b, env);
  } else if (n.b->kind == NodeKind::kInt) {
    property = Value::integer(n.b->num);
  } else {
    property = Value::string(n.b->str);
  }
  if (object.is_attribute_container()) {
    if (!property.is(Kind::kString)) {
      eval_fail(str_cat("cannot look up a dict with a ", kind_name(property.kind()), " key"));
    }
    if (const Value* v = object.as_object().find(property.as_string())) return *v;
    return object.is_object() ? builtin_member(object, property.as_string()) : Value();
  }
  if (object.is_array() || object.is(Kind::kString)) {
    if (property.is(Kind::kInt)) {
      double i = property.as_number();
      if (object.is_array()) {
        double len = static_cast<double>(object.as_array().size());
        if (i < 0) i += len;
        if (i < 0 || i >= len) return Value();
        return object.as_array()[static_cast<size_t>(i)];
      }
      std::vector<std::string> chars = utf8_chars(object.as_string());
      double len = static_cast<double>(chars.size());
      if (i < 0) i += len;
      if (i < 0 || i >= len) return Value();
      return Value::string(chars[static_cast<size_t>(i)]);
    }
    if (property.is(Kind::kString)) return builtin_member(object, property.as_string());
    eval_fail(str_cat("cannot index with a ", kind_name(property.kind())));
  }
  if (!property.is(Kind::kString)) eval_fail(str_cat("cannot index a ", kind_name(object.kind())));
  return builtin_member(object, property.as_string());
}

}  // namespace splash::jinja
