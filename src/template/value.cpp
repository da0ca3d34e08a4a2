#include "template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace splash::jinja {

// --- Object / Value -----------------------------------------------------------------------------

const Value* Object::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Object::set(std::string key, Value value) {
  for (auto& [k, v] : entries) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

Value Value::null() {
  Value v;
  v.kind_ = Kind::kNull;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.bool_ = b;
  return v;
}
Value Value::integer(double n) {
  Value v;
  v.kind_ = Kind::kInt;
  v.num_ = n;
  return v;
}
Value Value::floating(double n) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.num_ = n;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.str_ = std::make_shared<std::string>(std::move(s));
  return v;
}

const std::string& Value::as_string() const {
  static const std::string kEmpty;
  return str_ ? *str_ : kEmpty;
}

std::string* Value::sole_string() { return kind_ == Kind::kString && str_ && str_.use_count() == 1 ? str_.get() : nullptr; }
Value Value::array(Array items, Kind kind) {
  Value v;
  v.kind_ = kind;
  v.arr_ = std::make_shared<Array>(std::move(items));
  return v;
}
Value Value::object(Object obj, Kind kind) {
  Value v;
  v.kind_ = kind;
  v.obj_ = std::make_shared<Object>(std::move(obj));
  return v;
}
Value Value::function(Function fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.fn_ = std::make_shared<Function>(std::move(fn));
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNull:
      return false;
    case Kind::kBool:
      return bool_;
    case Kind::kInt:
    case Kind::kFloat:
      return num_ != 0 && !std::isnan(num_);
    case Kind::kString:
      return !as_string().empty();
    case Kind::kArray:
    case Kind::kTuple:
      return !arr_->empty();
    case Kind::kObject:
    case Kind::kKwargs:
      return !obj_->entries.empty();
    case Kind::kNamespace:
    case Kind::kFunction:
      return true;
  }
  return false;
}

bool Value::same_identity(const Value& other) const {
  if (arr_ || other.arr_) return arr_ == other.arr_;
  if (obj_ || other.obj_) return obj_ == other.obj_;
  if (fn_ || other.fn_) return fn_ == other.fn_;
  return false;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::kUndefined: return "UndefinedValue";
    case Kind::kNull: return "NullValue";
    case Kind::kBool: return "BooleanValue";
    case Kind::kInt: return "IntegerValue";
    case Kind::kFloat: return "FloatValue";
    case Kind::kString: return "StringValue";
    case Kind::kArray: return "ArrayValue";
    case Kind::kTuple: return "TupleValue";
    case Kind::kObject: return "ObjectValue";
    case Kind::kKwargs: return "KeywordArgumentsValue";
    case Kind::kNamespace: return "NamespaceValue";
    case Kind::kFunction: return "FunctionValue";
  }
  return "?";
}

// --- numbers ------------------------------------------------------------------------------------

std::string js_number_string(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (v == 0) return "0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), std::fabs(v), std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  size_t e = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  int exp10 = std::atoi(sci.c_str() + e + 1);
  int k = static_cast<int>(digits.size());
  int n = exp10 + 1;
  std::string out;
  if (k <= n && n <= 21) {
    out = digits;
    out.append(static_cast<size_t>(n - k), '0');
  } else if (0 < n && n <= 21) {
    out = digits.substr(0, n);
    out += '.';
    out += digits.substr(n);
  } else if (-6 < n && n <= 0) {
    out = "0.";
    out.append(static_cast<size_t>(-n), '0');
    out += digits;
  } else {
    out = digits.substr(0, 1);
    if (k > 1) {
      out += '.';
      out += digits.substr(1);
    }
    out += (n - 1 >= 0) ? "e+" : "e-";
    out += std::to_string(std::abs(n - 1));
  }
  if (v < 0) out.insert(out.begin(), '-');
  return out;
}

