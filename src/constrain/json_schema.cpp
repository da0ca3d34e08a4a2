#include "constrain/json_schema.h"

#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "constrain/regex.h"

namespace splash::constrain {

namespace {

using json = nlohmann::ordered_json;
using ExprId = GrammarBuilder::ExprId;

constexpr int32_t kMaxIntegerDigits = 19;

ExprId digit(GrammarBuilder& b) { return b.bytes(ByteSet::range('0', '9')); }

// Every digit string between lo and hi (same length, lo <= hi), leading zeros included.
ExprId same_length(const std::string& lo, const std::string& hi, GrammarBuilder& b) {
  if (lo.empty()) return b.empty();
  const auto n = static_cast<int32_t>(lo.size());
  if (lo.find_first_not_of('0') == std::string::npos && hi.find_first_not_of('9') == std::string::npos) {
    return b.repeat(digit(b), n, n);
  }
  const auto d0 = static_cast<uint8_t>(lo[0]), d1 = static_cast<uint8_t>(hi[0]);
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  if (d0 == d1) return b.seq({b.bytes(ByteSet::of(d0)), same_length(lo_rest, hi_rest, b)});
  std::vector<ExprId> options;
  options.push_back(b.seq({b.bytes(ByteSet::of(d0)), same_length(lo_rest, std::string(n - 1, '9'), b)}));
  if (d1 - d0 >= 2) {
    options.push_back(b.seq({b.bytes(ByteSet::range(d0 + 1, d1 - 1)), b.repeat(digit(b), n - 1, n - 1)}));
  }
  options.push_back(b.seq({b.bytes(ByteSet::of(d1)), same_length(std::string(n - 1, '0'), hi_rest, b)}));
  return b.alt(std::move(options));
}

// Decimal numbers in [lo, hi] (lo >= 0; hi open when absent), no leading zeros.
ExprId unsigned_range(uint64_t lo, std::optional<uint64_t> hi, GrammarBuilder& b) {
  if (hi && *hi < lo) return b.nothing();
  const std::string ls = std::to_string(lo);
  const auto la = static_cast<int32_t>(ls.size());
  std::vector<ExprId> options;
  auto lengths = [&](int32_t len) {  // every number of exactly `len` digits, len >= 2
    options.push_back(b.seq({b.bytes(ByteSet::range('1', '9')), b.repeat(digit(b), len - 1, len - 1)}));
  };
  if (!hi) {
    // Open above: at most kMaxIntegerDigits digits, so every output parses to a finite number.
    options.push_back(same_length(ls, std::string(la, '9'), b));
    if (la < kMaxIntegerDigits) {
      options.push_back(b.seq({b.bytes(ByteSet::range('1', '9')), b.repeat(digit(b), la, kMaxIntegerDigits - 1)}));
    }
    return b.alt(std::move(options));
  }
  const std::string hs = std::to_string(*hi);
  const auto lb = static_cast<int32_t>(hs.size());
  if (la == lb) return same_length(ls, hs, b);
  options.push_back(same_length(ls, std::string(la, '9'), b));
  for (int32_t len = la + 1; len < lb; ++len) lengths(len);
  std::string first_of_length(static_cast<size_t>(lb), '0');  // 10..0, the smallest number of lb digits
  first_of_length[0] = '1';
  options.push_back(same_length(first_of_length, hs, b));
  return b.alt(std::move(options));
}

bool is_annotation(const std::string& k) {
  static const std::set<std::string> kAnnotations = {
      "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated",
      "readOnly", "writeOnly", "$anchor", "contentMediaType", "contentEncoding", "strict"};
  return kAnnotations.count(k) > 0;
}

bool is_supported(const std::string& k) {
  static const std::set<std::string> kKeywords = {
      "type", "properties", "required", "additionalProperties", "enum", "const", "anyOf", "oneOf",
      "allOf", "items", "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern",
      "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "$ref", "$defs",
      "definitions", "uniqueItems", "nullable"};
  return kKeywords.count(k) > 0;
}

class Compiler {
 public:
  Compiler(const json& root, GrammarBuilder& b, const JsonSchemaOptions& o) : root_(root), b_(b), o_(o) {}

  Result<int32_t> schema_rule(const json& s, const std::string& path, int depth) {
    const int32_t rule = b_.declare_rule(path);
    auto body = value(s, path, depth);
    if (!body) return body.error();
    b_.define_rule(rule, *body);
    return rule;
  }

 private:
  Error fail(const std::string& path, const std::string& what) const {
    return make_error("schema at '", path.empty() ? "#" : path, "': ", what);
  }

