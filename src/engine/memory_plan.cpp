#include "engine/memory_plan.h"

#include <algorithm>
#include <cstdio>

#include "core/result.h"

namespace splash {

namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kMiB = uint64_t{1} << 20;

// Sums and products that report overflow instead of wrapping: a hostile or broken model header
// (billions of layers) must give a refusal, not a plan that looks affordable.
struct Checked {
  uint64_t v = 0;
  bool overflow = false;
  Checked& add(uint64_t x) {
    overflow |= __builtin_add_overflow(v, x, &v);
    return *this;
  }
};
bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }

MemoryPlan refuse(MemoryPlan p, std::string code, std::string message) {
  p.valid = false;
  p.error_code = std::move(code);
  p.error = std::move(message);
  p.lanes = 0;
  p.kv_pool_pages = 0;
  p.kv_pool_bytes = 0;
  p.maximum_context_tokens = 0;
  return p;
}

}  // namespace

MemoryPlan plan_memory(const MemoryPlanInputs& in) {
  MemoryPlan p;
  p.physical_bytes = in.host.mem_total;
  p.available_bytes = in.host.available();
  p.cgroup_limit_bytes = in.host.cgroup_limit;
  p.configured_limit_bytes = in.max_memory;
  p.weights_bytes = in.weights_bytes;
  p.shared_prefill_bytes = in.prefill_arena_bytes;
  p.shared_decode_bytes = in.decode_arena_bytes;
  p.pipeline_reserve_bytes = kPipelineReserveBytes;
  p.runtime_reserve_bytes = kRuntimeReserveBytes;
  p.cache_reserve_bytes = in.cache_reserve_bytes;
  p.lane_state_bytes = in.lane_state_bytes;
  p.kv_page_bytes = in.kv_page_bytes;
  p.model_window = in.model_window;
  p.attention_layers = in.attention_layers;
  p.kv_heads = in.kv_heads;
  p.head_dimension = in.head_dimension;
  p.kv_format = in.kv_format;

  if (in.max_memory && *in.max_memory == 0)
    return refuse(p, "invalid_max_memory", "--max-memory 0 is not allowed; pass a positive SIZE or auto");
  if (in.kv_page_bytes == 0 || in.model_window <= 0)
    return refuse(p, "invalid_model_spec",
                  str_cat("the model's KV page size (", in.kv_page_bytes, " bytes) or context window (",
                          in.model_window, " tokens) is not positive"));

  p.margin_bytes = std::max(kGiB, in.host.mem_total / 50);
  p.hard_budget_bytes = p.available_bytes > p.margin_bytes ? p.available_bytes - p.margin_bytes : 0;
  if (in.max_memory) p.hard_budget_bytes = std::min(p.hard_budget_bytes, *in.max_memory);

  Checked fixed;
  fixed.add(in.weights_bytes).add(in.prefill_arena_bytes).add(in.decode_arena_bytes);
  fixed.add(kPipelineReserveBytes).add(kRuntimeReserveBytes).add(in.cache_reserve_bytes);
  uint64_t runway = 0;
  bool overflow = fixed.overflow || mul_overflows(kKvRunwayPages, in.kv_page_bytes, &runway);
  Checked minimum{fixed.v};
  minimum.add(in.lane_state_bytes).add(runway);
  overflow |= minimum.overflow;
  if (overflow)
    return refuse(p, "arithmetic_overflow",
                  "engine memory budget validation failed [arithmetic_overflow]: the model's sizes overflow 64-bit "
                  "byte counts");
  p.fixed_bytes = fixed.v;
  p.minimum_required_bytes = minimum.v;
  if (minimum.v > p.hard_budget_bytes) {
    p.deficit_bytes = minimum.v - p.hard_budget_bytes;
    return refuse(p, "working_set_too_small",
                  str_cat("model weights with the runtime reserves, one lane's state and the KV runway require ",
                          minimum.v, " bytes but the memory budget is ", p.hard_budget_bytes, " bytes"));
  }

  p.dynamic_bytes = p.hard_budget_bytes - p.fixed_bytes;
  p.kv_pages_one_request = static_cast<int64_t>(std::min<uint64_t>(
      (p.dynamic_bytes - in.lane_state_bytes) / in.kv_page_bytes, uint64_t{1} << 40));
  p.kv_tokens_one_request = p.kv_pages_one_request * kKvPageTokens;
  // The spec keeps 7 positions of the last page's worth free for speculative verification rows; kept
  // so that a machine serves the same automatic context as the original product would.
  p.automatic_context_tokens =
      std::min({in.model_window, kMaxContextTokens, p.kv_tokens_one_request - 7});
  if (in.max_context) {
    if (*in.max_context < 1 || *in.max_context > p.automatic_context_tokens)
      return refuse(p, "max_context_too_large",
                    str_cat("--max-context ", *in.max_context, " exceeds the ", p.automatic_context_tokens,
                            " tokens the model and ", in.max_memory ? "--max-memory" : "this machine's memory",
                            " allow; omit it or pass at most ", p.automatic_context_tokens));
    p.maximum_context_tokens = *in.max_context;
  } else {
    p.maximum_context_tokens = p.automatic_context_tokens;
  }

  const int64_t pages_per_context = (p.maximum_context_tokens + kKvPageTokens - 1) / kKvPageTokens;
  const uint64_t context_bytes = static_cast<uint64_t>(pages_per_context) * in.kv_page_bytes;  // <= dynamic
  p.lanes = 1;
  for (int l = kMaxLanes; l > 1; --l) {
    uint64_t states = 0;
    if (!mul_overflows(static_cast<uint64_t>(l), in.lane_state_bytes, &states) &&
        states <= p.dynamic_bytes - context_bytes) {
      p.lanes = l;
      break;
    }
  }
  const uint64_t after_states = p.dynamic_bytes - static_cast<uint64_t>(p.lanes) * in.lane_state_bytes;
  p.kv_pool_pages = std::min<int64_t>(static_cast<int64_t>(std::min<uint64_t>(after_states / in.kv_page_bytes,
                                                                              uint64_t{1} << 40)),
                                      int64_t{p.lanes} * pages_per_context);
  p.kv_pool_bytes = static_cast<uint64_t>(p.kv_pool_pages) * in.kv_page_bytes;
  p.valid = true;
  return p;
}

