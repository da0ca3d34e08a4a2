// The start-up memory plan (spec section 4, adapted to a CPU host): how much memory Splash may use,
// what the fixed costs are, how many KV pages and lanes fit, and the longest context one request
// may have. Computed once, before the engine allocates anything; /status reports it.
//
//   MemoryPlanInputs in;  in.host = *probe_host_memory();  in.weights_bytes = ...;  ...
//   MemoryPlan plan = plan_memory(in);
//   if (!plan.valid) { print plan.error, then every plan.breakdown() line; exit 1 }
//   Engine::create(..., {.lanes = plan.lanes, .kv_pages = plan.kv_pool_pages, ...});
//
// The rules (S = spec section 4):
//   margin  = max(1 GiB, 2% of MemTotal)                                        (S.1)
//   hard    = min(MemAvailable, cgroup limit - usage) - margin, lowered by --max-memory
//   fixed   = weights + shared prefill arena + shared decode arena + pipeline reserve (256 MiB)
//             + runtime reserve (512 MiB) + prefix-cache reserve (checkpoints, SSD buffers)  (S.3)
//   refused before anything loads if fixed + one lane's state + a 64-page KV runway > hard (S.2)
//   dynamic = hard - fixed; one request's KV pages = (dynamic - lane state) / page bytes
//   maximum_context_tokens = min(model window, 262144, pages * 32 - 7)          (S.4)
//   --max-context above it is refused; below it lowers the served context.
//   lanes   = min(4, lanes whose state fits beside one full-context request's pages)
//   KV pool = min(what dynamic holds after the lanes' state, lanes * pages of one full context)
// Lanes share the pool: a lane takes pages as its sequence grows, so four short requests and one
// full-context request both fit; the pool is never larger than four full contexts need, so a small
// model on a big machine does not grab memory it cannot use.
//
// The spec rounds one request's pages down to whole 128 MiB extents; our pool is one allocation
// with no extents, so there is nothing to round to and that step is left out.
//
// Pure function of its inputs, no I/O: tests feed fake hosts. Thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/attention_kv.h"
#include "engine/host_memory.h"
#include "formats/model_config.h"

namespace splash {

constexpr int64_t kMaxContextTokens = 262144;  // the spec's ceiling on any served context
constexpr int kMaxLanes = 4;                   // decode slots (spec: budget.maximum_batch_width)
constexpr int64_t kKvRunwayPages = 64;         // pages a model must fit beside its weights to start
constexpr uint64_t kPipelineReserveBytes = uint64_t{256} << 20;
constexpr uint64_t kRuntimeReserveBytes = uint64_t{512} << 20;

struct MemoryPlanInputs {
  HostMemory host;
  std::optional<uint64_t> max_memory;    // --max-memory; nullopt = auto. 0 is refused.
  std::optional<int64_t> max_context;    // --max-context; nullopt = auto
  uint64_t weights_bytes = 0;            // resident weight images (mapped tensors + load-time copies)
  uint64_t prefill_arena_bytes = 0;      // forward scratch of one prefill chunk (estimate_arenas)
  uint64_t decode_arena_bytes = 0;       // forward scratch of one decode step of every lane
  uint64_t lane_state_bytes = 0;         // per lane outside the KV pool (estimate_lane_state_bytes)
  // Prefix-cache memory outside the KV pool: the recurrent-state checkpoint budget (hybrids) and the
  // SSD tier's write queue and read batch (when it is on).
  uint64_t cache_reserve_bytes = 0;
  uint64_t kv_page_bytes = 0;            // KvPagePool::page_bytes(model.kv_cache_config(format, 1))
  int64_t model_window = 0;              // Model::max_context()
  // For /status memory_plan.model.
  int attention_layers = 0;
  int kv_heads = 0;
  int head_dimension = 0;
  KvFormat kv_format = KvFormat::kInt8;
};

struct MemoryPlan {
  bool valid = false;
  std::string error_code;  // "working_set_too_small", "kv_pool_does_not_fit", "arithmetic_overflow",
                           // "invalid_model_spec", "max_context_too_large", "invalid_max_memory"
  std::string error;       // the refusal line to print (spec 1.5 wording)

