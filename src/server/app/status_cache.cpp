#include "server/app/status_cache.h"

#include "core/result.h"

namespace splash::app {

nlohmann::json kv_status_json(const EngineStatus& e) {
  return {{"pages_allocated", e.kv.pages_allocated},
          {"pages_active", e.kv.pages_active},
          {"pages_cache", e.kv.pages_cache},
          {"pages_free", e.kv.pages_free},
          {"allocated_bytes", e.kv.allocated_bytes},
          {"reclaimable_bytes", e.kv.pages_cache * e.kv.page_bytes},
          {"page_bytes", e.kv.page_bytes}};
}

nlohmann::json state_status_json(const EngineStatus& e, const std::optional<BlockStoreStats>& disk) {
  const PrefixCacheStats& c = e.cache;
  const BlockStoreStats z = disk.value_or(BlockStoreStats{});
  return {{"entries", c.checkpoints},
          {"pinned", 0},
          {"in_use", 0},
          {"bytes", c.checkpoint_bytes},
          {"restore_state_bytes", e.restore_state_bytes},
          {"active_lanes", e.active_lanes},
          {"lanes", e.lanes},
          {"publications", c.checkpoint_publications + c.replay_publications},
          {"evictions", c.checkpoint_evictions},
          {"checkpoint_publications", c.checkpoint_publications},
          {"checkpoint_hits", c.checkpoint_hits},
          {"checkpoint_evictions", c.checkpoint_evictions},
          {"disk_hits", c.disk_hits},
          {"disk_promotions", z.states_read},    // state records read back from the SSD tier
          {"disk_bytes", z.state_bytes},          // bytes of state records on the SSD tier
          {"offloads", c.disk_offloads},
          {"offload_failures", c.offload_failures}};
}

nlohmann::json cache_status_json(const EngineStatus& e) {
  const PrefixCacheStats& c = e.cache;
  const int64_t lookups = c.hits + c.cold_misses;
  return {{"enabled", e.cache_enabled},
          {"block_tokens", kKvPageTokens},
          {"hits", c.hits},
          {"cold_misses", c.cold_misses},
          {"hit_rate", lookups > 0 ? static_cast<double>(c.hits) / static_cast<double>(lookups) : 0.0},
          {"kv_hit_tokens", c.kv_hit_tokens},
          {"kv_disk_hit_tokens", c.kv_disk_hit_tokens},
          {"lost_state_misses", c.lost_state_misses},
          {"reused_tokens", c.reused_tokens},
          {"probe_hashed_blocks", c.probe_hashed_blocks},
          {"replay_publications", c.replay_publications},
          {"checkpoint_publications", c.checkpoint_publications},
          {"kv_pages", c.kv_pages},
          {"kv_publications", c.kv_publications},
          {"kv_evictions", c.kv_evictions},
          {"bytes", c.kv_pages * e.kv.page_bytes},
          {"partial_page_copies", c.partial_page_copies},
          {"collisions", c.collisions}};
}

void append_cache_metrics(std::string& out, const EngineStatus& e) {
  const PrefixCacheStats& c = e.cache;
  out += "# HELP splash_kv_cache_pages KV pages held by the prefix cache alone (reclaimable)\n"
         "# TYPE splash_kv_cache_pages gauge\n";
  out += str_cat("splash_kv_cache_pages ", e.kv.pages_cache, "\n");
  out += "# HELP splash_cache_lookups_total prefix cache lookups by outcome\n"
         "# TYPE splash_cache_lookups_total counter\n";
  out += str_cat("splash_cache_lookups_total{result=\"hit\"} ", c.hits, "\n");
  out += str_cat("splash_cache_lookups_total{result=\"miss\"} ", c.cold_misses, "\n");
  out += "# HELP splash_cache_reused_tokens_total prompt tokens reused from the prefix cache\n"
         "# TYPE splash_cache_reused_tokens_total counter\n";
  out += str_cat("splash_cache_reused_tokens_total ", c.reused_tokens, "\n");
  out += "# HELP splash_cache_evictions_total KV pages evicted from the prefix cache\n"
         "# TYPE splash_cache_evictions_total counter\n";
  out += str_cat("splash_cache_evictions_total ", c.kv_evictions, "\n");
}

}  // namespace splash::app