namespace {

// JavaScript ToNumber on a string (Number("...")), enough for loose equality.
double js_string_to_number(const std::string& s) {
  std::string t = js_trim(s);
  if (t.empty()) return 0;
  if (t == "Infinity" || t == "+Infinity") return INFINITY;
  if (t == "-Infinity") return -INFINITY;
  for (char c : t) {
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' ||
          c == '+' || c == '-')) {
      return NAN;
    }
  }
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size() ? v : NAN;
}

}  // namespace

// --- printing -----------------------------------------------------------------------------------

std::string to_output_string(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNull: return "null";
    case Kind::kBool: return v.as_bool() ? "true" : "false";
    case Kind::kInt: return js_number_string(v.as_number());
    case Kind::kFloat: {
      double x = v.as_number();
      if (x == 0 && std::signbit(x)) return "-0.0";
      if (std::isfinite(x) && x == std::trunc(x) && std::fabs(x) < 1e21) {
        char buf[400];
        std::snprintf(buf, sizeof(buf), "%.1f", x);
        return buf;
      }
      return js_number_string(x);
    }
    case Kind::kString: return v.as_string();
    case Kind::kArray:
    case Kind::kTuple:
    case Kind::kObject:
    case Kind::kKwargs:
    case Kind::kNamespace:
      return to_json(v, JsonOptions{}, false);
    case Kind::kFunction:
      throw TemplateError("cannot print a function value");
  }
  return "";
}

std::string js_value_string(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNull: return "null";
    case Kind::kBool: return v.as_bool() ? "true" : "false";
    case Kind::kInt:
    case Kind::kFloat: return js_number_string(v.as_number());
    case Kind::kString: return v.as_string();
    case Kind::kArray:
    case Kind::kTuple: {
      // A JavaScript array of runtime values: Array#toString joins their own toString().
      std::string out;
      for (size_t i = 0; i < v.as_array().size(); ++i) {
        if (i) out += ",";
        out += to_output_string(v.as_array()[i]);
      }
      return out;
    }
    case Kind::kObject:
    case Kind::kKwargs:
    case Kind::kNamespace: return "[object Map]";
    case Kind::kFunction: throw TemplateError("cannot convert a function to a string");
  }
  return "";
}

bool js_strict_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.as_number() == b.as_number();
  if (a.kind() != b.kind()) {
    bool a_arr = a.is_array(), b_arr = b.is_array();
    if (a_arr && b_arr) return a.same_identity(b);
    bool a_obj = a.is_object(), b_obj = b.is_object();
    if (a_obj && b_obj) return a.same_identity(b);
    return false;
  }
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNull: return true;
    case Kind::kBool: return a.as_bool() == b.as_bool();
    case Kind::kString: return a.as_string() == b.as_string();
    default: return a.same_identity(b);
  }
}

bool js_loose_equal(const Value& a, const Value& b) {
  bool a_nullish = a.is_undefined() || a.is_null();
  bool b_nullish = b.is_undefined() || b.is_null();
  if (a_nullish || b_nullish) return a_nullish && b_nullish;
  auto is_container = [](const Value& v) {
    return v.is_array() || v.is_attribute_container() || v.is(Kind::kFunction);
  };
  if (is_container(a) && is_container(b)) return a.same_identity(b);
  // Reduce both sides to a JavaScript primitive: number, or string.
  struct Prim {
    bool is_string;
    std::string s;
    double n;
  };
  auto prim = [&](const Value& v) -> Prim {
    if (v.is(Kind::kString)) return {true, v.as_string(), 0};
    if (v.is(Kind::kBool)) return {false, "", v.as_bool() ? 1.0 : 0.0};
    if (v.is_number()) return {false, "", v.as_number()};
    return {true, js_value_string(v), 0};
  };
  Prim pa = prim(a), pb = prim(b);
  if (pa.is_string && pb.is_string) return pa.s == pb.s;
  double na = pa.is_string ? js_string_to_number(pa.s) : pa.n;
  double nb = pb.is_string ? js_string_to_number(pb.s) : pb.n;
  return na == nb;
}

