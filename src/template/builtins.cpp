// Builtin globals, filters, tests and methods, each with the behaviour @huggingface/jinja gives it
// (which is not always Python's: e.g. `strip('x')` trims whitespace, `capitalize` keeps the rest).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "core/result.h"
#include "template/interpreter.h"
#include "template/parser.h"

namespace splash::jinja {

namespace {

[[noreturn]] void fail(const std::string& what) { throw TemplateError(what); }

const Value* kwarg(const std::vector<Value>& args, const char* name) {
  if (!args.empty() && args.back().is(Kind::kKwargs)) return args.back().as_object().find(name);
  return nullptr;
}

// Positional argument i (ignoring a trailing kwargs bundle), else keyword `name`, else fallback.
Value arg_or(const std::vector<Value>& args, size_t i, const char* name, Value fallback) {
  size_t n_pos = args.size() - ((!args.empty() && args.back().is(Kind::kKwargs)) ? 1 : 0);
  if (i < n_pos) return args[i];
  if (const Value* v = kwarg(args, name)) return *v;
  return fallback;
}

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string title_case(std::string s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (is_word_char(s[i]) && (i == 0 || !is_word_char(s[i - 1])) && s[i] >= 'a' && s[i] <= 'z') {
      s[i] = static_cast<char>(s[i] - 'a' + 'A');
    }
  }
  return s;
}

std::string capitalize(std::string s) {
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 'a' + 'A');
  return s;
}

// str.replace(old, new, count) as the reference implements it (empty `old` inserts between
// code points).
std::string replace_str(const std::string& s, const std::string& old_s, const std::string& new_s,
                        double count) {
  if (count == 0) return s;
  double remaining = count < 0 ? INFINITY : count;
  std::string out;
  if (old_s.empty()) {
    for (const std::string& c : utf8_chars(s)) {
      if (remaining > 0) {
        out += new_s;
        --remaining;
      }
      out += c;
    }
    if (remaining > 0) out += new_s;
    return out;
  }
  size_t pos = 0;
  while (true) {
    size_t hit = s.find(old_s, pos);
    if (hit == std::string::npos || remaining <= 0) break;
    out.append(s, pos, hit - pos);
    out += new_s;
    --remaining;
    pos = hit + old_s.size();
  }
  out.append(s, pos, std::string::npos);
  return out;
}

Value split_str(const std::string& s, const std::vector<Value>& args) {
  Value sep = arg_or(args, 0, "sep", Value::null());
  Value maxsplit_v = arg_or(args, 1, "maxsplit", Value::integer(-1));
  if (!sep.is(Kind::kString) && !sep.is_null()) fail("split(): sep must be a string or none");
  if (!maxsplit_v.is(Kind::kInt)) fail("split(): maxsplit must be an integer");
  double maxsplit = maxsplit_v.as_number();
  Array out;
  if (sep.is_null()) {
    std::string text = js_trim_start(s);
    size_t i = 0;
    while (i < text.size()) {
      size_t start = i;
      while (i < text.size() && !js_space_at(text, i)) ++i;
      if (maxsplit != -1 && static_cast<double>(out.size()) >= maxsplit) {
        out.push_back(Value::string(text.substr(start)));
        break;
      }
      out.push_back(Value::string(text.substr(start, i - start)));
      while (size_t n = js_space_at(text, i)) i += n;
    }
    return Value::array(std::move(out));
  }
  const std::string& d = sep.as_string();
  if (d.empty()) fail("split(): empty separator");
  std::vector<std::string> parts;
  size_t pos = 0;
  while (true) {
    size_t hit = s.find(d, pos);
    if (hit == std::string::npos) break;
    parts.push_back(s.substr(pos, hit - pos));
    pos = hit + d.size();
  }
  parts.push_back(s.substr(pos));
  if (maxsplit != -1 && static_cast<double>(parts.size()) > maxsplit) {
    size_t keep = static_cast<size_t>(std::max(0.0, maxsplit));
    std::string rest;
    for (size_t i = keep; i < parts.size(); ++i) {
      if (i > keep) rest += d;
      rest += parts[i];
    }
    parts.resize(keep);
    parts.push_back(rest);
  }
  for (std::string& p : parts) out.push_back(Value::string(std::move(p)));
  return Value::array(std::move(out));
}

