// A Jinja template engine for chat templates, rendering byte for byte as @huggingface/jinja does
// (the renderer Hugging Face's JavaScript stack uses): trim_blocks and lstrip_blocks on, JavaScript
// value printing (`true`, `2.0`), objects in insertion order.
//
// Everything the engine cannot evaluate fails in parse() with the construct and line named:
// include/extends/import/block/with/raw..., unknown filters, unknown tests. Runtime failures
// (raise_exception, type errors) come back from render() as an Error, never as a crash.
//
// A parsed JinjaTemplate is immutable; render() is const and may run on several threads at once.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace splash::jinja {
struct Node;
}

namespace splash {

struct JinjaRenderOptions {
  // Time strftime_now() reports; unset means the wall clock at render time.
  std::optional<std::chrono::system_clock::time_point> now;
};

class JinjaTemplate {
 public:
  static Result<JinjaTemplate> parse(std::string source);

  // `context` must be a JSON object; its keys become template variables. Use ordered_json so
  // that dicts printed by `tojson` keep the caller's key order (as JSON.parse does in the reference).
  Result<std::string> render(const nlohmann::ordered_json& context,
                             const JinjaRenderOptions& options = {}) const;

  const std::string& source() const { return *source_; }

 private:
  std::shared_ptr<const std::string> source_;
  std::shared_ptr<const std::vector<std::unique_ptr<jinja::Node>>> program_;
};

}  // namespace splash