// --- JSON ---------------------------------------------------------------------------------------

std::string js_json_quote(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[16];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += "\"";
  return out;
}

namespace {

// Decodes one UTF-8 code point at s[i]; invalid or truncated sequences give U+FFFD, length 1.
std::pair<uint32_t, size_t> decode_utf8(std::string_view s, size_t i) {
  unsigned char c = s[i];
  if (c < 0x80) return {c, 1};
  size_t len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > s.size()) return {0xFFFD, 1};
  uint32_t cp = c & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) {
    unsigned char cc = s[i + k];
    if ((cc & 0xC0) != 0x80) return {0xFFFD, 1};
    cp = (cp << 6) | (cc & 0x3F);
  }
  return {cp, len};
}

// The reference's makeAsciiSafe: every UTF-16 unit from 0x7f up becomes \uXXXX.
std::string make_ascii_safe(std::string_view s) {
  std::string out;
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    auto [cp, len] = decode_utf8(s, i);
    i += len;
    if (cp < 0x7f) {
      out += static_cast<char>(cp);
    } else if (cp <= 0xFFFF) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
      out += buf;
    } else {
      uint32_t v = cp - 0x10000;
      std::snprintf(buf, sizeof(buf), "\\u%04x", 0xD800 + (v >> 10));
      out += buf;
      std::snprintf(buf, sizeof(buf), "\\u%04x", 0xDC00 + (v & 0x3FF));
      out += buf;
    }
  }
  return out;
}

// Approximates String#localeCompare for sort_keys: case-insensitive first, lower case first on ties.
bool locale_less(const std::string& a, const std::string& b) {
  std::string la = ascii_lower(a), lb = ascii_lower(b);
  if (la != lb) return la < lb;
  return a > b;
}

constexpr int kMaxDepth = 512;

}  // namespace

std::string to_json(const Value& v, const JsonOptions& o, bool undefined_as_null, int depth) {
  if (depth > kMaxDepth) throw TemplateError("tojson: value nested too deeply");
  std::string item_sep = o.has_separators ? o.item_separator : (o.indent ? "," : ", ");
  std::string key_sep = o.has_separators ? o.key_separator : ": ";
  auto quote = [&](std::string_view s) {
    std::string q = js_json_quote(s);
    return o.ensure_ascii ? make_ascii_safe(q) : q;
  };
  switch (v.kind()) {
    case Kind::kNull: return "null";
    case Kind::kUndefined: return undefined_as_null ? "null" : "undefined";
    case Kind::kBool: return v.as_bool() ? "true" : "false";
    case Kind::kInt:
    case Kind::kFloat:
      return std::isfinite(v.as_number()) ? js_number_string(v.as_number()) : "null";
    case Kind::kString: return quote(v.as_string());
    case Kind::kTuple: throw TemplateError("Cannot convert to JSON: TupleValue");  // as the reference
    case Kind::kArray:
    case Kind::kObject:
    case Kind::kKwargs:
    case Kind::kNamespace: {
      std::string indent_unit(o.indent > 0 ? o.indent : 0, ' ');
      std::string base = "\n";
      for (int i = 0; i < depth; ++i) base += indent_unit;
      std::string child = base + indent_unit;
      std::vector<std::string> core;
      if (v.is_array()) {
        for (const Value& x : v.as_array()) {
          core.push_back(to_json(x, o, undefined_as_null, depth + 1));
        }
        std::string out = "[";
        if (o.indent && !core.empty()) {
          out += child;
          for (size_t i = 0; i < core.size(); ++i) {
            if (i) out += item_sep + child;
            out += core[i];
          }
          return out + base + "]";
        }
        for (size_t i = 0; i < core.size(); ++i) {
          if (i) out += item_sep;
          out += core[i];
        }
        return out + "]";
      }
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& e : v.as_object().entries) entries.push_back(&e);
      if (o.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](auto* a, auto* b) { return locale_less(a->first, b->first); });
      }
      std::string out = "{";
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += item_sep;
        if (o.indent) out += child;
        out += quote(entries[i]->first) + key_sep +
               to_json(entries[i]->second, o, undefined_as_null, depth + 1);
      }
      if (o.indent && !entries.empty()) out += base;
      return out + "}";
    }
    case Kind::kFunction: throw TemplateError("Cannot convert to JSON: FunctionValue");
  }
  return "";
}