Value affix_test(const std::string& s, const std::vector<Value>& args, bool prefix) {
  const char* what = prefix ? "startswith" : "endswith";
  if (args.empty()) fail(str_cat(what, "() requires an argument"));
  auto match = [&](const std::string& p) {
    if (p.size() > s.size()) return false;
    return prefix ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  if (args[0].is(Kind::kString)) return Value::boolean(match(args[0].as_string()));
  if (args[0].is_array()) {
    for (const Value& p : args[0].as_array()) {
      if (!p.is(Kind::kString)) fail(str_cat(what, "() tuple elements must be strings"));
      if (match(p.as_string())) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  fail(str_cat(what, "() argument must be a string or tuple of strings"));
}

Value string_replace(const std::string& s, const std::vector<Value>& args) {
  size_t n_pos = args.size() - ((!args.empty() && args.back().is(Kind::kKwargs)) ? 1 : 0);
  if (n_pos < 2) fail("replace() requires two arguments");
  if (!args[0].is(Kind::kString) || !args[1].is(Kind::kString)) fail("replace() arguments must be strings");
  Value count = arg_or(args, 2, "count", Value::null());
  if (!count.is(Kind::kInt) && !count.is_null()) fail("replace() count must be an integer or none");
  return Value::string(replace_str(s, args[0].as_string(), args[1].as_string(),
                                   count.is_null() ? -1 : count.as_number()));
}

// Python's str.find / str.count over bytes of UTF-8 (positions count code points).
Value string_find(const std::string& s, const std::vector<Value>& args, bool count) {
  if (args.empty() || !args[0].is(Kind::kString)) fail(str_cat(count ? "count" : "find", "() needs a string"));
  const std::string& needle = args[0].as_string();
  if (!count) {
    size_t hit = s.find(needle);
    if (hit == std::string::npos) return Value::integer(-1);
    return Value::integer(static_cast<double>(utf8_chars(s.substr(0, hit)).size()));
  }
  if (needle.empty()) return Value::integer(static_cast<double>(utf8_chars(s).size() + 1));
  double n = 0;
  for (size_t pos = s.find(needle); pos != std::string::npos; pos = s.find(needle, pos + needle.size())) ++n;
  return Value::integer(n);
}

Value fn(Function f) { return Value::function(std::move(f)); }

Value object_items(const Value& o) {
  Array out;
  for (const auto& [k, v] : o.as_object().entries) out.push_back(Value::array({Value::string(k), v}));
  return Value::array(std::move(out));
}

Value dictsort(const Value& o, const std::vector<Value>& args) {
  Value case_sensitive = arg_or(args, 0, "case_sensitive", Value::boolean(false));
  Value by = arg_or(args, 1, "by", Value::string("key"));
  Value reverse = arg_or(args, 2, "reverse", Value::boolean(false));
  if (!case_sensitive.is(Kind::kBool)) fail("dictsort: case_sensitive must be a boolean");
  if (!by.is(Kind::kString) || (by.as_string() != "key" && by.as_string() != "value")) {
    fail("dictsort: by must be 'key' or 'value'");
  }
  if (!reverse.is(Kind::kBool)) fail("dictsort: reverse must be a boolean");
  Array items = object_items(o).as_array();
  size_t idx = by.as_string() == "key" ? 0 : 1;
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    int r = compare_values(a.as_array()[idx], b.as_array()[idx], case_sensitive.as_bool());
    return reverse.as_bool() ? r > 0 : r < 0;
  });
  return Value::array(std::move(items));
}

Value get_attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (v.is_attribute_container()) {
      const Value* x = v.as_object().find(part);
      v = x ? *x : Value();
    } else if (v.is_array()) {
      char* end = nullptr;
      long idx = std::strtol(part.c_str(), &end, 10);
      if (end == part.c_str() || idx < 0 || static_cast<size_t>(idx) >= v.as_array().size()) return Value();
      v = v.as_array()[static_cast<size_t>(idx)];
    } else {
      return Value();
    }
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

std::string strftime_js(const std::string& format, std::chrono::system_clock::time_point now) {
  static const char* kMonths[] = {"January", "February", "March",     "April",   "May",      "June",
                                  "July",    "August",   "September", "October", "November", "December"};
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  localtime_r(&t, &tm);
  auto pad2 = [](int n) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "%02d", n);
    return std::string(buf);
  };
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      out += format[i];
      continue;
    }
    char c = format[i + 1];
    switch (c) {
      case 'Y': out += std::to_string(tm.tm_year + 1900); break;
      case 'm': out += pad2(tm.tm_mon + 1); break;
      case 'd': out += pad2(tm.tm_mday); break;
      case 'b': out += std::string(kMonths[tm.tm_mon]).substr(0, 3); break;
      case 'B': out += kMonths[tm.tm_mon]; break;
      case 'H': out += pad2(tm.tm_hour); break;
      case 'M': out += pad2(tm.tm_min); break;
      case '%': out += '%'; break;
      default: out += format[i]; continue;  // unknown directives stay as written
    }
    ++i;
  }
  return out;
}

}  // namespace

