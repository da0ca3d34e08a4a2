// `splash bench --spec METHOD`: decode speed with and without speculative decoding (spec 6 figures
// for docs/PERFORMANCE.md). Greedy generate() of -n tokens after a prompt, plain and speculative in
// alternation, -r times each; prints median decode tok/s of both, the speedup, the acceptance rate
// and the mean tokens per decode step (mean accepted length + 1 for the target's own token).
#pragma once

#include <string>

#include "cli/spec_flags.h"
#include "formats/model_files.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace splash::cli {

struct SpecBenchArgs {
  SpecArgs spec;               // --spec also accepts "random" here (a drafter proposing garbage)
  std::string prompt;          // --spec-prompt TEXT
  std::string prompt_file;     // --spec-prompt-file PATH
  int repeat_prompt = 1;       // --spec-prompt-repeat N: the prompt text N times (prompt lookup's case)
};

int run_spec_bench(const SpecBenchArgs& args, const std::string& model_path, const ModelFiles& files, const Model& model,
                   int64_t n_gen, int reps, int threads, KvFormat kv_format, bool json);

void add_spec_bench_flags(CLI::App& app, SpecBenchArgs& args);

}  // namespace splash::cli
