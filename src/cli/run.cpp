// `splash run --model PATH -p PROMPT`: one prompt, text streamed to stdout, timings to stderr.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_source.h"
#include "cli/spec_flags.h"
#include "engine/generate.h"
#include "spec/make_source.h"
#include "tokenizer/model_tokenizer.h"

namespace splash::cli {

namespace {

struct RunArgs {
  std::string model;
  ModelSourceArgs source;  // --revision, --offline
  std::string tokenizer;
  std::string prompt;
  int64_t n_predict = 128;
  float temp = 0.8f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  std::optional<uint64_t> seed;
  int threads = 0;
  std::string kv_format = "int8";
  std::vector<std::string> stop;
  bool no_bos = false;
  SpecArgs spec;
};

std::optional<KvFormat> parse_kv_format(const std::string& s) {
  if (s == "int8") return KvFormat::kInt8;
  if (s == "bf16") return KvFormat::kBF16;
  if (s == "f32") return KvFormat::kF32;
  return std::nullopt;
}

int run_usage_error(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  return 2;
}

int run_run(const RunArgs& a) {
  // Flags first (exit 2), so a typo is reported before a slow model load.
  if (a.n_predict < 0) return run_usage_error(str_cat("-n ", a.n_predict, " is negative"));
  if (a.threads < 0) return run_usage_error(str_cat("--threads ", a.threads, " is negative"));
  std::optional<KvFormat> kv_format = parse_kv_format(a.kv_format);
  if (!kv_format) return run_usage_error(str_cat("--kv-format '", a.kv_format, "' is not one of int8, bf16, f32"));
  GenerateOptions opt;
  opt.max_tokens = a.n_predict;
  opt.kv_format = *kv_format;
  opt.threads = a.threads;
  opt.stop = a.stop;
  opt.sampling.temperature = a.temp;
  opt.sampling.top_k = a.top_k;
  opt.sampling.top_p = a.top_p;
  opt.sampling.min_p = a.min_p;
  opt.sampling.repetition_penalty = a.repeat_penalty;
  opt.sampling.seed = a.seed;
  if (Status st = opt.sampling.validate(); !st.ok()) return run_usage_error(st.error_message());
  auto spec = spec_options(a.spec);
  if (!spec.ok()) return run_usage_error(spec.error_message());

  ModelFilesOptions fopts;
  fopts.tokenizer_path = a.tokenizer;
  auto path = resolve_model_arg(a.model, a.source);
  if (!path.ok()) return std::fprintf(stderr, "error: %s\n", path.error_message().c_str()), 1;
  auto files = ModelFiles::open(*path, fopts);
  if (!files.ok()) return std::fprintf(stderr, "error: %s\n", files.error_message().c_str()), 1;
  auto tok = load_model_tokenizer(*files);
  if (!tok.ok()) return std::fprintf(stderr, "error: %s\n", tok.error_message().c_str()), 1;
  if (!*tok) return std::fprintf(stderr, "error: %s has no tokenizer (llama2.c: pass --tokenizer)\n", a.model.c_str()), 1;
  const Tokenizer& tokenizer = **tok;
  auto model = Model::load(*files);
  if (!model.ok()) return std::fprintf(stderr, "error: %s\n", model.error_message().c_str()), 1;

  auto drafter = make_drafter_source(*spec, *path, *files, *model, 1, a.threads);
  if (!drafter.ok()) return std::fprintf(stderr, "error: %s\n", drafter.error_message().c_str()), 1;
  opt.drafter = drafter->get();
  opt.spec_block = spec->block;

  std::vector<int32_t> prompt;
  if (!a.no_bos && tokenizer.bos_id() >= 0) prompt.push_back(tokenizer.bos_id());
  const std::vector<int32_t> text_ids = tokenizer.encode(a.prompt, /*add_special=*/false, /*parse_special=*/true);
  prompt.insert(prompt.end(), text_ids.begin(), text_ids.end());
  if (prompt.empty())
    return run_usage_error(tokenizer.bos_id() < 0 ? "the prompt is empty and the vocabulary has no BOS token"
                                              : "the prompt is empty and --no-bos was given");

  auto stats = generate(*model, tokenizer, prompt, opt, [](std::string_view s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  });
  std::fputc('\n', stdout);
  std::fflush(stdout);
  if (!stats.ok()) return std::fprintf(stderr, "error: %s\n", stats.error_message().c_str()), 1;
  std::fprintf(stderr, "prompt tokens %lld · TTFT %.1f ms · prefill %.1f tok/s · decode %.1f tok/s (%lld tokens)\n",
               static_cast<long long>(stats->n_prompt), stats->ttft_ms, stats->prefill_tok_s, stats->decode_tok_s,
               static_cast<long long>(stats->n_generated));
  if (opt.drafter && stats->n_decode_steps > 0)
    std::fprintf(stderr, "speculative %s · %lld drafted · %lld accepted (%.0f%%) · %.2f tokens per decode step\n",
                 std::string(opt.drafter->method()).c_str(), static_cast<long long>(stats->drafted_tokens),
                 static_cast<long long>(stats->accepted_draft_tokens),
                 stats->drafted_tokens > 0 ? 100.0 * stats->accepted_draft_tokens / stats->drafted_tokens : 0.0,
                 static_cast<double>(stats->n_decode_tokens) / stats->n_decode_steps);
  if (!a.seed && !opt.sampling.is_greedy())
    std::fprintf(stderr, "seed %llu\n", static_cast<unsigned long long>(stats->seed));
  if (stats->finish == FinishReason::kContext)
    std::fprintf(stderr, "stopped at the model's context limit (%lld tokens)\n",
                 static_cast<long long>(model->max_context()));
  return 0;
}

}  // namespace

Runner register_run(CLI::App& app) {
  auto a = std::make_shared<RunArgs>();
  app.add_option("-m,--model", a->model,
                 "Model: .gguf file, llama2.c .bin, safetensors directory, or OWNER/REPO[:VARIANT] on the Hub")
      ->required();
  add_model_source_flags(app, a->source);
  app.add_option("-p,--prompt", a->prompt, "Prompt text (empty: generate from BOS)");
  app.add_option("-n,--n-predict", a->n_predict, "Tokens to generate")->capture_default_str();
  app.add_option("--temp", a->temp, "Temperature (0 = greedy)")->capture_default_str();
  app.add_option("--top-k", a->top_k, "Top-k (0 = off)")->capture_default_str();
  app.add_option("--top-p", a->top_p, "Top-p (1 = off)")->capture_default_str();
  app.add_option("--min-p", a->min_p, "Min-p (0 = off)")->capture_default_str();
  app.add_option("--repeat-penalty", a->repeat_penalty, "Repetition penalty (1 = off)")->capture_default_str();
  app.add_option("--seed", a->seed, "Sampler seed (default: random, printed to stderr so the run can be repeated)");
  app.add_option("-t,--threads", a->threads, "Threads (0 = physical cores)")->capture_default_str();
  app.add_option("--kv-format", a->kv_format, "KV cache format: int8, bf16 or f32")->capture_default_str();
  app.add_option("--stop", a->stop, "Stop string (repeatable)");
  app.add_flag("--no-bos", a->no_bos, "Do not prepend the BOS token");
  app.add_option("--tokenizer", a->tokenizer, "llama2.c tokenizer.bin (default: beside the model)");
  add_spec_flags(app, a->spec);
  return [a] { return run_run(*a); };
}

}  // namespace splash::cli
