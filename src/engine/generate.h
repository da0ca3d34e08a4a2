// One prompt, generated to the end on its own: what `splash run` (and `splash bench-spec`) drives.
// It is the server's Engine (engine/scheduler.h) with one lane, so prefill, sampling, speculative
// drafting and verification, stop strings and limits are the same code as when serving.
//
//   GenerateOptions opt;  opt.max_tokens = 64;  opt.sampling.temperature = 0;
//   auto stats = generate(model, tokenizer, prompt_ids, opt, [](std::string_view s) { fwrite(...); });
//
// Ownership: generate() makes its own one-lane Engine (a KV pool sized for prompt + max_tokens,
// capped at the model's context, no prefix cache; a thread pool; the engine thread) and frees it
// before returning. Model and Tokenizer are only read, so several generate() calls may run at once on
// the same model. on_text runs on the engine thread, one call at a time, while generate() waits.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache/kv_pages.h"
#include "core/finish_reason.h"
#include "core/result.h"
#include "model/model.h"
#include "sampling/sampling_params.h"
#include "spec/drafter.h"
#include "tokenizer/tokenizer.h"

namespace splash {

struct GenerateOptions {
  // >= 0; 0 = prefill only (the engine's prompt-scoring request: every prompt row's logits are
  // computed, nothing is sampled).
  int64_t max_tokens = 128;
  SamplingParams sampling;
  std::vector<std::string> stop;  // stop strings, matched on the decoded text across tokens
  KvFormat kv_format = KvFormat::kInt8;
  int threads = 0;           // 0 = default_thread_count()
  int64_t chunk_tokens = 0;  // prefill chunk; 0 = the model's default
  // Speculative decoding (spec/): the drafter proposes up to spec_block - 1 tokens per step and the
  // target verifies them in one pass; greedy output is token-for-token that of plain decoding, sampled
  // output has the same distribution. nullptr = plain decoding. Not owned.
  const DrafterSource* drafter = nullptr;
  int spec_block = 8;
  bool spec_time_rule = true;  // EngineOptions::spec_time_rule
};

struct GenerateStats {
  int64_t n_prompt = 0;
  int64_t n_generated = 0;       // sampled tokens, an end-of-generation token excluded
  std::vector<int32_t> tokens;   // [n_generated] the sampled ids (the token that completed a stop
                                 // string included, although its text is cut)
  double ttft_ms = 0;            // start of prefill to the first sampled token
  double prefill_ms = 0;         // the prompt's forward pass(es)
  double decode_ms = 0;          // first sampled token to the end
  double prefill_tok_s = 0;      // n_prompt / prefill time
  double decode_tok_s = 0;       // decode tokens / decode time; 0 when no decode step ran
  int64_t n_decode_steps = 0;    // decode forward passes (one token each, or a verify block)
  int64_t n_decode_tokens = 0;   // tokens sampled by those passes (decode_tok_s counts these)
  int64_t drafted_tokens = 0;    // proposals verified
  int64_t accepted_draft_tokens = 0;  // proposals the target accepted
  // kStop (an end-of-generation token, or stop string number stop_index), kLength or kContext.
  FinishReason finish = FinishReason::kLength;
  int32_t stop_index = -1;       // kStop by a stop string: its index in GenerateOptions::stop, else -1
  uint64_t seed = 0;             // the sampler's seed (reproduce a run with it)
};

// Called with each piece of text that is safe to show (never half a UTF-8 character, never a part
// of a stop string).
using OnText = std::function<void(std::string_view)>;

// Errors: Engine::submit's (an empty prompt, a prompt at or past the context limit, invalid sampling
// parameters or stop strings, a token outside the vocabulary), KV allocation failure, a failed forward.
Result<GenerateStats> generate(const Model& model, const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                               const GenerateOptions& options, const OnText& on_text);

}  // namespace splash