// --- globals ------------------------------------------------------------------------------------

void install_globals(Environment& env, std::chrono::system_clock::time_point now) {
  env.set("false", Value::boolean(false));
  env.set("true", Value::boolean(true));
  env.set("none", Value::null());
  env.set("False", Value::boolean(false));
  env.set("True", Value::boolean(true));
  env.set("None", Value::null());
  env.set("raise_exception", fn([](std::vector<Value>& args, Environment&) -> Value {
            std::string msg = args.empty() ? std::string() : to_output_string(args[0]);
            fail(str_cat("template raised an exception: ", msg));
          }));
  env.set("range", fn([](std::vector<Value>& args, Environment&) {
            for (const Value& a : args) {
              if (!a.is_number()) fail("range() arguments must be numbers");
            }
            if (args.empty()) fail("range() expects at least one argument");
            double start = 0, stop = args[0].as_number(), step = 1;
            if (args.size() >= 2) {
              start = args[0].as_number();
              stop = args[1].as_number();
            }
            if (args.size() >= 3) step = args[2].as_number();
            if (step == 0) fail("range() step must not be zero");
            if (std::fabs((stop - start) / step) > 1e7) fail("range() too large");
            Array out;
            for (double i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(Value::integer(i));
            return Value::array(std::move(out));
          }));
  env.set("strftime_now", fn([now](std::vector<Value>& args, Environment&) {
            if (args.empty() || !args[0].is(Kind::kString)) fail("strftime_now() expects a format string");
            return Value::string(strftime_js(args[0].as_string(), now));
          }));
  env.set("namespace", fn([](std::vector<Value>& args, Environment&) {
            Object entries;
            std::vector<Value> positional = args;
            Object kwargs;
            if (!positional.empty() && positional.back().is(Kind::kKwargs)) {
              kwargs = positional.back().as_object();
              positional.pop_back();
            }
            if (positional.size() > 1) fail("namespace() expects at most 1 positional argument");
            if (positional.size() == 1) {
              const Value& src = positional[0];
              if (src.is_object()) {
                for (const auto& [k, v] : src.as_object().entries) entries.set(k, v);
              } else if (src.is_array()) {
                for (const Value& pair : src.as_array()) {
                  if (!pair.is_array() || pair.as_array().size() != 2 || !pair.as_array()[0].is(Kind::kString)) {
                    fail("namespace() expects [key, value] pairs with string keys");
                  }
                  entries.set(pair.as_array()[0].as_string(), pair.as_array()[1]);
                }
              } else {
                fail(str_cat("'", kind_name(src.kind()), "' object is not iterable"));
              }
            }
            for (const auto& [k, v] : kwargs.entries) entries.set(k, v);
            return Value::object(std::move(entries), Kind::kNamespace);
          }));
}

// --- tests --------------------------------------------------------------------------------------

bool run_test(const std::string& name, const Value& v, const Value& arg) {
  if (name == "boolean") return v.is(Kind::kBool);
  if (name == "callable") return v.is(Kind::kFunction);
  if (name == "odd" || name == "even") {
    if (!v.is(Kind::kInt)) fail(str_cat("cannot ", name, " on ", kind_name(v.kind())));
    bool odd = std::fmod(v.as_number(), 2) != 0;
    return name == "odd" ? odd : !odd;
  }
  if (name == "false") return v.is(Kind::kBool) && !v.as_bool();
  if (name == "true") return v.is(Kind::kBool) && v.as_bool();
  if (name == "none") return v.is_null();
  if (name == "string") return v.is(Kind::kString);
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is(Kind::kInt);
  if (name == "iterable") return v.is(Kind::kArray) || v.is(Kind::kString);
  if (name == "mapping") return v.is_object();
  if (name == "sequence") return v.is_array() || v.is_object() || v.is(Kind::kString);
  if (name == "lower") return v.is(Kind::kString) && v.as_string() == ascii_lower(v.as_string());
  if (name == "upper") return v.is(Kind::kString) && v.as_string() == ascii_upper(v.as_string());
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "equalto" || name == "eq") return js_strict_equal(v, arg);
  fail(str_cat("unknown test '", name, "'"));
}