  // --- whitespace and separators ---
  ExprId ws() {
    if (o_.whitespace != JsonWhitespace::kFlexible) return b_.empty();
    ByteSet w;
    for (char c : std::string_view(" \t\n\r")) w.add(static_cast<uint8_t>(c));
    return b_.repeat(b_.bytes(w), 0, kMaxFlexibleWhitespace);
  }
  ExprId colon() {
    if (o_.whitespace == JsonWhitespace::kSpaced) return b_.literal(": ");
    return b_.seq({ws(), b_.literal(":"), ws()});
  }
  ExprId comma() {
    if (o_.whitespace == JsonWhitespace::kSpaced) return b_.literal(", ");
    return b_.seq({ws(), b_.literal(","), ws()});
  }

  // --- shared rules ---
  int32_t string_rule() {
    if (string_rule_ < 0) {
      string_rule_ = b_.declare_rule("string");
      b_.define_rule(string_rule_, b_.seq({b_.literal("\""), b_.star(any_char(RegexTarget::kJsonString, b_)),
                                           b_.literal("\"")}));
    }
    return string_rule_;
  }
  ExprId number_expr() {
    auto frac = b_.seq({b_.literal("."), b_.plus(digit(b_))});
    ByteSet e = ByteSet::of('e');
    e.add('E');
    ByteSet sign = ByteSet::of('+');
    sign.add('-');
    // Two exponent digits at most: with kMaxIntegerDigits, every number fits a double.
    auto exp = b_.seq({b_.bytes(e), b_.optional(b_.bytes(sign)), b_.repeat(digit(b_), 1, 2)});
    return b_.seq({integer_range(std::nullopt, std::nullopt, b_), b_.optional(frac), b_.optional(exp)});
  }
  int32_t any_value_rule() {
    if (any_rule_ >= 0) return any_rule_;
    any_rule_ = b_.declare_rule("value");
    const int32_t object = b_.declare_rule("object"), array = b_.declare_rule("array");
    auto member = b_.seq({b_.ref(string_rule()), colon(), b_.ref(any_rule_)});
    b_.define_rule(object, b_.seq({b_.literal("{"), ws(),
                                   b_.optional(b_.seq({member, b_.star(b_.seq({comma(), member}))})), ws(),
                                   b_.literal("}")}));
    auto element = b_.ref(any_rule_);
    b_.define_rule(array, b_.seq({b_.literal("["), ws(),
                                  b_.optional(b_.seq({element, b_.star(b_.seq({comma(), element}))})), ws(),
                                  b_.literal("]")}));
    b_.define_rule(any_rule_, b_.alt({b_.ref(object), b_.ref(array), b_.ref(string_rule()), number_expr(),
                                      b_.literal("true"), b_.literal("false"), b_.literal("null")}));
    return any_rule_;
  }

