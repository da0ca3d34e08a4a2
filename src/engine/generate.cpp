#include "engine/generate.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "engine/scheduler.h"
#include "sampling/sampler.h"

namespace splash {

Result<GenerateStats> generate(const Model& model, const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                               const GenerateOptions& options, const OnText& on_text) {
  if (options.max_tokens < 0) return make_error("generate: max_tokens = ", options.max_tokens, " is negative");
  // The seed is fixed here so that the stats can report the one a random run used.
  SPLASH_TRY(Sampler seeded, Sampler::create(options.sampling));
  EngineRequest request;
  request.prompt.assign(prompt.begin(), prompt.end());
  request.sampling = options.sampling;
  request.sampling.seed = seeded.seed();
  request.max_tokens = options.max_tokens;
  request.prompt_logprobs = options.max_tokens == 0;  // the engine's prefill-only request
  request.stop = options.stop;

  // Every position this run can reach: the prompt, then one per decode step (the last sampled token
  // is never fed back), capped by the context; one page of slack.
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  const int64_t n_positions = std::min(model.max_context(), n_prompt + std::max<int64_t>(options.max_tokens - 1, 0));
  EngineOptions eo;
  eo.lanes = 1;
  eo.queue_size = 1;
  eo.kv_pages = (n_positions + kKvPageTokens - 1) / kKvPageTokens + 1;
  eo.kv_format = options.kv_format;
  eo.threads = options.threads;
  eo.chunk_tokens = options.chunk_tokens;
  eo.prefix_cache = false;  // one request: nothing to share
  eo.drafter = options.spec_block > 1 ? options.drafter : nullptr;
  eo.spec_block = options.spec_block;
  eo.spec_time_rule = options.spec_time_rule;
  SPLASH_TRY(std::unique_ptr<Engine> engine, Engine::create(model, tokenizer, eo));

  GenerateStats stats;
  stats.n_prompt = n_prompt;
  stats.seed = seeded.seed();
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  EngineEvent end;
  auto on_event = [&](const EngineEvent& e) {
    if (e.kind == EngineEvent::kText) {
      stats.tokens.insert(stats.tokens.end(), e.tokens.begin(), e.tokens.end());
      if (!e.text.empty() && on_text) on_text(e.text);
    } else if (e.kind == EngineEvent::kDone) {
      std::lock_guard lk(mu);
      end = e;
      done = true;
      cv.notify_one();
    }
  };
  SPLASH_TRY(uint64_t id, engine->submit(std::move(request), on_event));
  (void)id;
  {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return done; });
  }
  engine->shutdown();  // joins the engine thread: its counters are final
  if (end.finish == FinishReason::kError) return make_error("generate: ", end.error);
  if (end.finish != FinishReason::kStop && end.finish != FinishReason::kLength && end.finish != FinishReason::kContext)
    return make_error("generate: the request ended early (", finish_reason_name(end.finish), ")");

  const EngineStatus st = engine->status();
  stats.n_generated = end.completion_tokens;
  stats.finish = end.finish;
  stats.stop_index = end.stop_index;
  stats.ttft_ms = end.prompt_ms;
  stats.prefill_ms = st.metrics.prefill_ms;
  stats.prefill_tok_s = stats.prefill_ms > 0 ? n_prompt * 1000.0 / stats.prefill_ms : 0;
  stats.decode_ms = end.predicted_ms;
  stats.n_decode_steps = st.scheduler.decode_batches;
  stats.n_decode_tokens = st.metrics.decode_tokens;
  stats.decode_tok_s =
      stats.n_decode_tokens > 0 && stats.decode_ms > 0 ? stats.n_decode_tokens * 1000.0 / stats.decode_ms : 0;
  stats.drafted_tokens = st.metrics.drafted_tokens;
  stats.accepted_draft_tokens = st.metrics.accepted_draft_tokens;
  return stats;
}

}  // namespace splash