std::vector<MemoryPlan::Line> MemoryPlan::breakdown() const {
  auto opt = [](uint64_t v) { return std::optional<uint64_t>(v); };
  auto count = [](int64_t v) { return std::optional<uint64_t>(static_cast<uint64_t>(std::max<int64_t>(v, 0))); };
  return {
      {"physical_memory_bytes", "physical memory", opt(physical_bytes), true, "none"},
      {"available_memory_bytes", "available memory", opt(available_bytes), true, "none"},
      {"cgroup_limit_bytes", "cgroup limit", cgroup_limit_bytes, true, "none"},
      {"configured_limit_bytes", "configured limit", configured_limit_bytes, true, "automatic"},
      {"working_set_margin_bytes", "working-set margin", opt(margin_bytes), true, "none"},
      {"hard_budget_bytes", "hard budget", opt(hard_budget_bytes), true, "none"},
      {"target_weights_bytes", "target weights", opt(weights_bytes), true, "none"},
      {"maximum_batch_width", "maximum batch width", count(lanes), false, "none"},
      {"lane_state_bytes", "lane state", opt(lane_state_bytes), true, "none"},
      {"shared_prefill_bytes", "shared prefill", opt(shared_prefill_bytes), true, "none"},
      {"shared_decode_bytes", "shared decode", opt(shared_decode_bytes), true, "none"},
      {"pipeline_reserve_bytes", "pipeline reserve", opt(pipeline_reserve_bytes), true, "none"},
      {"runtime_reserve_bytes", "allocator/runtime reserve", opt(runtime_reserve_bytes), true, "none"},
      {"cache_reserve_bytes", "prefix cache reserve", opt(cache_reserve_bytes), true, "none"},
      {"fixed_runtime_bytes", "fixed runtime", opt(fixed_bytes), true, "none"},
      {"elastic_budget_bytes", "elastic state/KV budget", opt(dynamic_bytes), true, "none"},
      {"kv_page_bytes", "KV page", opt(kv_page_bytes), true, "none"},
      {"kv_pool_pages", "KV pool pages", count(kv_pool_pages), false, "none"},
      {"kv_pool_bytes", "KV pool", opt(kv_pool_bytes), true, "none"},
      {"kv_request_pages", "KV capacity of one request (pages)", count(kv_pages_one_request), false, "none"},
      {"kv_request_tokens", "KV capacity of one request (tokens)", count(kv_tokens_one_request), false, "none"},
      {"model_context_tokens", "model context window (tokens)", count(model_window), false, "none"},
      {"maximum_context_tokens", "maximum context (tokens)", count(maximum_context_tokens), false, "none"},
      {"minimum_required_bytes", "minimum required", opt(minimum_required_bytes), true, "none"},
      {"deficit_bytes", "deficit", opt(deficit_bytes), true, "none"},
  };
}