int compare_values(const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_null() && b.is_null()) return 0;
  if (a.is_null() || b.is_null()) fail(str_cat("cannot compare ", kind_name(a.kind()), " with ", kind_name(b.kind())));
  if (a.is_undefined() && b.is_undefined()) return 0;
  if (a.is_undefined() || b.is_undefined()) {
    fail(str_cat("cannot compare ", kind_name(a.kind()), " with ", kind_name(b.kind())));
  }
  auto numeric = [](const Value& v) { return v.is_number() || v.is(Kind::kBool); };
  auto num = [](const Value& v) { return v.is(Kind::kBool) ? (v.as_bool() ? 1.0 : 0.0) : v.as_number(); };
  if (numeric(a) && numeric(b)) return num(a) < num(b) ? -1 : num(a) > num(b) ? 1 : 0;
  if (a.kind() != b.kind()) fail(str_cat("cannot compare ", kind_name(a.kind()), " and ", kind_name(b.kind())));
  if (!a.is(Kind::kString)) fail(str_cat("cannot compare values of type ", kind_name(a.kind())));
  std::string x = case_sensitive ? a.as_string() : ascii_lower(a.as_string());
  std::string y = case_sensitive ? b.as_string() : ascii_lower(b.as_string());
  return x < y ? -1 : x > y ? 1 : 0;
}

// --- methods ------------------------------------------------------------------------------------

Value builtin_member(const Value& object, const std::string& name) {
  if (object.is(Kind::kString)) {
    const std::string& s = object.as_string();
    if (name == "length") return Value::integer(static_cast<double>(utf16_length(s)));
    // The bound method holds the Value (its text is shared), not a copy of the text.
    auto method = [&](auto body) {
      return fn([self = object, body](std::vector<Value>& args, Environment&) { return body(self.as_string(), args); });
    };
    using Args = std::vector<Value>;
    if (name == "upper") return method([](const std::string& x, Args&) { return Value::string(ascii_upper(x)); });
    if (name == "lower") return method([](const std::string& x, Args&) { return Value::string(ascii_lower(x)); });
    // The reference ignores strip's argument and trims whitespace; kept for byte-exact output.
    if (name == "strip") return method([](const std::string& x, Args&) { return Value::string(js_trim(x)); });
    if (name == "lstrip") return method([](const std::string& x, Args&) { return Value::string(js_trim_start(x)); });
    if (name == "rstrip") return method([](const std::string& x, Args&) { return Value::string(js_trim_end(x)); });
    if (name == "title") return method([](const std::string& x, Args&) { return Value::string(title_case(x)); });
    if (name == "capitalize") return method([](const std::string& x, Args&) { return Value::string(capitalize(x)); });
    if (name == "startswith") return method([](const std::string& x, Args& a) { return affix_test(x, a, true); });
    if (name == "endswith") return method([](const std::string& x, Args& a) { return affix_test(x, a, false); });
    if (name == "split") return method([](const std::string& x, Args& a) { return split_str(x, a); });
    if (name == "replace") return method([](const std::string& x, Args& a) { return string_replace(x, a); });
    if (name == "find") return method([](const std::string& x, Args& a) { return string_find(x, a, false); });
    if (name == "count") return method([](const std::string& x, Args& a) { return string_find(x, a, true); });
    return Value();
  }
  if (object.is_array()) {
    if (name == "length") return Value::integer(static_cast<double>(object.as_array().size()));
    return Value();
  }
  if (object.is_object()) {
    Value self = object;
    if (name == "get") {
      return fn([self](std::vector<Value>& args, Environment&) {
        if (args.empty() || !args[0].is(Kind::kString)) fail("dict.get(): key must be a string");
        if (const Value* v = self.as_object().find(args[0].as_string())) return *v;
        return args.size() > 1 ? args[1] : Value::null();
      });
    }
    if (name == "items") return fn([self](std::vector<Value>&, Environment&) { return object_items(self); });
    if (name == "keys") {
      return fn([self](std::vector<Value>&, Environment&) {
        Array out;
        for (const auto& [k, v] : self.as_object().entries) out.push_back(Value::string(k));
        return Value::array(std::move(out));
      });
    }
    if (name == "values") {
      return fn([self](std::vector<Value>&, Environment&) {
        Array out;
        for (const auto& [k, v] : self.as_object().entries) out.push_back(v);
        return Value::array(std::move(out));
      });
    }
    if (name == "dictsort") {
      return fn([self](std::vector<Value>& args, Environment&) { return dictsort(self, args); });
    }
  }
  return Value();
}