namespace {

// JavaScript orders "array index" keys (canonical uint32 below 2^32-1) first, ascending.
bool is_array_index(const std::string& k, uint64_t* out) {
  if (k.empty() || k.size() > 10 || (k.size() > 1 && k[0] == '0')) return false;
  uint64_t v = 0;
  for (char c : k) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v >= 4294967295ull) return false;
  *out = v;
  return true;
}

}  // namespace

Value from_json(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxDepth) throw TemplateError("context JSON nested too deeply");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::null();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(static_cast<double>(j.get<int64_t>()));
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value::integer(static_cast<double>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: {
      double d = j.get<double>();
      return (std::isfinite(d) && d == std::trunc(d)) ? Value::integer(d) : Value::floating(d);
    }
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(from_json(x, depth + 1));
      return Value::array(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      std::vector<std::pair<uint64_t, const std::string*>> index_keys;
      Object obj;
      for (auto it = j.begin(); it != j.end(); ++it) {
        uint64_t idx = 0;
        if (is_array_index(it.key(), &idx)) index_keys.emplace_back(idx, &it.key());
      }
      std::sort(index_keys.begin(), index_keys.end());
      for (const auto& [idx, key] : index_keys) obj.set(*key, from_json(j.at(*key), depth + 1));
      for (auto it = j.begin(); it != j.end(); ++it) {
        uint64_t idx = 0;
        if (!is_array_index(it.key(), &idx)) obj.set(it.key(), from_json(it.value(), depth + 1));
      }
      return Value::object(std::move(obj));
    }
    default: return Value();  // binary / discarded: nothing a chat request carries
  }
}

// --- text helpers -------------------------------------------------------------------------------

namespace {
bool is_js_space_cp(uint32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0xA0: case 0x1680:
    case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000: case 0xFEFF:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}
}  // namespace

size_t js_space_at(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  auto [cp, len] = decode_utf8(s, i);
  if (cp == 0xFFFD && len == 1 && static_cast<unsigned char>(s[i]) >= 0x80) return 0;
  return is_js_space_cp(cp) ? len : 0;
}

size_t js_space_before(std::string_view s, size_t end) {
  if (end == 0) return 0;
  size_t start = end - 1;
  // Walk back over continuation bytes (at most 3) to the start of the last code point.
  while (start > 0 && end - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) {
    --start;
  }
  size_t len = js_space_at(s, start);
  return (len != 0 && start + len == end) ? len : 0;
}

std::string js_trim_start(std::string_view s) {
  size_t i = 0;
  while (size_t n = js_space_at(s, i)) i += n;
  return std::string(s.substr(i));
}

std::string js_trim_end(std::string_view s) {
  size_t end = s.size();
  while (size_t n = js_space_before(s, end)) end -= n;
  return std::string(s.substr(0, end));
}

std::string js_trim(std::string_view s) { return js_trim_start(js_trim_end(s)); }

std::vector<std::string> utf8_chars(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t len = decode_utf8(s, i).second;
    out.emplace_back(s.substr(i, len));
    i += len;
  }
  return out;
}

int64_t utf16_length(std::string_view s) {
  int64_t n = 0;
  for (size_t i = 0; i < s.size();) {
    auto [cp, len] = decode_utf8(s, i);
    n += cp > 0xFFFF ? 2 : 1;
    i += len;
  }
  return n;
}

std::string ascii_upper(std::string s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return s;
}

std::string ascii_lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

}  // namespace splash::jinja
