// Each subcommand registers its flags on the CLI11 app and runs when selected. main.cpp only wires
// them together; the work lives in the library modules.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "launch/agent_config.h"

namespace splash::cli {

// A subcommand's entry point, run after parsing; returns the process exit code.
using Runner = std::function<int()>;

Runner register_inspect(CLI::App& app);
Runner register_convert(CLI::App& app);
Runner register_make_test_model(CLI::App& app);
Runner register_run(CLI::App& app);
Runner register_bench(CLI::App& app);
Runner register_serve(CLI::App& app);
Runner register_perplexity(CLI::App& app);

// `splash claude|codex|opencode ARGS...` (src/cli/agents.cpp). Not parsed by CLI11: every argument
// but the launcher's own --port / --model belongs to the agent, its --help included, so main()
// hands these commands their raw arguments.
int run_agent_command(launch::Agent agent, const std::vector<std::string>& args);

}  // namespace splash::cli