  // Budget.
  uint64_t physical_bytes = 0;          // MemTotal
  uint64_t available_bytes = 0;         // min(MemAvailable, cgroup headroom)
  std::optional<uint64_t> cgroup_limit_bytes;
  std::optional<uint64_t> configured_limit_bytes;  // --max-memory
  uint64_t margin_bytes = 0;
  uint64_t hard_budget_bytes = 0;
  // Fixed costs.
  uint64_t weights_bytes = 0;
  uint64_t shared_prefill_bytes = 0;
  uint64_t shared_decode_bytes = 0;
  uint64_t pipeline_reserve_bytes = 0;
  uint64_t runtime_reserve_bytes = 0;
  uint64_t cache_reserve_bytes = 0;
  uint64_t fixed_bytes = 0;
  // Elastic part.
  uint64_t dynamic_bytes = 0;
  uint64_t lane_state_bytes = 0;
  uint64_t kv_page_bytes = 0;
  int64_t kv_pages_one_request = 0;     // pages one request may hold
  int64_t kv_tokens_one_request = 0;    // pages * 32
  uint64_t minimum_required_bytes = 0;  // fixed + one lane + runway
  uint64_t deficit_bytes = 0;           // minimum required - hard, when refused
  // Results.
  int64_t model_window = 0;
  int64_t automatic_context_tokens = 0;  // what the machine allows before --max-context
  int64_t maximum_context_tokens = 0;    // served context (after --max-context)
  int lanes = 0;
  int64_t kv_pool_pages = 0;
  uint64_t kv_pool_bytes = 0;
  // Model shape, for /status.
  int attention_layers = 0;
  int kv_heads = 0;
  int head_dimension = 0;
  KvFormat kv_format = KvFormat::kInt8;

  // Every field above as rows in the spec's breakdown order. Byte rows print as
  // `label: N bytes (X.XX MiB)`, counts as `label: N`, absent values as `label: <absent>`.
  // `key` is the /status memory_plan.budget field name.
  struct Line {
    std::string key;                // "hard_budget_bytes"
    std::string label;              // "hard budget"
    std::optional<uint64_t> value;  // nullopt: not set (automatic limit, no cgroup limit)
    bool bytes = true;
    std::string absent = "none";    // printed for nullopt
  };
  std::vector<Line> breakdown() const;
  std::string format_breakdown() const;  // one line per row, each ending in '\n'
};

MemoryPlan plan_memory(const MemoryPlanInputs& in);

// Forward scratch of one pass over `rows` token rows with `logit_rows` rows of logits, from the
// buffers the model's forward keeps per row (layer_context.h) plus the attention kernel's per-thread
// tiles. An upper bound (every buffer at its largest), measured against the real forward in the
// memory-plan tests.
uint64_t estimate_forward_scratch_bytes(const ModelConfig& config, int64_t rows, int64_t logit_rows, int threads);

// Per-lane state outside the KV pool: the lane's logits row, the sampler's candidate arrays over the
// vocabulary, its token history (sized for the longest context any plan serves, so the plan does
// not depend on itself), and on hybrids its recurrent state and the snapshot a verify step keeps.
uint64_t estimate_lane_state_bytes(const ModelConfig& config, uint64_t recurrent_state_bytes = 0);

// The prefix cache's memory outside the KV pool: the checkpoint budget of a hybrid (what
// EngineOptions::max_checkpoint_bytes should be: min(1 GiB, 8 states); 0 for attention-only models).
uint64_t checkpoint_budget_bytes(uint64_t recurrent_state_bytes);
// The SSD tier's buffers: its write queue (a quarter of the quota in [8, 64] MiB) and one read batch
// (64 MiB); 0 when quota_bytes is 0.
uint64_t disk_tier_buffer_bytes(uint64_t quota_bytes);

// "256K" when divisible by 1024, else comma-grouped ("61,433"): the Ready line's context.
std::string format_context_tokens(int64_t tokens);

}  // namespace splash
