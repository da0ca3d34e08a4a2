// `--model` for `splash run` and `splash bench`: a local path or a Hub repository id, with
// --revision and --offline, resolved through hub::resolve_model (the Hub's console lines go to
// stderr, since stdout carries the generated text or the benchmark table).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "core/result.h"

namespace splash::cli {

struct ModelSourceArgs {
  std::string revision = "main";
  bool offline = false;
};

void add_model_source_flags(CLI::App& app, ModelSourceArgs& args);

// The local path to open; errors are ready to print after "error: ".
Result<std::string> resolve_model_arg(const std::string& model, const ModelSourceArgs& args);

}  // namespace splash::cli
