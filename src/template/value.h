// Runtime values of the Jinja engine. The semantics follow @huggingface/jinja (the reference
// renderer that chat templates are checked against), which is JavaScript underneath: numbers are
// doubles with an "integer" flag, booleans print as `true`, objects keep insertion order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace splash::jinja {

// Thrown inside the engine only; JinjaTemplate::parse / render turn it into a Result.
struct TemplateError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class Kind {
  kUndefined,
  kNull,
  kBool,
  kInt,
  kFloat,
  kString,
  kArray,
  kTuple,
  kObject,
  kKwargs,  // keyword arguments passed to a function (an object, like the reference's subclass)
  kNamespace,
  kFunction,
};

class Value;
class Environment;
using Array = std::vector<Value>;

// Insertion-ordered string-keyed map; linear lookup is fine at chat-message sizes.
struct Object {
  std::vector<std::pair<std::string, Value>> entries;
  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);
};

// A callable: builtin (range, namespace, string methods...) or a macro bound at definition.
// `env` is the caller's environment (the reference resolves macro bodies dynamically).
using Function = std::function<Value(std::vector<Value>& args, Environment& env)>;

class Value {
 public:
  Value() = default;  // undefined
  static Value null();
  static Value boolean(bool b);
  static Value integer(double v);
  static Value floating(double v);
  static Value string(std::string s);
  static Value array(Array items, Kind kind = Kind::kArray);
  static Value object(Object obj, Kind kind = Kind::kObject);
  static Value function(Function fn);

  Kind kind() const { return kind_; }
  bool is(Kind k) const { return kind_ == k; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_array() const { return kind_ == Kind::kArray || kind_ == Kind::kTuple; }
  // Objects in the reference's sense: dicts and keyword-argument bundles (not namespaces).
  bool is_object() const { return kind_ == Kind::kObject || kind_ == Kind::kKwargs; }
  bool is_attribute_container() const { return is_object() || kind_ == Kind::kNamespace; }

  bool as_bool() const { return bool_; }
  double as_number() const { return num_; }
  const std::string& as_string() const;
  // The text itself when this Value is its only holder (a temporary, such as the result of a
  // concatenation), so `a + b + c` grows one buffer; nullptr otherwise.
  std::string* sole_string();
  const Array& as_array() const { return *arr_; }
  Array& as_array_mut() { return *arr_; }
  const Object& as_object() const { return *obj_; }
  Object& as_object_mut() { return *obj_; }
  const Function& as_function() const { return *fn_; }

  // Python-style truthiness as the reference computes it (`__bool__`).
  bool truthy() const;
  // Same underlying container (JavaScript reference identity) for arrays/objects/functions.
  bool same_identity(const Value& other) const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool bool_ = false;
  double num_ = 0;
  // Shared, and changed only by its sole holder (sole_string): copying a Value (every variable read,
  // attribute and argument) copies no text, which a 100 MB message would otherwise pay each time.
  std::shared_ptr<std::string> str_;
  std::shared_ptr<Array> arr_;
  std::shared_ptr<Object> obj_;
  std::shared_ptr<Function> fn_;
};

const char* kind_name(Kind k);  // "StringValue", ... as the reference names its types

// JavaScript Number#toString (shortest round trip, exponent form outside [1e-7, 1e21)).
std::string js_number_string(double v);
// What `{{ v }}` prints (floats with integer value print as "2.0", containers as JSON).
std::string to_output_string(const Value& v);
// JavaScript `String(v.value)`: used by `+` and `~` on strings and by `join`.
std::string js_value_string(const Value& v);
// JavaScript loose equality of the underlying values (the reference's `==`).
bool js_loose_equal(const Value& a, const Value& b);
// JavaScript strict equality of underlying values (`in` over arrays, `unique`).
bool js_strict_equal(const Value& a, const Value& b);

struct JsonOptions {
  int indent = 0;  // 0: single line
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool has_separators = false;
  std::string item_separator;
  std::string key_separator;
};
// The reference's toJSON: `tojson` and the printed form of containers.
std::string to_json(const Value& v, const JsonOptions& options, bool undefined_as_null = true,
                    int depth = 0);
// JSON.stringify of one string (escapes as JavaScript does; no ensure_ascii).
std::string js_json_quote(std::string_view s);

// Converts request JSON into values as JSON.parse + the reference would see it: whole numbers
// become integers, and object keys that are array indices move first (JavaScript key order).
Value from_json(const nlohmann::ordered_json& j, int depth = 0);

// --- text helpers shared by lexer and builtins (UTF-8 in, JavaScript \s semantics) ---
// Length in bytes of the JavaScript whitespace character at s[i], 0 if none.
size_t js_space_at(std::string_view s, size_t i);
// Length in bytes of the JavaScript whitespace character ending at s[end-1], 0 if none.
size_t js_space_before(std::string_view s, size_t end);
std::string js_trim_start(std::string_view s);
std::string js_trim_end(std::string_view s);
std::string js_trim(std::string_view s);
// Splits UTF-8 into code points (each as its own string); invalid bytes stay single.
std::vector<std::string> utf8_chars(std::string_view s);
// Length in UTF-16 code units, as JavaScript's String#length reports.
int64_t utf16_length(std::string_view s);
std::string ascii_upper(std::string s);
std::string ascii_lower(std::string s);

}  // namespace splash::jinja
