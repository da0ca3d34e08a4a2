#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/version.h"

int main(int argc, char** argv) {
  using splash::launch::Agent;
  if (argc >= 2) {
    for (Agent agent : {Agent::kClaude, Agent::kCodex, Agent::kOpencode}) {
      if (std::string(argv[1]) == splash::launch::agent_program(agent))
        return splash::cli::run_agent_command(agent, std::vector<std::string>(argv + 2, argv + argc));
    }
  }
  CLI::App app{"Splash: a local LLM inference server", "splash"};
  app.set_version_flag("--version", std::string("Splash ") + splash::kVersion);
  app.require_subcommand(1);

  std::vector<std::pair<CLI::App*, splash::cli::Runner>> commands;
  auto add = [&](const char* name, const char* help, splash::cli::Runner (*reg)(CLI::App&)) {
    CLI::App* sub = app.add_subcommand(name, help);
    commands.emplace_back(sub, reg(*sub));
  };
  add("inspect", "Print a model's architecture, tensors, quantization and tokenizer", splash::cli::register_inspect);
  add("convert", "Convert a model between llama2.c, GGUF and (MLX) safetensors", splash::cli::register_convert);
  add("make-test-model", "Write a tiny random-weight (or benchmark-shaped) model", splash::cli::register_make_test_model);
  add("run", "Generate text from a prompt, streamed to stdout, timings to stderr", splash::cli::register_run);
  add("serve", "Serve a model over an OpenAI-compatible HTTP API and a chat page", splash::cli::register_serve);
  add("bench", "Measure prefill (ppN) and decode (tgN) speed, llama-bench style", splash::cli::register_bench);
  add("perplexity", "Perplexity of a text file (llama-perplexity's method) and KL divergence against a base model",
      splash::cli::register_perplexity);
  // Listed for --help only: main() runs them above, before CLI11 sees their arguments.
  for (Agent agent : {Agent::kClaude, Agent::kCodex, Agent::kOpencode})
    app.add_subcommand(splash::launch::agent_program(agent),
                       std::string("Run ") + splash::launch::agent_title(agent) +
                           " against the Splash server on this machine: [--port P] [--model M] [-- agent args]");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto& [sub, run] : commands)
    if (sub->parsed()) return run();
  return 2;
}