  // --- schemas ---
  Result<ExprId> value(const json& s, const std::string& path, int depth) {
    if (depth > o_.max_depth) return fail(path, "nested deeper than " + std::to_string(o_.max_depth) + " levels");
    if (s.is_boolean()) return s.get<bool>() ? b_.ref(any_value_rule()) : b_.nothing();
    if (!s.is_object()) return fail(path, "a schema must be an object or a boolean");
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (!is_annotation(it.key()) && !is_supported(it.key())) {
        return fail(path, "keyword '" + it.key() + "' is not supported (it cannot be enforced while generating)");
      }
    }
    if (s.contains("$ref")) {
      for (auto it = s.begin(); it != s.end(); ++it) {
        if (it.key() != "$ref" && it.key() != "$defs" && it.key() != "definitions" && !is_annotation(it.key())) {
          return fail(path, "'$ref' with sibling keyword '" + it.key() + "' is not supported");
        }
      }
      return reference(s["$ref"], path, depth);
    }
    if (s.contains("const")) return b_.literal(dump(s["const"]));
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) return fail(path, "'enum' must be a non-empty array");
      std::vector<ExprId> options;
      for (const auto& v : s["enum"]) options.push_back(b_.literal(dump(v)));
      return b_.alt(std::move(options));
    }
    for (const char* k : {"anyOf", "oneOf"}) {
      if (!s.contains(k)) continue;
      if (!s[k].is_array() || s[k].empty()) return fail(path, std::string("'") + k + "' must be a non-empty array");
      std::vector<ExprId> options;
      for (size_t i = 0; i < s[k].size(); ++i) {
        auto merged = merge_siblings(s, k, s[k][i]);
        auto e = value(merged, path + "/" + k + "/" + std::to_string(i), depth + 1);
        if (!e) return e;
        options.push_back(*e);
      }
      return b_.alt(std::move(options));
    }
    if (s.contains("allOf")) {
      auto merged = merge_all_of(s, path);
      if (!merged) return merged.error();
      return value(*merged, path, depth + 1);
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      if (s["type"].is_string()) {
        types.push_back(s["type"]);
      } else if (s["type"].is_array()) {
        for (const auto& t : s["type"]) {
          if (!t.is_string()) return fail(path, "'type' entries must be strings");
          types.push_back(t);
        }
      } else {
        return fail(path, "'type' must be a string or an array of strings");
      }
      if (s.value("nullable", false)) types.push_back("null");
    } else if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) {
      types.push_back("object");  // the type the keywords constrain; any object that meets them validates
    } else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems")) {
      types.push_back("array");
    } else if (s.contains("pattern") || s.contains("format") || s.contains("minLength") || s.contains("maxLength")) {
      types.push_back("string");
    } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
               s.contains("exclusiveMaximum")) {
      types.push_back("number");
    } else {
      return b_.ref(any_value_rule());
    }
    std::vector<ExprId> options;
    for (const auto& t : types) {
      auto e = typed(t, s, path, depth);
      if (!e) return e;
      options.push_back(*e);
    }
    return b_.alt(std::move(options));
  }

  static std::string dump(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::strict); }

  // anyOf / oneOf branches inherit the keywords beside them (e.g. a shared "type").
  static json merge_siblings(const json& s, const char* key, const json& branch) {
    if (!branch.is_object()) return branch;
    json merged = branch;
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (it.key() != key && !merged.contains(it.key()) && !is_annotation(it.key()) && it.key() != "$defs" &&
          it.key() != "definitions") {
        merged[it.key()] = it.value();
      }
    }
    return merged;
  }

  Result<json> merge_all_of(const json& s, const std::string& path) {
    if (!s["allOf"].is_array() || s["allOf"].empty()) return fail(path, "'allOf' must be a non-empty array");
    json merged = s;
    merged.erase("allOf");
    for (const auto& part0 : s["allOf"]) {
      json part = part0;
      if (part.is_object() && part.contains("$ref") && part.size() == 1) {
        auto target = resolve(part["$ref"], path);
        if (!target) return target.error();
        part = **target;
      }
      if (!part.is_object()) return fail(path, "'allOf' entries must be objects");
      for (auto it = part.begin(); it != part.end(); ++it) {
        const std::string& k = it.key();
        if (k == "properties") {
          for (auto p = it->begin(); p != it->end(); ++p) {
            if (merged["properties"].contains(p.key())) return fail(path, "'allOf' declares property '" + p.key() + "' twice");
            merged["properties"][p.key()] = p.value();
          }
        } else if (k == "required") {
          for (const auto& r : *it) merged["required"].push_back(r);
        } else if (is_annotation(k)) {
          continue;
        } else if (merged.contains(k) && merged[k] != *it) {
          return fail(path, "'allOf' entries disagree on '" + k + "'");
        } else {
          merged[k] = *it;
        }
      }
    }
    return merged;
  }

  Result<const json*> resolve(const json& ref, const std::string& path) {
    if (!ref.is_string()) return fail(path, "'$ref' must be a string");
    const std::string r = ref.get<std::string>();
    if (r.empty() || r[0] != '#') return fail(path, "'$ref' " + r + " is not local (only #/... references are supported)");
    try {
      const json::json_pointer ptr(r.substr(1));
      if (!root_.contains(ptr)) return fail(path, "'$ref' " + r + " points at nothing");
      return &root_.at(ptr);
    } catch (const json::exception&) {
      return fail(path, "'$ref' " + r + " is not a valid JSON pointer");
    }
  }

  Result<ExprId> reference(const json& ref, const std::string& path, int depth) {
    auto target = resolve(ref, path);
    if (!target) return target.error();
    const std::string r = ref.get<std::string>();
    auto it = refs_.find(r);
    if (it != refs_.end()) return b_.ref(it->second);
    // Declared before compiling the target, so a recursive schema refers to this rule.
    const int32_t rule = b_.declare_rule(r);
    refs_.emplace(r, rule);
    auto body = value(**target, r, depth + 1);
    if (!body) return body.error();
    b_.define_rule(rule, *body);
    return b_.ref(rule);
  }

  Result<ExprId> typed(const std::string& t, const json& s, const std::string& path, int depth) {
    if (t == "null") return b_.literal("null");
    if (t == "boolean") return b_.alt({b_.literal("true"), b_.literal("false")});
    if (t == "integer") return integer(s, path);
    if (t == "number") return number(s, path);
    if (t == "string") return string(s, path);
    if (t == "object") return object(s, path, depth);
    if (t == "array") return array(s, path, depth);
    return fail(path, "unknown type '" + t + "'");
  }

  Result<ExprId> integer(const json& s, const std::string& path) {
    std::optional<int64_t> lo, hi;
    auto bound = [&](const char* key, bool upper, bool exclusive) -> Result<void> {
      if (!s.contains(key)) return {};
      if (!s[key].is_number()) return fail(path, std::string("'") + key + "' must be a number");
      const double v = s[key].get<double>();
      if (std::fabs(v) > 9e15) return fail(path, std::string("'") + key + "' is too large");
      auto n = static_cast<int64_t>(upper ? std::floor(v) : std::ceil(v));
      if (exclusive && static_cast<double>(n) == v) n += upper ? -1 : 1;
      auto& slot = upper ? hi : lo;
      slot = slot ? (upper ? std::min(*slot, n) : std::max(*slot, n)) : n;
      return {};
    };
    for (auto r : {bound("minimum", false, false), bound("exclusiveMinimum", false, true), bound("maximum", true, false),
                   bound("exclusiveMaximum", true, true)}) {
      if (!r) return r.error();
    }
    return integer_range(lo, hi, b_);
  }

  Result<ExprId> number(const json& s, const std::string& path) {
    const bool min0 = s.contains("minimum") && s["minimum"] == 0;
    const bool xmin0 = s.contains("exclusiveMinimum") && s["exclusiveMinimum"] == 0;
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (s.contains(k) && !((std::string(k) == "minimum" && min0) || (std::string(k) == "exclusiveMinimum" && xmin0))) {
        return fail(path, std::string("'") + k + "' on a number is only supported as minimum 0 or exclusiveMinimum 0 "
                                                 "(use type integer for other bounds)");
      }
    }
    if (!min0 && !xmin0) return number_expr();
    auto frac = b_.optional(b_.seq({b_.literal("."), b_.plus(digit(b_))}));
    auto natural = integer_range(int64_t{0}, std::nullopt, b_);
    if (min0) return b_.seq({natural, frac});
    // > 0: a positive integer part, or 0 with a fraction that is not all zeros.
    auto positive = b_.seq({integer_range(int64_t{1}, std::nullopt, b_), frac});
    auto small = b_.seq({b_.literal("0."), b_.star(b_.literal("0")), b_.bytes(ByteSet::range('1', '9')), b_.star(digit(b_))});
    return b_.alt({positive, small});
  }

  Result<ExprId> string(const json& s, const std::string& path) {
    const bool has_len = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("format") && !s.contains("pattern")) {
      auto f = format(s["format"], path);
      if (!f) return f;
      if (has_len) return fail(path, "'minLength'/'maxLength' together with 'format' are not supported");
      return b_.seq({b_.literal("\""), *f, b_.literal("\"")});
    }
    if (s.contains("pattern")) {
      if (s.contains("format")) return fail(path, "'pattern' together with 'format' is not supported");
      if (has_len) return fail(path, "'minLength'/'maxLength' together with 'pattern' are not supported");
      if (!s["pattern"].is_string()) return fail(path, "'pattern' must be a string");
      auto re = compile_regex(s["pattern"].get<std::string>(), RegexTarget::kJsonString, b_);
      if (!re) return fail(path, "'pattern': " + re.error().message);
      auto any = [&] { return b_.star(any_char(RegexTarget::kJsonString, b_)); };
      // JSON Schema patterns search: an unanchored side may have anything around the match.
      return b_.seq({b_.literal("\""), re->anchored_start ? b_.empty() : any(), re->expr,
                     re->anchored_end ? b_.empty() : any(), b_.literal("\"")});
    }
    int64_t lo = 0, hi = -1;
    if (s.contains("minLength")) {
      if (!s["minLength"].is_number_unsigned()) return fail(path, "'minLength' must be a non-negative integer");
      lo = s["minLength"].get<int64_t>();
    }
    if (s.contains("maxLength")) {
      if (!s["maxLength"].is_number_unsigned()) return fail(path, "'maxLength' must be a non-negative integer");
      hi = s["maxLength"].get<int64_t>();
    }
    if (!has_len) return b_.ref(string_rule());
    if (lo > 10000 || hi > 10000) return fail(path, "'minLength'/'maxLength' above 10000 are not supported");
    return b_.seq({b_.literal("\""),
                   b_.counted(any_char(RegexTarget::kJsonString, b_), static_cast<int32_t>(lo), static_cast<int32_t>(hi)),
                   b_.literal("\"")});
  }

  Result<ExprId> format(const json& f, const std::string& path) {
    static const std::map<std::string, std::string> kFormats = {
        {"date", R"([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01]))"},
        {"time", R"(([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))"},
        {"date-time",
         R"([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))"},
        {"uuid", R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"},
        {"email", R"([A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+)"},
        {"ipv4", R"(((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9]))"},
    };
    if (!f.is_string()) return fail(path, "'format' must be a string");
    auto it = kFormats.find(f.get<std::string>());
    if (it == kFormats.end()) {
      return fail(path, "format '" + f.get<std::string>() + "' is not supported (supported: date, time, date-time, "
                        "uuid, email, ipv4)");
    }
    auto re = compile_regex(it->second, RegexTarget::kJsonString, b_);
    SPLASH_CHECK(re.ok());
    return re->expr;
  }

  Result<ExprId> object(const json& s, const std::string& path, int depth) {
    const json* props = s.contains("properties") ? &s["properties"] : nullptr;
    if (props && !props->is_object()) return fail(path, "'properties' must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return fail(path, "'required' must be an array");
      for (const auto& r : s["required"]) {
        if (!r.is_string()) return fail(path, "'required' entries must be strings");
        required.insert(r.get<std::string>());
      }
    }
    const json additional = s.contains("additionalProperties") ? s["additionalProperties"] : json(true);
    // Declared properties in order, plus required names without a schema (any value).
    std::vector<std::pair<std::string, json>> fields;
    if (props) {
      for (auto it = props->begin(); it != props->end(); ++it) fields.emplace_back(it.key(), it.value());
    }
    for (const auto& r : required) {
      if (!props || !props->contains(r)) {
        if (additional.is_boolean() && !additional.get<bool>()) {
          return fail(path, "property '" + r + "' is required but additionalProperties is false");
        }
        fields.emplace_back(r, additional);
      }
    }
    if (fields.empty()) {
      if (additional.is_boolean() && !additional.get<bool>()) return b_.literal("{}");
      // A map: any keys, values of the additionalProperties schema.
      auto v = value(additional, path + "/additionalProperties", depth + 1);
      if (!v) return v;
      auto member = b_.seq({b_.ref(string_rule()), colon(), *v});
      return b_.seq({b_.literal("{"), ws(), b_.optional(b_.seq({member, b_.star(b_.seq({comma(), member}))})), ws(),
                     b_.literal("}")});
    }
    // Members as rules so the optional chains below share them.
    std::vector<int32_t> member_rules;
    std::vector<bool> is_required;
    for (const auto& [name, schema] : fields) {
      const std::string sub = path + "/properties/" + name;
      auto v = value(schema, sub, depth + 1);
      if (!v) return v;
      const int32_t rule = b_.declare_rule(sub);
      b_.define_rule(rule, b_.seq({b_.literal(dump(json(name))), colon(), *v}));
      member_rules.push_back(rule);
      is_required.push_back(required.count(name) > 0);
    }
    // tail[i]: members i.. each after a comma; rest[i]: members i.. where the first present one has no
    // comma before it (so every optional member may be left out).
    const auto n = static_cast<int32_t>(fields.size());
    std::vector<int32_t> tail(n + 1), rest(n + 1);
    for (int32_t i = 0; i <= n; ++i) {
      tail[i] = b_.declare_rule(path + "/tail");
      rest[i] = b_.declare_rule(path + "/rest");
    }
    b_.define_rule(tail[n], b_.empty());
    b_.define_rule(rest[n], b_.empty());
    for (int32_t i = n - 1; i >= 0; --i) {
      auto with_comma = b_.seq({comma(), b_.ref(member_rules[i]), b_.ref(tail[i + 1])});
      b_.define_rule(tail[i], is_required[i] ? with_comma : b_.alt({with_comma, b_.ref(tail[i + 1])}));
      auto first = b_.seq({b_.ref(member_rules[i]), b_.ref(tail[i + 1])});
      b_.define_rule(rest[i], is_required[i] ? first : b_.alt({first, b_.ref(rest[i + 1])}));
    }
    return b_.seq({b_.literal("{"), ws(), b_.ref(rest[0]), ws(), b_.literal("}")});
  }

  Result<ExprId> array(const json& s, const std::string& path, int depth) {
    if (s.contains("uniqueItems") && s["uniqueItems"] == true) return fail(path, "'uniqueItems' is not supported");
    int32_t lo = 0, hi = -1;
    for (const char* k : {"minItems", "maxItems"}) {
      if (!s.contains(k)) continue;
      if (!s[k].is_number_unsigned() || s[k].get<uint64_t>() > 10000) {
        return fail(path, std::string("'") + k + "' must be an integer in [0, 10000]");
      }
      (std::string(k) == "minItems" ? lo : hi) = s[k].get<int32_t>();
    }
    if (hi >= 0 && hi < lo) return b_.nothing();
    std::vector<ExprId> prefix;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) return fail(path, "'prefixItems' must be an array");
      for (size_t i = 0; i < s["prefixItems"].size(); ++i) {
        auto e = value(s["prefixItems"][i], path + "/prefixItems/" + std::to_string(i), depth + 1);
        if (!e) return e;
        prefix.push_back(*e);
      }
    }
    std::optional<ExprId> item;
    const json items = s.contains("items") ? s["items"] : json(true);
    if (!(items.is_boolean() && !items.get<bool>())) {
      auto e = value(items, path + "/items", depth + 1);
      if (!e) return e;
      const int32_t rule = b_.declare_rule(path + "/items");
      b_.define_rule(rule, *e);
      item = b_.ref(rule);
    }
    // Element k (0-based) is prefix[k] or the item schema; elements past `lo` are optional, built
    // from the end: after(k) = the elements from k on, each after a comma.
    const auto k_prefix = static_cast<int32_t>(prefix.size());
    std::function<ExprId(int32_t)> after = [&](int32_t k) -> ExprId {
      if (hi >= 0 && k >= hi) return b_.empty();
      if (k >= k_prefix) {
        if (!item) return b_.empty();
        const int32_t need = std::max(0, lo - k);
        const int32_t most = hi < 0 ? -1 : hi - k;
        return b_.repeat(b_.seq({comma(), *item}), need, most);
      }
      auto here = b_.seq({comma(), prefix[k], after(k + 1)});
      return k < lo ? here : b_.optional(here);
    };
    if (lo > k_prefix && !item) return fail(path, "'minItems' exceeds the number of allowed items");
    ExprId elements;
    if (k_prefix == 0 && !item) {
      elements = b_.empty();
    } else {
      auto first = b_.seq({k_prefix > 0 ? prefix[0] : *item, after(1)});
      elements = lo > 0 ? first : b_.optional(first);
      if (hi == 0) elements = b_.empty();
    }
    return b_.seq({b_.literal("["), ws(), elements, ws(), b_.literal("]")});
  }

  const json& root_;
  GrammarBuilder& b_;
  JsonSchemaOptions o_;
  std::map<std::string, int32_t> refs_;
  int32_t string_rule_ = -1;
  int32_t any_rule_ = -1;
};

}  // namespace

