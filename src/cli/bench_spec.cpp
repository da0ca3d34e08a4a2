#include "cli/bench_spec.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/mapped_file.h"
#include "engine/generate.h"
#include "spec/make_source.h"
#include "spec/random_drafter.h"
#include "tokenizer/model_tokenizer.h"

namespace splash::cli {

void add_spec_bench_flags(CLI::App& app, SpecBenchArgs& args) {
  app.add_option("--spec", args.spec.method,
                 "Also measure speculative decoding with this drafter: auto, dflash, draft, lookup, mtp, random (proposes "
                 "garbage: the cost of rejections) or off")
      ->capture_default_str();
  app.add_option("--spec-block", args.spec.block, "Query rows per verify step (last token + N-1 proposals)")
      ->capture_default_str();
  app.add_option("--draft-model", args.spec.draft_model, "Draft model or DFlash checkpoint directory (--spec draft/dflash)");
  app.add_option("--spec-prompt", args.prompt, "Prompt text for the speculative test (default: BOS only)");
  app.add_option("--spec-prompt-file", args.prompt_file, "Prompt text file for the speculative test");
  app.add_option("--spec-prompt-repeat", args.repeat_prompt, "Repeat the prompt text N times")->capture_default_str();
}

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int run_spec_bench(const SpecBenchArgs& args, const std::string& model_path, const ModelFiles& files, const Model& model,
                   int64_t n_gen, int reps, int threads, KvFormat kv_format, bool json) {
  const bool random = args.spec.method == "random";
  SpecArgs sa = args.spec;
  if (random) sa.method = "off";
  auto so = spec_options(sa);
  if (!so.ok()) return std::fprintf(stderr, "error: %s\n", so.error_message().c_str()), 2;
  if (args.repeat_prompt < 1) return std::fprintf(stderr, "error: --spec-prompt-repeat must be >= 1\n"), 2;
  std::unique_ptr<DrafterSource> source;
  if (random) {
    source = std::make_unique<RandomDrafterSource>(static_cast<int32_t>(model.config().n_vocab), 1);
  } else {
    auto s = make_drafter_source(*so, model_path, files, model, 1, threads);
    if (!s.ok()) return std::fprintf(stderr, "error: %s\n", s.error_message().c_str()), 1;
    source = std::move(*s);
  }
  if (!source) return std::fprintf(stderr, "error: --spec %s: no drafter to measure\n", args.spec.method.c_str()), 2;

  auto tok = load_model_tokenizer(files);
  if (!tok.ok() || !*tok)
    return std::fprintf(stderr, "error: %s\n", tok.ok() ? "the model has no tokenizer" : tok.error_message().c_str()), 1;
  std::string text = args.prompt;
  if (!args.prompt_file.empty()) {
    auto t = read_text_file(args.prompt_file);
    if (!t.ok()) return std::fprintf(stderr, "error: %s\n", t.error_message().c_str()), 1;
    text = *t;
  }
  std::string repeated;
  for (int i = 0; i < args.repeat_prompt; ++i) repeated += text;
  std::vector<int32_t> prompt;
  if ((*tok)->bos_id() >= 0) prompt.push_back((*tok)->bos_id());
  for (int32_t id : (*tok)->encode(repeated, false, true)) prompt.push_back(id);
  if (prompt.empty()) return std::fprintf(stderr, "error: the prompt is empty and the vocabulary has no BOS\n"), 2;

  GenerateOptions o;
  o.max_tokens = n_gen;
  o.sampling.temperature = 0;
  o.kv_format = kv_format;
  o.threads = threads;
  o.spec_block = so->block;
  std::vector<double> plain_tps, spec_tps;
  GenerateStats last_spec;
  std::vector<int32_t> plain_tokens;
  for (int r = 0; r < reps + 1; ++r) {  // the first pair warms up (page faults, RoPE rows)
    o.drafter = nullptr;
    auto p = generate(model, **tok, prompt, o, nullptr);
    if (!p.ok()) return std::fprintf(stderr, "error: %s\n", p.error_message().c_str()), 1;
    o.drafter = source.get();
    auto s = generate(model, **tok, prompt, o, nullptr);
    if (!s.ok()) return std::fprintf(stderr, "error: %s\n", s.error_message().c_str()), 1;
    if (s->tokens != p->tokens)
      return std::fprintf(stderr, "error: speculative output differs from plain decoding (a bug: please report)\n"), 1;
    if (r == 0) continue;
    plain_tps.push_back(p->decode_tok_s);
    spec_tps.push_back(s->decode_tok_s);
    last_spec = std::move(*s);
  }
  const double plain = median(plain_tps), spec = median(spec_tps);
  const double rate = last_spec.drafted_tokens > 0
                          ? static_cast<double>(last_spec.accepted_draft_tokens) / last_spec.drafted_tokens
                          : 0.0;
  const double per_step = last_spec.n_decode_steps > 0
                              ? static_cast<double>(last_spec.n_decode_tokens) / last_spec.n_decode_steps
                              : 0.0;
  const std::string method(source->method());
  if (json) {
    nlohmann::json j = {{"test", "spec"},
                        {"method", method},
                        {"block", so->block},
                        {"prompt_tokens", prompt.size()},
                        {"n_gen", n_gen},
                        {"plain_decode_tokens_per_second", plain},
                        {"spec_decode_tokens_per_second", spec},
                        {"speedup", plain > 0 ? spec / plain : 0},
                        {"drafted_tokens", last_spec.drafted_tokens},
                        {"accepted_draft_tokens", last_spec.accepted_draft_tokens},
                        {"draft_acceptance_rate", rate},
                        {"tokens_per_decode_step", per_step}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("| method | block | prompt | tg | plain t/s | spec t/s | speedup | acceptance | tokens/step |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    std::printf("| %s | %d | %zu | %lld | %.1f | %.1f | %.2fx | %.1f%% | %.2f |\n", method.c_str(), so->block,
                prompt.size(), static_cast<long long>(n_gen), plain, spec, plain > 0 ? spec / plain : 0, 100 * rate,
                per_step);
  }
  return 0;
}

}  // namespace splash::cli
