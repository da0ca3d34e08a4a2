// Which GGUF of a repository `OWNER/REPO[:VARIANT]` means (spec 8.2). Candidates are the files in
// the repository root whose name ends in ".gguf" and does not contain "mmproj" (vision projectors
// are never targets). With a variant: the file whose name, after the words (split on '-') that all
// candidates share, is exactly VARIANT; else the only one ending in -VARIANT; else an error listing
// the candidates. Without a variant the repository must hold exactly one candidate. Case-insensitive.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"

namespace splash::hub {

struct GgufChoice {
  std::string file;
  bool by_ending = false;  // chosen as the only name ending in -VARIANT (the caller says so)
};

// `files`: every path of the repository (subfolders are ignored). Errors:
//   "select a GGUF with OWNER/REPO:VARIANT (files in the repository root: a.gguf, b.gguf)"
//   "no single GGUF matches :V (files in the repository root: ...)"   ("none" when there are none)
Result<GgufChoice> select_gguf(const std::vector<std::string>& files, const std::string& variant);

// The root GGUF candidates, sorted.
std::vector<std::string> gguf_candidates(const std::vector<std::string>& files);

}  // namespace splash::hub
