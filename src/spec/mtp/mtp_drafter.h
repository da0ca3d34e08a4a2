// The "mtp" method behind the Drafter interface (spec/drafter.h): the target's own MTP head
// (mtp_model.h) shared by all lanes (MtpSource), and per lane its MTP attention cache (MtpDrafter).
//
// Per lane: the drafter asks for the target's last layer (hidden_layers() = {n_layer - 1}) and
// applies the target's final norm to each row. MTP row i needs the hidden row of committed token
// x_i and the committed token x_{i+1}, so rows 0..n-2 of n committed tokens can be run; observe()
// runs them as soon as both are there (passes of up to 256 rows; their K/V stay: committed), so
// few hidden rows ever wait. propose() takes the argmax of row n-2's logits as the first proposal,
// then chains (proposal, the MTP's own output) for the next ones at positions n-1, n, ... whose
// K/V are dropped afterwards. Rejected proposals are never
// observed, so the cache only holds committed rows. Positions without a hidden row (a prefix-cache
// hit restores the target's KV without a forward) run with a zero hidden state: it lowers
// acceptance there, never correctness (verification is exact).
//
// Thread-safety: an MtpSource is immutable after creation; a lane's drafter is used from the engine
// thread only and must not outlive its source.
#pragma once

#include <memory>

#include "core/result.h"
#include "spec/drafter.h"

namespace splash {

class Model;
class ModelFiles;
class ThreadPool;

// True when `target` declares an MTP head and `files` hold its tensors (what --spec auto checks).
bool has_mtp_head(const ModelFiles& files, const Model& target);

// Loads the MTP head of `target` from `files` (those it was loaded from; both must outlive the
// source) and runs it on an own pool of `threads`.
Result<std::unique_ptr<DrafterSource>> make_mtp_source(const ModelFiles& files, const Model& target, int threads);
// The same on a borrowed pool (tests).
Result<std::unique_ptr<DrafterSource>> make_mtp_source(const ModelFiles& files, const Model& target, ThreadPool& pool);

}  // namespace splash
