// Typed, null-tolerant access to the fields of one JSON object of a request, with error messages
// that name the field by its full path ('messages[2].content'). Internal to server/openai.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/openai/api_error.h"

// SPLASH_OAI_TRY(auto x, expr): like SPLASH_TRY, for ApiResult.
#define SPLASH_OAI_TRY(decl, expr) SPLASH_OAI_TRY_IMPL_(decl, expr, SPLASH_OAI_CONCAT_(oai_try_, __LINE__))
#define SPLASH_OAI_CONCAT_INNER_(a, b) a##b
#define SPLASH_OAI_CONCAT_(a, b) SPLASH_OAI_CONCAT_INNER_(a, b)
#define SPLASH_OAI_TRY_IMPL_(decl, expr, tmp) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.error();          \
  decl = std::move(tmp).value()

namespace splash::openai {

// A value that is not needed (ApiResult<void> would need a specialization).
struct Ok {};

class FieldReader {
 public:
  using ojson = nlohmann::ordered_json;
  // `obj` must be a JSON object and outlive the reader; `prefix` is the path of obj ("" at the top,
  // "messages[2]" inside).
  FieldReader(const ojson& obj, std::string prefix) : obj_(obj), prefix_(std::move(prefix)) {}

  // The field, or nullptr when absent or null.
  const ojson* get(std::string_view key) const;
  // 'prefix.key' in quotes, as messages show it.
  std::string name(std::string_view key) const;
  std::string path(std::string_view key) const;

  ApiResult<std::optional<std::string>> string(std::string_view key) const;
  ApiResult<std::optional<bool>> boolean(std::string_view key) const;
  // Finite numbers only.
  ApiResult<std::optional<double>> number(std::string_view key) const;
  // Integers; an integral float such as 16.0 counts (some clients serialize all numbers as floats).
  ApiResult<std::optional<int64_t>> integer(std::string_view key) const;
  ApiResult<std::optional<uint64_t>> unsigned_integer(std::string_view key) const;
  // A number within [lo, hi].
  ApiResult<std::optional<double>> number_in(std::string_view key, double lo, double hi) const;

 private:
  const ojson& obj_;
  std::string prefix_;
};

// Quoted path of an element: name_of("messages", 2) -> "messages[2]".
std::string index_path(std::string_view path, std::size_t i);

}  // namespace splash::openai
