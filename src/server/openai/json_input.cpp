#include "server/openai/json_input.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "core/result.h"

namespace splash::openai {
namespace {

using ojson = nlohmann::ordered_json;

// Builds an ordered_json through nlohmann's SAX interface. ordered_json's own parser looks up every
// key linearly before inserting it, which is quadratic in the number of keys of one object; here
// small objects are scanned and large ones get a hash index, so a hostile body costs linear time.
class OrderedBuilder {
 public:
  explicit OrderedBuilder(int max_depth) : max_depth_(max_depth) {}

  bool null() { return put(ojson(nullptr)); }
  bool boolean(bool v) { return put(ojson(v)); }
  bool number_integer(ojson::number_integer_t v) { return put(ojson(v)); }
  bool number_unsigned(ojson::number_unsigned_t v) { return put(ojson(v)); }
  bool number_float(ojson::number_float_t v, const std::string&) { return put(ojson(v)); }
  bool string(std::string& v) { return put(ojson(std::move(v))); }
  bool binary(ojson::binary_t&) { return put(ojson(nullptr)); }

  bool start_object(std::size_t) { return open(ojson::object()); }
  bool start_array(std::size_t) { return open(ojson::array()); }
  bool key(std::string& k) {
    frames_.back().key = std::move(k);
    return true;
  }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) {
    error_ = str_cat("invalid JSON in ", what_, " at byte ", position, ": ", strip_prefix(ex.what()));
    return false;
  }

  void set_what(std::string_view what) { what_ = std::string(what); }
  bool depth_exceeded() const { return depth_exceeded_; }
  const std::string& error() const { return error_; }
  ojson take() { return std::move(root_); }

 private:
  struct Frame {
    ojson value;
    std::string key;                                   // pending key (objects)
    std::unordered_map<std::string, std::size_t> index;  // key -> position, once the object is large
  };
  static constexpr std::size_t kIndexFrom = 16;

  static std::string strip_prefix(const char* what) {
    // nlohmann messages start with "[json.exception.parse_error.101] parse error at line 1, ...".
    std::string s(what);
    auto p = s.find("] ");
    return p == std::string::npos ? s : s.substr(p + 2);
  }

  bool open(ojson v) {
    if (static_cast<int>(frames_.size()) >= max_depth_) {
      depth_exceeded_ = true;
      return false;
    }
    frames_.push_back(Frame{std::move(v), {}, {}});
    return true;
  }

  bool close() {
    Frame f = std::move(frames_.back());
    frames_.pop_back();
    return put(std::move(f.value));
  }

  bool put(ojson v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return true;
    }
    Frame& f = frames_.back();
    if (f.value.is_array()) {
      f.value.get_ref<ojson::array_t&>().push_back(std::move(v));
      return true;
    }
    auto& obj = f.value.get_ref<ojson::object_t&>();
    // Duplicate keys: the last value wins, in the position of the first (as nlohmann does).
    if (obj.size() < kIndexFrom) {
      for (auto& kv : obj) {
        if (kv.first == f.key) {
          kv.second = std::move(v);
          return true;
        }
      }
    } else {
      if (f.index.empty()) {
        for (std::size_t i = 0; i < obj.size(); ++i) f.index.emplace((obj.begin() + i)->first, i);
      }
      auto it = f.index.find(f.key);
      if (it != f.index.end()) {
        (obj.begin() + it->second)->second = std::move(v);
        return true;
      }
      f.index.emplace(f.key, obj.size());
    }
    // ordered_map derives from std::vector<pair>: appending directly skips its linear key search.
    // Its entries (pair<const string, ojson>) would be copied, not moved, when the vector grows, so
    // it is grown here with the values moved: a 100 MB "prompt" is not copied when the next key
    // arrives. Same growth as the vector's own (1, 2, 4, ...).
    using Entries = std::vector<ojson::object_t::value_type>;
    Entries& entries = obj;
    if (entries.size() == entries.capacity()) {
      Entries grown;
      grown.reserve(std::max<std::size_t>(1, 2 * entries.size()));
      for (auto& kv : entries) grown.emplace_back(kv.first, std::move(kv.second));
      entries.swap(grown);
    }
    entries.emplace_back(std::move(f.key), std::move(v));
    return true;
  }

  int max_depth_;
  std::string what_ = "request body";
  std::vector<Frame> frames_;
  ojson root_;
  std::string error_;
  bool depth_exceeded_ = false;
};

}  // namespace

ApiResult<nlohmann::ordered_json> parse_json(std::string_view text, std::string_view what, int max_depth) {
  OrderedBuilder builder(max_depth);
  builder.set_what(what);
  bool ok = false;
  try {
    ok = ojson::sax_parse(text.begin(), text.end(), &builder, nlohmann::detail::input_format_t::json,
                          /*strict=*/true, /*ignore_comments=*/false);
  } catch (const std::exception& e) {
    // sax_parse reports errors through the handler; this catches allocation failures and the like.
    return invalid_request(str_cat("invalid JSON in ", what, ": ", e.what()));
  }
  if (builder.depth_exceeded()) {
    return invalid_request(str_cat("invalid JSON in ", what, ": nesting deeper than ", max_depth, " levels"));
  }
  if (!ok) {
    return invalid_request(builder.error().empty() ? str_cat("invalid JSON in ", what) : builder.error());
  }
  return builder.take();
}

std::string dump_json(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace splash::openai
