// What `--model` names (spec 1.2): a local file or directory, or a Hugging Face repository
// `OWNER/REPO` (MLX / safetensors) or `OWNER/REPO:VARIANT` (a GGUF repository; the variant picks
// one file by the rule in gguf_select.h). Pure parsing; the caller says whether a path exists.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace splash::hub {

struct ModelRef {
  enum class Kind { kLocal, kHub };
  Kind kind = Kind::kLocal;
  std::string path;     // kLocal: as given
  std::string repo;     // kHub: "owner/name"
  std::string variant;  // kHub: GGUF variant ("Q4_K_M"); empty for MLX / safetensors repositories

  bool is_hub() const { return kind == Kind::kHub; }
  // "owner/name[:variant]" for a repository, the path otherwise.
  std::string text() const;
};

// Hugging Face repository id rule: OWNER/NAME, each part 1..96 of [A-Za-z0-9_.-] starting and
// ending with a letter, digit or '_', no "--" or "..", not ending in ".git".
Status check_repo_id(std::string_view repo);
// [A-Za-z0-9][A-Za-z0-9._-]{0,63}
Status check_variant(std::string_view variant);
// A branch, tag or commit: non-empty, no whitespace or control characters, no ".." path segment,
// no leading '/' (it becomes part of a URL path and of refs/<revision> in the cache).
Status check_revision(std::string_view revision);
// True for a full 40-hex commit id.
bool is_commit_hash(std::string_view revision);

// `text` is a local path when `exists(text)` (a file or a directory is there), or when it looks like
// one (starts with '/', '.', '~', ends in .gguf / .bin / .safetensors); otherwise it must be a
// repository id with an optional :VARIANT. Errors name --model and say what was expected.
Result<ModelRef> parse_model_ref(const std::string& text, const std::function<bool(const std::string&)>& exists);

}  // namespace splash::hub
