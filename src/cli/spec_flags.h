// The speculative-decoding flags `splash run`, `splash bench` and `splash serve` share (spec 6):
// --spec METHOD (auto|dflash|draft|lookup|mtp|off), --spec-block N, --draft-model PATH.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "core/result.h"
#include "spec/drafter.h"

namespace splash::cli {

struct SpecArgs {
  std::string method = "auto";
  int block = 8;
  std::string draft_model;
  int lookup_ngram = 3;
};

// `with_draft_model`: false where the command registers --draft-model itself (serve resolves it
// through the Hub); it then sets SpecArgs::draft_model.
void add_spec_flags(CLI::App& app, SpecArgs& args, bool with_draft_model = true);

// Parsed and checked; errors are ready to print after "error: " (usage errors, exit 2).
Result<SpecOptions> spec_options(const SpecArgs& args);

}  // namespace splash::cli
