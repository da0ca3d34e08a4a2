#include "engine/generate.h"

#include <algorithm>
#include <chrono>

#include "core/thread_pool.h"
#include "sampling/sampler.h"
#include "sampling/stop_matcher.h"
#include "spec/draft_budget.h"
#include "spec/spec_sequence.h"
#include "spec/verify.h"
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

  // Speculative decoding: the drafter's hidden layers are asked of every pass, the prefill's included.
  std::unique_ptr<Drafter> drafter = options.drafter && options.spec_block > 1 ? options.drafter->make() : nullptr;
  if (drafter) fwd.hidden_layers = drafter->hidden_layers();

  const Clock::time_point t_start = Clock::now();
  SequenceRun run{&seq, prompt, LogitRows::kLast};
  ForwardOutput out;  // reused by every step (Model::forward_into: no allocation per step)
  SPLASH_TRY_STATUS(model.forward_into({&run, 1}, kv, threads, out, fwd));
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
  bool done = false;
  // Speculative decoding: every pass feeds [last token, proposals...] and returns a logits row per fed
  // token; the rows are walked in order while the target's token equals the proposal (spec/verify.h).
  std::vector<float> hidden_rows;
  std::vector<int32_t> committed(prompt.begin(), prompt.end());  // this pass's newly committed tokens
  std::vector<int32_t> fed;                                        // [last, proposals...] of the pass
  std::vector<int32_t> proposals;
  std::vector<float> snapshot;  // recurrent state before a verify pass (hybrid models)
  DraftBudget budget;           // proposals per step, from how the last ones fared
  Clock::time_point t_step{};   // when the current decode step began (its drafting included)
  auto observe = [&](int64_t hidden_first_pos, int64_t n_hidden) -> Status {
    if (!drafter) return {};
    DraftObservation obs;
    obs.tokens = committed;
    if (!fwd.hidden_layers.empty() && n_hidden > 0) {
      gather_hidden_rows(out, 0, 0, n_hidden, hidden_rows);
      obs.hidden = hidden_rows.data();
      obs.n_hidden_rows = n_hidden;
      obs.hidden_position = hidden_first_pos;
      obs.hidden_width = static_cast<int64_t>(hidden_rows.size()) / n_hidden;
    }
    return drafter->observe(obs);
  };
  SPLASH_TRY_STATUS(observe(0, n_prompt));
  committed.clear();
  while (!done) {
    const int64_t k = static_cast<int64_t>(proposals.size());
    const int64_t n_kv = seq.n_tokens();  // after the pass: n_kv - k = KV length plain decoding has at row 0
    int64_t n_accepted = 0;
    for (int64_t i = 0; i <= k; ++i) {
      std::copy_n(out.logits_at(0, i), out.n_vocab, logits.begin());
      const int32_t proposal = i < k ? proposals[static_cast<size_t>(i)] : -1;
      SPLASH_TRY(int32_t tok, verify_row(sampler, logits, proposal));
      if (stats.n_generated == 0 && t_decode == Clock::time_point{}) {
        stats.ttft_ms = ms_since(t_start);
        t_decode = Clock::now();
      } else {
        ++stats.n_decode_tokens;
      }
      done = true;
      if (tokenizer.is_eog(tok)) {
        stats.stop = StopReason::kEos;
        break;
      }
      sampler.accept(tok);
      stats.tokens.push_back(tok);
      committed.push_back(tok);
      ++stats.n_generated;
      StopMatcher::Feed fed_text = stops.feed(detok.push(tok));
      emit(fed_text.emit);
      if (fed_text.stopped) {
        stats.stop = StopReason::kStopString;
        stopped = true;
        break;
      }
      if (stats.n_generated >= options.max_tokens) {
        stats.stop = StopReason::kLength;
        break;
      }
      if (n_kv - k + i >= max_context) {
        stats.stop = StopReason::kContext;
        break;
      }
      done = false;
      if (tok != proposal) break;
      ++n_accepted;
    }
    if (k > 0) budget.update(static_cast<int>(k), static_cast<int>(n_accepted), options.spec_block - 1);
    // The step's wall time (drafting, forward, verification) against what it committed.
    if (drafter && options.spec_time_rule && t_step != Clock::time_point{})
      budget.observe_step(k > 0, static_cast<int>(n_accepted + 1),
                          std::chrono::duration<double>(Clock::now() - t_step).count());
    stats.drafted_tokens += k;
    stats.accepted_draft_tokens += n_accepted;
    if (k > 0) SPLASH_TRY_STATUS(rollback_verify(model, kv, threads, seq, fed, n_accepted + 1, snapshot));
    // The prefill's row gave its hidden rows already; a decode pass gives those of its kept tokens.
    SPLASH_TRY_STATUS(observe(n_kv - k - 1, stats.n_decode_steps > 0 ? n_accepted + 1 : 0));
    committed.clear();
    if (done) break;
    const int32_t last = stats.tokens.back();
    t_step = Clock::now();
    proposals.clear();
    if (drafter) {
      // No more proposals than tokens left to generate after this one, or positions left in the context.
      const int64_t room = std::min<int64_t>({budget.next(options.spec_block - 1), options.max_tokens - stats.n_generated - 1,
                                              max_context - seq.n_tokens() - 1});
      if (room > 0) {
        SPLASH_TRY(proposals, drafter->propose(static_cast<int>(room)));
        if (static_cast<int64_t>(proposals.size()) > room) proposals.resize(static_cast<size_t>(room));
        for (int32_t p : proposals)
          if (p < 0 || p >= out.n_vocab) return make_error("generate: the ", drafter->method(), " drafter proposed token ", p, ", outside the vocabulary");
      }
    }
    fed.assign(1, last);
    fed.insert(fed.end(), proposals.begin(), proposals.end());
    if (model.recurrent_state_floats() > 0 && !proposals.empty()) snapshot = seq.recurrent;
    SequenceRun step{&seq, fed, proposals.empty() ? LogitRows::kLast : LogitRows::kAll};
    SPLASH_TRY_STATUS(model.forward_into({&step, 1}, kv, threads, out, fwd));
    ++stats.n_decode_steps;
  }
  if (stats.n_generated > 0) stats.decode_ms = ms_since(t_decode);
  stats.decode_tok_s = stats.n_decode_tokens > 0 && stats.decode_ms > 0 ? stats.n_decode_tokens * 1000.0 / stats.decode_ms : 0;
  if (!stopped) {
    StopMatcher::Feed fed = stops.feed(detok.flush());
    emit(fed.emit);
    if (fed.stopped) stats.stop = StopReason::kStopString;
    else emit(stops.finish());
  }
  return stats;
}

}  // namespace splash
