// Helpers around one verify step of a sequence (the engine's postprocess: hidden rows for drafters, KV rollback).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/result.h"
#include "core/thread_pool.h"
#include "model/model.h"

namespace splash {

// Rows [first, first + n) of run `run` in `out.hidden` ([n_layers, n_tokens_total, n_embd]) as
// [n, n_layers * n_embd]: each row the layers' states concatenated (DraftObservation's layout).
void gather_hidden_rows(const ForwardOutput& out, size_t run, int64_t first, int64_t n, std::vector<float>& rows);

// After a verify pass fed `fed` (= [last token, proposals...]) and only the first `n_keep` of them
// were committed-and-fed (n_keep = accepted + 1): drops the KV of the rest. With recurrent state
// (Model::recurrent_state_floats() > 0) the state cannot be truncated: `snapshot` (seq.recurrent
// before the pass) is put back and the kept tokens are replayed through the model (no logits).
// Nothing to do when every fed token was kept.
Status rollback_verify(const Model& model, KvPagePool& kv, ThreadPool& threads, SequenceState& seq,
                       std::span<const int32_t> fed, int64_t n_keep, const std::vector<float>& snapshot);

}  // namespace splash