// --- filters ------------------------------------------------------------------------------------

namespace {

Value filter_plain(const Value& v, const std::string& f) {
  if (v.is_array()) {
    const Array& a = v.as_array();
    if (f == "list") return v;
    if (f == "first") return a.empty() ? Value() : a.front();
    if (f == "last") return a.empty() ? Value() : a.back();
    if (f == "length") return Value::integer(static_cast<double>(a.size()));
    if (f == "reverse") return Value::array(Array(a.rbegin(), a.rend()));
    if (f == "sort") {
      Array s = a;
      std::stable_sort(s.begin(), s.end(), [](const Value& x, const Value& y) { return compare_values(x, y, false) < 0; });
      return Value::array(std::move(s));
    }
    if (f == "join") {
      std::string out;
      for (const Value& x : a) {
        if (!x.is_null() && !x.is_undefined()) out += js_value_string(x);
      }
      return Value::string(out);
    }
    if (f == "string") return Value::string(to_json(v, JsonOptions{}, false));
    if (f == "unique") {
      Array out;
      for (const Value& x : a) {
        bool seen = std::any_of(out.begin(), out.end(), [&](const Value& y) { return js_strict_equal(x, y); });
        if (!seen) out.push_back(x);
      }
      return Value::array(std::move(out));
    }
  } else if (v.is(Kind::kString)) {
    const std::string& s = v.as_string();
    if (f == "length") return Value::integer(static_cast<double>(utf16_length(s)));
    if (f == "upper") return Value::string(ascii_upper(s));
    if (f == "lower") return Value::string(ascii_lower(s));
    if (f == "title") return Value::string(title_case(s));
    if (f == "capitalize") return Value::string(capitalize(s));
    if (f == "trim") return Value::string(js_trim(s));
    if (f == "indent") {
      std::string out;
      size_t start = 0;
      bool first = true;
      while (true) {
        size_t nl = s.find('\n', start);
        std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
        if (!first) out += '\n';
        if (!first && !line.empty()) out += "    ";
        out += line;
        first = false;
        if (nl == std::string::npos) break;
        start = nl + 1;
      }
      return Value::string(out);
    }
    if (f == "join" || f == "string") return v;
    if (f == "int" || f == "float") {
      // parseInt / parseFloat: leading number, 0 when there is none.
      std::string t = js_trim_start(s);
      char* end = nullptr;
      if (f == "int") {
        double r = static_cast<double>(std::strtoll(t.c_str(), &end, 10));
        return Value::integer(end == t.c_str() ? 0 : r);
      }
      double r = std::strtod(t.c_str(), &end);
      return Value::floating(end == t.c_str() || std::isnan(r) ? 0 : r);
    }
  } else if (v.is_number()) {
    if (f == "abs") return v.is(Kind::kInt) ? Value::integer(std::fabs(v.as_number())) : Value::floating(std::fabs(v.as_number()));
    if (f == "int") return Value::integer(std::floor(v.as_number()));
    if (f == "float") return Value::floating(v.as_number());
    if (f == "string") return Value::string(to_output_string(v));
  } else if (v.is_object()) {
    if (f == "items") return object_items(v);
    if (f == "length") return Value::integer(static_cast<double>(v.as_object().entries.size()));
    Value b = builtin_member(v, f);
    if (b.is(Kind::kFunction)) {
      std::vector<Value> none;
      Environment scratch;
      return b.as_function()(none, scratch);
    }
  } else if (v.is(Kind::kBool)) {
    if (f == "bool") return v;
    if (f == "int") return Value::integer(v.as_bool() ? 1 : 0);
    if (f == "float") return Value::floating(v.as_bool() ? 1 : 0);
    if (f == "string") return Value::string(v.as_bool() ? "true" : "false");
  }
  fail(str_cat("filter '", f, "' cannot be applied to ", kind_name(v.kind())));
}

JsonOptions tojson_options(const std::vector<Value>& args) {
  JsonOptions o;
  Value indent = arg_or(args, 99, "indent", Value::null());
  if (!indent.is(Kind::kInt) && !indent.is_null()) fail("tojson: indent must be an integer");
  if (indent.is(Kind::kInt)) o.indent = static_cast<int>(std::clamp(indent.as_number(), 0.0, 64.0));
  Value ascii = arg_or(args, 99, "ensure_ascii", Value::boolean(false));
  if (!ascii.is(Kind::kBool)) fail("tojson: ensure_ascii must be a boolean");
  o.ensure_ascii = ascii.as_bool();
  Value sort = arg_or(args, 99, "sort_keys", Value::boolean(false));
  if (!sort.is(Kind::kBool)) fail("tojson: sort_keys must be a boolean");
  o.sort_keys = sort.as_bool();
  Value seps = arg_or(args, 99, "separators", Value::null());
  if (seps.is_array()) {
    const Array& s = seps.as_array();
    if (s.size() != 2 || !s[0].is(Kind::kString) || !s[1].is(Kind::kString)) {
      fail("tojson: separators must be a tuple of two strings");
    }
    o.has_separators = true;
    o.item_separator = s[0].as_string();
    o.key_separator = s[1].as_string();
  } else if (!seps.is_null()) {
    fail("tojson: separators must be a tuple of two strings");
  }
  return o;
}

Value select_attr(Interpreter& in, const Value& v, const Node& call, Environment& env, bool select) {
  const std::string& f = call.a->str;
  for (const Value& item : v.as_array()) {
    if (!item.is_attribute_container()) fail(str_cat(f, " can only be applied to a list of dicts"));
  }
  for (const NodePtr& a : call.list) {
    if (a->kind != NodeKind::kString) fail(str_cat("arguments of ", f, " must be string literals"));
  }
  if (call.list.empty()) fail(str_cat(f, " needs an attribute name"));
  std::string attr = in.eval(*call.list[0], env).as_string();
  std::string test = call.list.size() > 1 ? call.list[1]->str : std::string();
  Value arg = call.list.size() > 2 ? in.eval(*call.list[2], env) : Value();
  if (!test.empty() && !is_known_test(test)) fail(str_cat("unknown test '", test, "'"));
  Array out;
  for (const Value& item : v.as_array()) {
    const Value* a = item.as_object().find(attr);
    bool r = a ? (test.empty() ? a->truthy() : run_test(test, *a, arg)) : false;
    if (r == select) out.push_back(item);
  }
  return Value::array(std::move(out));
}

}  // namespace

