// `--model` to local files: a local path passes through; a repository id is resolved against the
// Hub (or the cache alone when offline), identified from its own metadata before any weight is
// fetched, downloaded into the Hugging Face cache, and answered with the snapshot path the loader
// opens. Console lines (spec 1.4) go to `out`, progress to `progress`:
//   Selected <file> from <repo>.
//   No GGUF is named for :<V> alone; using <file>, the only one whose name ends in -<V>.
//   Fetching N file(s), X, from <repo>@<commit>; cached files are reused.
//   Could not reach the Hub (<reason>); using the cached copy of <repo>@<commit>.
//   Using the cached copy of <repo>@<commit> (offline).
// Errors (the caller prints them, then "error: model download or verification failed" for kUnavailable):
//   kUnavailable: cannot resolve <repo>: <Hub reason>; <cache note>[; set HF_TOKEN or run 'hf auth
//   login' with access to this repository]
//   <repo>: <why the model cannot be served>   (identification, before any weight is downloaded)
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "core/result.h"
#include "hub/hub_settings.h"
#include "hub/model_ref.h"

namespace splash::hub {

struct ResolvedModel {
  std::string path;      // what ModelFiles::open takes: a .gguf file or a snapshot folder
  std::string model_id;  // "owner/repo[:variant]" for a repository, the file or folder name otherwise
  bool from_hub = false;
  std::string repo, commit;
  uint64_t bytes_downloaded = 0;
};

struct Console {
  std::FILE* out = stdout;       // installer lines
  std::FILE* progress = stderr;  // progress bars
};

Result<ResolvedModel> resolve_model(const ModelRef& ref, const HubSettings& settings, const Console& console = {});

// The whole `--model` text: parse_model_ref (a path that exists on disk is local) and resolve_model.
Result<ResolvedModel> resolve_model(const std::string& model, const HubSettings& settings,
                                    const Console& console = {});

// Repository files a safetensors / MLX model needs (config, tokenizer, chat template, weights).
std::vector<std::string> safetensors_files_needed(const std::vector<std::string>& repo_files);

}  // namespace splash::hub
