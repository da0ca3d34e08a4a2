// What an API asks for (a JSON Schema, a GBNF grammar, a regex) -> a Matcher for one request, with
// the compiled grammars and the vocabulary's mask cache kept for the next request.
//
//   ConstraintCompiler compiler([&] { return vocabulary_of(tokenizer, n_vocab); });  // built on first use
//   auto m = compiler.matcher({ConstraintSpec::Kind::kJsonSchema, schema.dump()});
//   if (!m) return 400 with m.error().message;        // names the schema feature or grammar line
//   request.constraint = *m;                          // the engine masks every sampled token with it
//
// Thread-safe.
#pragma once

#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "constrain/json_schema.h"
#include "constrain/matcher.h"
#include "constrain/tool_calls.h"
#include "core/result.h"

namespace splash::constrain {

struct ConstraintSpec {
  enum class Kind : uint8_t { kJsonSchema, kGbnf, kRegex, kToolCalls };
  // Reasoning before the constrained output: kNone, kOptional (the output may open with
  // "<think>...</think>"), kInside (the prompt opened the block: the output starts inside it).
  enum class Reasoning : uint8_t { kNone, kOptional, kInside };
  Kind kind = Kind::kJsonSchema;
  // The schema as JSON text, the grammar / regex, or for kToolCalls a JSON array of
  // {"name": ..., "parameters": schema} (the tools a forced call may name).
  std::string text;
  ToolCallFormat tool_format = ToolCallFormat::kJson;
  bool parallel_calls = true;
  // kToolCalls under tool_choice "auto": free text (never the call opener "<tool_call>"), then
  // optionally the calls. Once the model opens a call, its name and arguments are enforced.
  bool calls_after_text = false;
  JsonWhitespace whitespace = JsonWhitespace::kCompact;
  Reasoning reasoning = Reasoning::kNone;
  std::string think_open = "<think>", think_close = "</think>";
};

// Computes the mask entries every JSON Schema shares: the states of the JSON string, number and
// literal rules and of any value, and the character table of length-bounded strings (their keys
// are sub-grammar digests, equal in every grammar). The compiler runs it on a helper thread when it
// builds the vocabulary, so the first requests do not pay those trie walks between tokens.
void warm_shared_json_states(MaskCache& cache);

class ConstraintCompiler {
 public:
  static constexpr size_t kMaxCachedGrammars = 256;

  explicit ConstraintCompiler(std::function<Vocabulary()> make_vocabulary)
      : make_vocabulary_(std::move(make_vocabulary)) {}
  ~ConstraintCompiler();  // waits for the warm-up to finish
  ConstraintCompiler(const ConstraintCompiler&) = delete;
  ConstraintCompiler& operator=(const ConstraintCompiler&) = delete;

  // Compiles (or finds) the grammar; errors name what could not be enforced.
  Result<std::shared_ptr<const Grammar>> grammar(const ConstraintSpec& spec);
  // Applied to every matcher made from now on (Matcher::Timing).
  void set_timing(Matcher::Timing t);
  // A fresh matcher at the start of the grammar.
  Result<std::shared_ptr<Matcher>> matcher(const ConstraintSpec& spec);

  // The vocabulary's mask cache (built on first use, then warm_shared_json_states on a helper thread).
  std::shared_ptr<MaskCache> mask_cache();
  size_t cached_grammars() const;

 private:
  std::function<Vocabulary()> make_vocabulary_;
  mutable std::mutex mu_;
  std::shared_ptr<MaskCache> cache_;
  Matcher::Timing timing_;
  std::thread warm_;  // warm_shared_json_states of cache_
  std::list<std::pair<std::string, std::shared_ptr<const Grammar>>> lru_;  // most recent first
  std::unordered_map<std::string, decltype(lru_)::iterator> index_;
};

}  // namespace splash::constrain
