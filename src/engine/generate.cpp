#include "engine/generate.h"

#include <algorithm>
#include <chrono>

#include "core/thread_pool.h"
#include "sampling/sampler.h"
#include "sampling/stop_matcher.h"
#include "tokenizer/detokenizer.h"

namespace splash {

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::kEos: return "eos";
    case StopReason::kStopString: return "stop string";
    case StopReason::kLength: return "length";
    case StopReason::kContext: return "context limit";
  }
  return "?";
}

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Releases the sequence's pages whatever way generate() returns.
struct SequenceGuard {
  KvPagePool& pool;
  SequenceState& seq;
  ~SequenceGuard() { release_sequence(pool, seq); }
};

}  // namespace

Result<GenerateStats> generate(const Model& model, const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                               const GenerateOptions& options, const OnText& on_text) {
  if (prompt.empty()) return make_error("generate: the prompt is empty (pass at least the BOS token)");
  if (options.max_tokens < 0) return make_error(str_cat("generate: max_tokens = ", options.max_tokens, " is negative"));
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  const int64_t max_context = model.max_context();
  if (n_prompt >= max_context)
    return make_error(str_cat("generate: the prompt has ", n_prompt, " tokens; the model's context limit is ",
                              max_context, " (no room to generate)"));
  SPLASH_TRY_STATUS(options.sampling.validate());
  SPLASH_TRY(Sampler sampler, Sampler::create(options.sampling));
  SPLASH_TRY(StopMatcher stops, StopMatcher::create(options.stop));

  // Every position this run can reach: the prompt, then one per decode step (the last sampled token
  // is never fed back), capped by the context.
  const int64_t n_positions = std::min(max_context, n_prompt + std::max<int64_t>(options.max_tokens - 1, 0));
  const int64_t n_pages = (n_positions + kKvPageTokens - 1) / kKvPageTokens + 1;
  SPLASH_TRY(KvPagePool kv, KvPagePool::create(model.kv_cache_config(options.kv_format, n_pages)));
  ThreadPool threads(options.threads);
  ForwardOptions fwd;
  fwd.chunk_tokens = options.chunk_tokens;

  GenerateStats stats;
  stats.n_prompt = n_prompt;
  stats.seed = sampler.seed();
  sampler.accept_prompt(prompt);
  IncrementalDetokenizer detok(tokenizer);
  SequenceState seq;
  SequenceGuard guard{kv, seq};

  const Clock::time_point t_start = Clock::now();
  SequenceRun run{&seq, prompt, LogitRows::kLast};
  SPLASH_TRY(ForwardOutput out, model.forward({&run, 1}, kv, threads, fwd));
  stats.prefill_ms = ms_since(t_start);
  stats.prefill_tok_s = stats.prefill_ms > 0 ? n_prompt * 1000.0 / stats.prefill_ms : 0;

  auto emit = [&](const std::string& text) {
    if (!text.empty() && on_text) on_text(text);
  };
  if (options.max_tokens == 0) {
    stats.ttft_ms = stats.prefill_ms;
    stats.stop = StopReason::kLength;
    return stats;
  }

  std::vector<float> logits(static_cast<size_t>(out.n_vocab));  // [n_vocab], mutated by the sampler
  Clock::time_point t_decode{};
  bool stopped = false;
  while (true) {
    std::copy_n(out.logits_row(0), out.n_vocab, logits.begin());
    SPLASH_TRY(int32_t tok, sampler.sample(logits));
    if (stats.n_generated == 0) {
      stats.ttft_ms = ms_since(t_start);
      t_decode = Clock::now();
    }
    if (tokenizer.is_eog(tok)) {
      stats.stop = StopReason::kEos;
      break;
    }
    sampler.accept(tok);
    stats.tokens.push_back(tok);
    ++stats.n_generated;
    StopMatcher::Feed fed = stops.feed(detok.push(tok));
    emit(fed.emit);
    if (fed.stopped) {
      stats.stop = StopReason::kStopString;
      stopped = true;
      break;
    }
    if (stats.n_generated >= options.max_tokens) {
      stats.stop = StopReason::kLength;
      break;
    }
    if (seq.n_tokens() >= max_context) {
      stats.stop = StopReason::kContext;
      break;
    }
    SequenceRun step{&seq, {&tok, 1}, LogitRows::kLast};
    SPLASH_TRY(ForwardOutput next, model.forward({&step, 1}, kv, threads, fwd));
    out = std::move(next);
    ++stats.n_decode_steps;
  }
  if (stats.n_generated > 0) stats.decode_ms = ms_since(t_decode);
  stats.decode_tok_s = stats.n_decode_steps > 0 && stats.decode_ms > 0 ? stats.n_decode_steps * 1000.0 / stats.decode_ms : 0;
  if (!stopped) {
    StopMatcher::Feed fed = stops.feed(detok.flush());
    emit(fed.emit);
    if (fed.stopped) stats.stop = StopReason::kStopString;
    else emit(stops.finish());
  }
  return stats;
}

}  // namespace splash
