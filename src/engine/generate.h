// A single-sequence generation loop: prefill the prompt, then sample, detokenize and stream one
// token at a time until an end-of-generation token, a stop string, max_tokens or the model's context
// limit. This is what `splash run` drives; the server's batched engine is a separate, larger loop.
//
//   GenerateOptions opt;  opt.max_tokens = 64;  opt.sampling.temperature = 0;
//   auto stats = generate(model, tokenizer, prompt_ids, opt, [](std::string_view s) { fwrite(...); });
//
// Ownership: generate() allocates its own KV pool (sized for prompt + max_tokens, capped at the
// model's context) and thread pool, and frees both before returning. Model and Tokenizer are only
// read, so several generate() calls may run at once on the same model.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache/kv_pages.h"
#include "core/result.h"
#include "model/model.h"
#include "sampling/sampling_params.h"
#include "spec/drafter.h"
#include "tokenizer/tokenizer.h"

namespace splash {

enum class StopReason : uint8_t {
  kEos,         // the model produced an end-of-generation token (Tokenizer::is_eog)
  kStopString,  // the text reached one of GenerateOptions::stop
  kLength,      // max_tokens tokens were generated
  kContext,     // the sequence reached Model::max_context()
};
const char* stop_reason_name(StopReason r);  // "eos", "stop string", "length", "context limit"

struct GenerateOptions {
  int64_t max_tokens = 128;  // >= 0; 0 = prefill only
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
  // Whether the draft budget also weighs each step's wall time (spec/draft_budget.h: drafting slower
  // than plain decoding pauses). false = acceptance alone decides, a schedule that does not depend
  // on the machine's speed (tests that count steps; acceptance measurements).
  bool spec_time_rule = true;
};

struct GenerateStats {
  int64_t n_prompt = 0;
  int64_t n_generated = 0;       // sampled tokens, an end-of-generation token excluded
  std::vector<int32_t> tokens;   // [n_generated] the sampled ids (the token that completed a stop
                                 // string included, although its text is cut)
  double ttft_ms = 0;            // start of prefill to the first sampled token
  double prefill_ms = 0;         // the prompt's forward pass(es)
  double decode_ms = 0;          // every decode forward pass after the first token
  double prefill_tok_s = 0;      // n_prompt / prefill time
  double decode_tok_s = 0;       // decode steps / decode time; 0 when no decode step ran
  int64_t n_decode_steps = 0;    // decode forward passes (one token each, or a verify block)
  int64_t n_decode_tokens = 0;   // tokens sampled by those passes (decode_tok_s counts these)
  int64_t drafted_tokens = 0;    // proposals verified
  int64_t accepted_draft_tokens = 0;  // proposals the target accepted
  StopReason stop = StopReason::kLength;
  uint64_t seed = 0;             // the sampler's seed (reproduce a run with it)
};

// Called with each piece of text that is safe to show (never half a UTF-8 character, never a part
// of a stop string).
using OnText = std::function<void(std::string_view)>;

// Errors: an empty prompt (pass at least BOS), a prompt at or past the context limit, invalid
// sampling parameters or stop strings, a token outside the vocabulary, KV allocation failure.
Result<GenerateStats> generate(const Model& model, const Tokenizer& tokenizer, std::span<const int32_t> prompt,
                               const GenerateOptions& options, const OnText& on_text);

}  // namespace splash
