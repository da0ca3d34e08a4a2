// One engine step's forward pass as EngineImpl::schedule() plans it: which lanes feed which tokens at
// which positions, which rows come back as logits and which rows verify proposals. run() executes it
// and postprocess() reads the results back in the same order.
//
//   Batch b = schedule(cancels);   // cancels, admission, cache lookup, pages, preemption, drafts
//   if (!b.empty() && run(b)) postprocess(b);
//
// A plain description: it points into the lanes (their ctx and decode block), so it is valid only
// until the lanes change (the end of the step). Engine thread only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/lane.h"

namespace splash {

struct BatchRun {
  Lane* lane = nullptr;
  int64_t position = 0;             // sequence position of tokens[0] (the lane's KV length before the pass)
  std::span<const int32_t> tokens;  // [n] a decode block [last token, proposals...] or a prefill chunk
  LogitRows logits = LogitRows::kLast;
  // Decode runs: proposals to verify (tokens[1..]); their rows come back with kAll. 0 = plain decode.
  int64_t n_proposals = 0;
  bool decode = false;  // a decoding lane's block (else a prefill chunk)
};

struct Batch {
  std::vector<BatchRun> runs;  // decode runs first (oldest lane first), then at most one prefill chunk
  size_t n_decode = 0;         // runs[0, n_decode) are decode runs
  int64_t n_prefill = 0;       // tokens of the prefill chunk; 0 = none
  // The prefill chunk ran while lanes were decoding (with them or in their place): decode_share owes
  // them decode-only time.
  bool prefill_contended = false;
  // When the step began, before drafting: a lane's draft budget weighs its step's wall time from here.
  EngineClock::time_point planned_at{};
  // Filled by run(): the forward's start and end.
  EngineClock::time_point forward_start{}, forward_end{};

  bool empty() const { return runs.empty(); }
  bool has_prefill() const { return runs.size() > n_decode; }
};

}  // namespace splash
