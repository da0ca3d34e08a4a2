// Drafter: the interface every speculative-decoding drafter implements (spec 6; DESIGN "spec/").
//
// One Drafter per lane (sequence), made by a DrafterSource that holds what lanes share (weights of a
// draft model or DFlash block drafter, settings). The engine drives it from its thread; a Drafter is
// not thread-safe. It only ever sees COMMITTED tokens: the engine calls observe() with the prompt and
// then, after each verify step, with the accepted proposals plus the target's own token; rejected
// proposals are never observed, so a drafter never has to undo them (rollback() exists for the engine's
// own restarts: preemption, a prefix-cache resume that starts earlier). Hidden states: a drafter that
// conditions on the target (DFlash) lists the target layers it needs in hidden_layers(); the engine then
// asks every target forward of the lane for them (ForwardOptions::hidden_layers) and hands over the rows
// of committed tokens only, each row the concatenation of those layers' states in hidden_layers() order.
// The last committed token (the target's newest sample) has no hidden row yet: it has not been fed.
// propose() returns deterministic proposals (greedy drafting), so exact verification needs only the
// target's distribution (verify.h): accept x with probability p(x), else sample from p without x.
// A drafter that has nothing to propose returns an empty vector: the lane then decodes plainly.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace splash {

class Model;

// --spec METHOD. kAuto = the best drafter available (spec 6 "always on"): dflash or a draft model
// when one is configured, else the model's MTP head when it has one, else prompt lookup.
enum class SpecMethod : uint8_t { kAuto, kOff, kDflash, kDraft, kLookup, kMtp };

std::string_view spec_method_name(SpecMethod method);
// "auto", "off", "dflash", "draft", "lookup", "mtp"; the error lists them.
Result<SpecMethod> parse_spec_method(std::string_view name);

// Speculative decoding settings, parsed at the edge (CLI flags) and passed to the engine.
struct SpecOptions {
  SpecMethod method = SpecMethod::kAuto;
  // Query rows per lane and verify step: the anchor (last committed token) + block - 1 proposals
  // (spec 6: 8 = anchor + 7).
  int block = 8;
  std::string draft_model;  // --draft-model PATH (draft / dflash); empty = none
  // Prompt lookup: longest and shortest n-gram (suffix of the committed tokens) to look for.
  int lookup_ngram_max = 3;
  int lookup_ngram_min = 1;

  Status validate() const;
};

// What the engine hands a drafter after tokens were committed.
struct DraftObservation {
  std::span<const int32_t> tokens;  // newly committed tokens, appended after the ones seen so far
  // [n_hidden_rows, hidden_width]: hidden_layers() states of the tokens at positions
  // [hidden_position, hidden_position + n_hidden_rows), concatenated per row in hidden_layers() order.
  // Rows may skip positions (a prefix-cache hit restores KV without a forward): hidden_position says
  // where they start. nullptr / 0 rows when none (or when hidden_layers() is empty).
  const float* hidden = nullptr;
  int64_t n_hidden_rows = 0;
  int64_t hidden_position = 0;
  int64_t hidden_width = 0;  // hidden_layers().size() * n_embd
};

class Drafter {
 public:
  virtual ~Drafter() = default;

  // "dflash", "mtp", "draft", "lookup" (metrics are kept per method).
  virtual std::string_view method() const = 0;
  // Target layers whose residual stream (output of layer il) the drafter conditions on; empty = none.
  virtual std::vector<int> hidden_layers() const { return {}; }

  // Tokens committed since the last call (and their hidden rows, see DraftObservation).
  virtual Status observe(const DraftObservation& obs) = 0;
  // Forgets everything after the first n_committed tokens (engine restarts; never needed after a
  // verify step, which observes only accepted tokens).
  virtual void rollback(int64_t n_committed) = 0;
  // Up to max_tokens proposals for the tokens following the committed ones; deterministic given what
  // was observed. Fewer (or none) is fine.
  virtual Result<std::vector<int32_t>> propose(int max_tokens) = 0;
};

// Shared by all lanes of an engine: makes each lane's Drafter. Thread-safety: make() is called on the
// engine thread only.
class DrafterSource {
 public:
  virtual ~DrafterSource() = default;
  virtual std::string_view method() const = 0;
  virtual std::unique_ptr<Drafter> make() const = 0;
  // Bytes of weights/state the source holds (memory plan, /status); 0 for prompt lookup.
  virtual uint64_t memory_bytes() const { return 0; }
};

}  // namespace splash