ExprId integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi, GrammarBuilder& b) {
  std::vector<ExprId> options;
  if (!hi || *hi >= 0) {
    const uint64_t from = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    std::optional<uint64_t> to;
    if (hi) to = static_cast<uint64_t>(*hi);
    options.push_back(unsigned_range(from, to, b));
  }
  if (!lo || *lo < 0) {
    // -x for x in [max(1, -hi), -lo]
    const uint64_t from = hi && *hi < 0 ? static_cast<uint64_t>(-(*hi + 1)) + 1 : 1;
    std::optional<uint64_t> to;
    if (lo) to = static_cast<uint64_t>(-(*lo + 1)) + 1;
    options.push_back(b.seq({b.literal("-"), unsigned_range(from, to, b)}));
  }
  return b.alt(std::move(options));
}

Result<int32_t> add_json_schema(const nlohmann::ordered_json& schema, GrammarBuilder& b, const JsonSchemaOptions& options) {
  Compiler c(schema, b, options);
  return c.schema_rule(schema, "", 0);
}

Result<std::shared_ptr<const Grammar>> compile_json_schema(const nlohmann::ordered_json& schema,
                                                           const JsonSchemaOptions& options) {
  GrammarBuilder b;
  auto root = add_json_schema(schema, b, options);
  if (!root) return root.error();
  auto g = b.build(*root);
  if (!g) return g.error();
  return std::make_shared<const Grammar>(std::move(*g));
}

}  // namespace splash::constrain
