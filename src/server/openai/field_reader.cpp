#include "server/openai/field_reader.h"

#include <cmath>
#include <limits>

#include "core/result.h"

namespace splash::openai {

const FieldReader::ojson* FieldReader::get(std::string_view key) const {
  auto it = obj_.find(key);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string FieldReader::path(std::string_view key) const {
  return prefix_.empty() ? std::string(key) : str_cat(prefix_, ".", key);
}

std::string FieldReader::name(std::string_view key) const { return str_cat("'", path(key), "'"); }

ApiResult<std::optional<std::string>> FieldReader::string(std::string_view key) const {
  const ojson* v = get(key);
  if (v == nullptr) return std::optional<std::string>();
  if (!v->is_string()) return invalid_request(str_cat(name(key), " must be a string"));
  return std::optional<std::string>(v->get<std::string>());
}

ApiResult<std::optional<bool>> FieldReader::boolean(std::string_view key) const {
  const ojson* v = get(key);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_boolean()) return invalid_request(str_cat(name(key), " must be a boolean"));
  return std::optional<bool>(v->get<bool>());
}

ApiResult<std::optional<double>> FieldReader::number(std::string_view key) const {
  const ojson* v = get(key);
  if (v == nullptr) return std::optional<double>();
  if (!v->is_number()) return invalid_request(str_cat(name(key), " must be a number"));
  double d = v->get<double>();
  if (!std::isfinite(d)) return invalid_request(str_cat(name(key), " must be a finite number"));
  return std::optional<double>(d);
}

ApiResult<std::optional<double>> FieldReader::number_in(std::string_view key, double lo, double hi) const {
  SPLASH_OAI_TRY(auto d, number(key));
  if (d && !(*d >= lo && *d <= hi)) {
    return invalid_request(str_cat(name(key), " must be between ", lo, " and ", hi, ", got ", *d));
  }
  return d;
}

ApiResult<std::optional<int64_t>> FieldReader::integer(std::string_view key) const {
  const ojson* v = get(key);
  if (v == nullptr) return std::optional<int64_t>();
  if (v->is_number_unsigned()) {
    uint64_t u = v->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return invalid_request(str_cat(name(key), " is too large"));
    }
    return std::optional<int64_t>(static_cast<int64_t>(u));
  }
  if (v->is_number_integer()) return std::optional<int64_t>(v->get<int64_t>());
  if (v->is_number_float()) {
    double d = v->get<double>();
    // 2^63 is exactly representable; anything at or beyond it does not fit.
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2233720368547758e18) {
      return std::optional<int64_t>(static_cast<int64_t>(d));
    }
  }
  return invalid_request(str_cat(name(key), " must be an integer"));
}

ApiResult<std::optional<uint64_t>> FieldReader::unsigned_integer(std::string_view key) const {
  const ojson* v = get(key);
  if (v == nullptr) return std::optional<uint64_t>();
  if (v->is_number_unsigned()) return std::optional<uint64_t>(v->get<uint64_t>());
  if (v->is_number_integer()) {
    return invalid_request(str_cat(name(key), " must be a non-negative integer"));
  }
  if (v->is_number_float()) {
    double d = v->get<double>();
    if (std::isfinite(d) && d == std::floor(d) && d >= 0 && d < 1.8446744073709552e19) {
      return std::optional<uint64_t>(static_cast<uint64_t>(d));
    }
  }
  return invalid_request(str_cat(name(key), " must be a non-negative integer below 2^64"));
}

std::string index_path(std::string_view path, std::size_t i) { return str_cat(path, "[", i, "]"); }

}  // namespace splash::openai