std::string MemoryPlan::format_breakdown() const {
  std::string out;
  char buf[64];
  for (const Line& l : breakdown()) {
    out += l.label;
    out += ": ";
    if (!l.value) {
      out += l.absent;
    } else if (l.bytes) {
      std::snprintf(buf, sizeof buf, "%llu bytes (%.2f MiB)", static_cast<unsigned long long>(*l.value),
                    static_cast<double>(*l.value) / static_cast<double>(kMiB));
      out += buf;
    } else {
      out += std::to_string(*l.value);
    }
    out += '\n';
  }
  return out;
}

uint64_t estimate_forward_scratch_bytes(const ModelConfig& c, int64_t rows, int64_t logit_rows, int threads) {
  const uint64_t hd = c.head_dim ? c.head_dim : (c.n_head ? c.n_embd / c.n_head : 0);
  const uint64_t q_dim = uint64_t{c.n_head} * hd;
  const uint64_t kv_dim = uint64_t{c.n_head_kv} * hd;
  const uint64_t ff = std::max<uint64_t>(c.n_ff, uint64_t{c.n_ff_expert} * std::max<uint32_t>(c.n_expert_used, 1));
  // Per row (layer_context.h): x and the residual copy, h, out (n_embd each); qkv, q, k, v, att; gate+up
  // and the activation.
  const uint64_t per_row_floats = 4 * uint64_t{c.n_embd} + (q_dim + 2 * kv_dim) * 2 + q_dim + 3 * ff;
  const uint64_t rows_u = static_cast<uint64_t>(std::max<int64_t>(rows, 0));
  const uint64_t logits_u = static_cast<uint64_t>(std::max<int64_t>(logit_rows, 0));
  // Logits are produced twice (the final rows' hidden states, then the output matrix's result).
  const uint64_t logits = logits_u * (uint64_t{c.n_vocab} + uint64_t{c.n_embd}) * 4;
  // Attention tiles: a query and accumulator tile of 32 rows and one page of K and V, per thread.
  const uint64_t attention = static_cast<uint64_t>(std::max(threads, 1)) * (4 * 32 * hd + 32 * 32 + 64) * 4;
  return rows_u * per_row_floats * 4 + logits + attention;
}

uint64_t estimate_lane_state_bytes(const ModelConfig& c, uint64_t recurrent_state_bytes) {
  // Logits row, the sampler's probabilities and candidate index and the penalty counts over the
  // vocabulary (4 arrays of 4 bytes), a token history of the longest context (4 bytes a token), and
  // the recurrent state with its verify snapshot.
  return uint64_t{c.n_vocab} * 16 + static_cast<uint64_t>(kMaxContextTokens) * 4 + 2 * recurrent_state_bytes;
}

uint64_t checkpoint_budget_bytes(uint64_t recurrent_state_bytes) {
  return std::min<uint64_t>(uint64_t{1} << 30, 8 * recurrent_state_bytes);
}

uint64_t disk_tier_buffer_bytes(uint64_t quota_bytes) {
  if (quota_bytes == 0) return 0;
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  return std::clamp<uint64_t>(quota_bytes / 4, 8 * kMiB, 64 * kMiB) + 64 * kMiB;
}

std::string format_context_tokens(int64_t tokens) {
  if (tokens > 0 && tokens % 1024 == 0) return str_cat(tokens / 1024, "K");
  std::string digits = std::to_string(tokens < 0 ? -tokens : tokens);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return tokens < 0 ? "-" + out : out;
}

}  // namespace splash
