// The "dflash" method behind the Drafter interface (spec/drafter.h): a DFlashModel shared by all
// lanes (DFlashSource) and per lane its context rows (DFlashDrafter).
//
// Per lane: observe() projects the hidden rows of newly committed tokens into the drafter's context
// K/V (positions as the engine reports them) and remembers the committed tokens; propose() runs one
// block pass anchored at the last committed token (position n_committed - 1, which has no hidden row
// yet) and returns the greedy proposals, up to block_size - 1. Rejected proposals are never observed,
// so the context only ever holds committed rows ("crops to the committed length each round").
//
// Thread-safety: a DFlashSource is immutable after creation; each lane's DFlashDrafter is used from
// the engine thread only and must not outlive its source (it borrows the source's weights and pool).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/result.h"
#include "core/thread_pool.h"
#include "spec/dflash/dflash_model.h"
#include "spec/drafter.h"

namespace splash {

class Model;

struct DFlashSourceOptions {
  IsaLevel isa = IsaLevel::kAvx512;
  int64_t max_context_rows = kDFlashDefaultContextRows;
  // Draft with a Q8_0 copy of a float (F32/F16/BF16) output head: the head dominates a small
  // drafter's pass (stories15M: 32000 x 288 for 7 rows); quantized heads are used as they are.
  bool quantize_head = true;
};

// Loads the checkpoint in `dir` and checks it against the target (check_dflash_target); the RoPE
// range covers the target's context plus one block.
// The token table and output head are the target's own (target.weights(); `target` must outlive the
// source), plus a Q8_0 copy of a float head when options.quantize_head. The source runs the drafter
// on its own pool of `threads` (engine thread only, like the target's).
Result<std::unique_ptr<DrafterSource>> make_dflash_source(const std::string& dir, const Model& target, int threads,
                                                          const DFlashSourceOptions& options = {});

// The same over an already loaded model and explicit target tensors (tests, tools): embed and head
// are the target's [n_vocab, n_embd] token table and output matrix; they and `model` must outlive the
// source. `model` is shared by the lanes.
std::unique_ptr<DrafterSource> make_dflash_source(std::shared_ptr<const DFlashModel> model, const PackedWeights& embed,
                                                  const PackedWeights& head, ThreadPool& pool);

// The drafter paired with a model by location (what `--spec auto` uses when no --draft-model is
// given): a directory `<name>-dflash` with a config.json beside the model file or directory, where
// <name> is the model's file stem, then that stem with its last "-suffix" parts dropped one by one
// (~/.cache/splash/demo/stories15M-Q4_0.gguf -> .../stories15M-Q4_0-dflash, .../stories15M-dflash).
std::optional<std::string> find_dflash_drafter(const std::string& model_path);

}  // namespace splash