Value apply_filter(Interpreter& in, const Value& v, const Node& filter, Environment& env) {
  if (filter.kind == NodeKind::kIdentifier) {
    const std::string& f = filter.str;
    if (f == "safe") return v;
    if (f == "tojson") return Value::string(to_json(v, JsonOptions{}));
    return filter_plain(v, f);
  }
  const std::string& f = filter.a->str;
  if (f == "tojson") {
    std::vector<Value> args = in.eval_call_args(filter.list, env);
    return Value::string(to_json(v, tojson_options(args)));
  }
  if (f == "join") {
    std::vector<std::string> parts;
    if (v.is(Kind::kString)) {
      parts = utf8_chars(v.as_string());
    } else if (v.is_array()) {
      for (const Value& x : v.as_array()) parts.push_back(x.is_null() || x.is_undefined() ? "" : js_value_string(x));
    } else {
      fail(str_cat("filter 'join' cannot be applied to ", kind_name(v.kind())));
    }
    std::vector<Value> args = in.eval_call_args(filter.list, env);
    Value sep = arg_or(args, 0, "separator", Value::string(""));
    if (!sep.is(Kind::kString)) fail("join: separator must be a string");
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i) out += sep.as_string();
      out += parts[i];
    }
    return Value::string(out);
  }
  if (f == "int" || f == "float") {
    std::vector<Value> args = in.eval_call_args(filter.list, env);
    Value fallback = arg_or(args, 0, "default", f == "int" ? Value::integer(0) : Value::floating(0));
    if (v.is(Kind::kString)) {
      std::string t = js_trim_start(v.as_string());
      char* end = nullptr;
      double r = f == "int" ? static_cast<double>(std::strtoll(t.c_str(), &end, 10)) : std::strtod(t.c_str(), &end);
      if (end == t.c_str()) return fallback;
      return f == "int" ? Value::integer(r) : Value::floating(r);
    }
    if (v.is_number()) return v;
    if (v.is(Kind::kBool)) return f == "int" ? Value::integer(v.as_bool()) : Value::floating(v.as_bool());
    fail(str_cat("filter '", f, "' cannot be applied to ", kind_name(v.kind())));
  }
  if (f == "default") {
    std::vector<Value> args = in.eval_call_args(filter.list, env);
    size_t n_pos = args.size() - ((!args.empty() && args.back().is(Kind::kKwargs)) ? 1 : 0);
    Value fallback = n_pos > 0 ? args[0] : Value::string("");
    Value boolean = arg_or(args, 1, "boolean", Value::boolean(false));
    if (!boolean.is(Kind::kBool)) fail("default: the boolean flag must be a boolean");
    if (v.is_undefined() || (boolean.as_bool() && !v.truthy())) return fallback;
    return v;
  }
  if (v.is_array()) {
    if (f == "sort") {
      std::vector<Value> args = in.eval_call_args(filter.list, env);
      Value reverse = arg_or(args, 0, "reverse", Value::boolean(false));
      Value case_sensitive = arg_or(args, 1, "case_sensitive", Value::boolean(false));
      Value attribute = arg_or(args, 2, "attribute", Value::null());
      if (!reverse.is(Kind::kBool) || !case_sensitive.is(Kind::kBool)) fail("sort: flags must be booleans");
      auto key = [&](const Value& item) {
        if (attribute.is_null()) return item;
        return get_attribute_path(item, attribute.is(Kind::kInt) ? js_number_string(attribute.as_number())
                                                                 : attribute.as_string());
      };
      Array s = v.as_array();
      std::stable_sort(s.begin(), s.end(), [&](const Value& a, const Value& b) {
        int r = compare_values(key(a), key(b), case_sensitive.as_bool());
        return reverse.as_bool() ? r > 0 : r < 0;
      });
      return Value::array(std::move(s));
    }
    if (f == "selectattr" || f == "rejectattr") return select_attr(in, v, filter, env, f == "selectattr");
    if (f == "map") {
      std::vector<Value> args = in.eval_call_args(filter.list, env);
      const Value* attr = kwarg(args, "attribute");
      if (!attr) fail("map without attribute= is not supported");
      if (!attr->is(Kind::kString)) fail("map: attribute must be a string");
      const Value* fallback = kwarg(args, "default");
      Array out;
      for (const Value& item : v.as_array()) {
        if (!item.is_attribute_container()) fail("map: items must be dicts");
        Value x = get_attribute_path(item, attr->as_string());
        out.push_back(x.is_undefined() && fallback ? *fallback : x);
      }
      return Value::array(std::move(out));
    }
  } else if (v.is(Kind::kString)) {
    if (f == "indent") {
      std::vector<Value> args = in.eval_call_args(filter.list, env);
      Value width = arg_or(args, 0, "width", Value::integer(4));
      if (!width.is(Kind::kInt)) fail("indent: width must be an integer");
      bool first = arg_or(args, 1, "first", Value::boolean(false)).truthy();
      bool blank = arg_or(args, 2, "blank", Value::boolean(false)).truthy();
      std::string pad(static_cast<size_t>(std::clamp(width.as_number(), 0.0, 1024.0)), ' ');
      const std::string& s = v.as_string();
      std::string out;
      size_t start = 0;
      for (size_t i = 0;; ++i) {
        size_t nl = s.find('\n', start);
        std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
        if (i) out += '\n';
        if (!((!first && i == 0) || (!blank && line.empty()))) out += pad;
        out += line;
        if (nl == std::string::npos) break;
        start = nl + 1;
      }
      return Value::string(out);
    }
    if (f == "replace") return string_replace(v.as_string(), in.eval_call_args(filter.list, env, true));
  } else if (v.is_object()) {
    Value b = builtin_member(v, f);
    if (b.is(Kind::kFunction)) {
      std::vector<Value> args = in.eval_call_args(filter.list, env);
      return b.as_function()(args, env);
    }
  }
  fail(str_cat("filter '", f, "' cannot be applied to ", kind_name(v.kind())));
}

}  // namespace splash::jinja
