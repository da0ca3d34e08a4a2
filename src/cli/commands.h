// Each subcommand registers its flags on the CLI11 app and runs when selected. main.cpp only wires
// them together; the work lives in the library modules.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

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

}  // namespace splash::cli
