// The prefix cache's /status fields (kv, state, cache) and /metrics series come from the engine's
// counters; the `cache_prompt` request field reaches the engine request.
#include <gtest/gtest.h>

#include "server/app/status.h"
#include "server/app/status_cache.h"
#include "server/openai/request.h"

namespace splash::app {
namespace {

EngineStatus sample_status() {
  EngineStatus e;
  e.cache_enabled = true;
  e.kv.pages_allocated = 100;
  e.kv.pages_active = 10;
  e.kv.pages_cache = 30;
  e.kv.pages_free = 60;
  e.kv.page_bytes = 4096;
  e.cache.hits = 3;
  e.cache.cold_misses = 1;
  e.cache.reused_tokens = 500;
  e.cache.kv_hit_tokens = 400;
  e.cache.kv_disk_hit_tokens = 100;
  e.cache.kv_pages = 35;
  e.cache.kv_evictions = 7;
  e.cache.checkpoints = 2;
  e.cache.checkpoint_bytes = 64;
  e.cache.checkpoint_publications = 1;
  e.cache.replay_publications = 2;
  return e;
}

TEST(StatusCache, StatusCarriesTheSpecFields) {
  StatusSnapshot s;
  s.engine = sample_status();
  const nlohmann::json j = status_json(s);
  EXPECT_EQ(j["kv"]["pages_cache"], 30);
  EXPECT_EQ(j["kv"]["reclaimable_bytes"], 30 * 4096);
  EXPECT_EQ(j["kv"]["pages_active"], 10);
  EXPECT_EQ(j["cache"]["hits"], 3);
  EXPECT_EQ(j["cache"]["cold_misses"], 1);
  EXPECT_DOUBLE_EQ(j["cache"]["hit_rate"].get<double>(), 0.75);
  EXPECT_EQ(j["cache"]["kv_hit_tokens"], 400);
  EXPECT_EQ(j["cache"]["kv_disk_hit_tokens"], 100);
  EXPECT_EQ(j["cache"]["reused_tokens"], 500);
  EXPECT_EQ(j["cache"]["kv_pages"], 35);
  EXPECT_EQ(j["cache"]["kv_evictions"], 7);
  EXPECT_EQ(j["cache"]["block_tokens"], 32);
  EXPECT_EQ(j["cache"]["enabled"], true);
  EXPECT_EQ(j["state"]["entries"], 2);
  EXPECT_EQ(j["state"]["bytes"], 64);
  EXPECT_EQ(j["state"]["publications"], 3);
  EXPECT_TRUE(j["state"].contains("active_lanes"));
  // No lookups yet: a rate of 0, not a division by zero.
  EXPECT_EQ(cache_status_json(EngineStatus{})["hit_rate"], 0.0);
}

// The SSD tier's counters split by kind (KV pages, states) and its residency, probation and
// scheduler waits.
TEST(StatusCache, DiskFieldsSplitKvAndStates) {
  StatusSnapshot s;
  s.engine = sample_status();
  s.engine.scheduler.waiting_prefix = 2;
  s.engine.scheduler.waiting_disk = 1;
  BlockStoreStats d;
  d.records_written = 10;
  d.states_written = 3;
  d.records_read = 7;
  d.states_read = 2;
  d.state_bytes = 4096;
  d.redundant_records = 5;
  d.copies_yielded = 4;
  d.copies_paused = 1;
  d.written_last_hour = 123;
  d.probation = true;
  s.disk = d;
  const nlohmann::json j = status_json(s);
  EXPECT_EQ(j["disk"]["kv_demotions"], 7);
  EXPECT_EQ(j["disk"]["state_demotions"], 3);
  EXPECT_EQ(j["disk"]["kv_restores"], 5);
  EXPECT_EQ(j["disk"]["state_restores"], 2);
  EXPECT_EQ(j["disk"]["redundant_copies"], 5);
  EXPECT_EQ(j["disk"]["copies_yielded"], 4);
  EXPECT_EQ(j["disk"]["copies_paused"], 1);
  EXPECT_EQ(j["disk"]["written_last_hour_bytes"], 123);
  EXPECT_EQ(j["disk"]["probation"], true);
  EXPECT_EQ(j["state"]["disk_promotions"], 2);
  EXPECT_EQ(j["state"]["disk_bytes"], 4096);
  EXPECT_EQ(j["scheduler"]["waiting_prefix"], 2);
  EXPECT_EQ(j["scheduler"]["waiting_disk"], 1);
}

TEST(StatusCache, MetricsCarryTheCacheSeries) {
  StatusSnapshot s;
  s.engine = sample_status();
  const std::string m = metrics_text(s);
  EXPECT_NE(m.find("splash_cache_lookups_total{result=\"hit\"} 3\n"), std::string::npos) << m;
  EXPECT_NE(m.find("splash_cache_reused_tokens_total 500\n"), std::string::npos);
  EXPECT_NE(m.find("splash_kv_cache_pages 30\n"), std::string::npos);
  EXPECT_NE(m.find("splash_cache_evictions_total 7\n"), std::string::npos);
}

TEST(StatusCache, CachePromptFieldDefaultsToTrue) {
  auto on = openai::parse_completion_request(R"({"prompt":"x"})");
  ASSERT_TRUE(on.ok());
  EXPECT_TRUE(on->common.cache_prompt);
  auto off = openai::parse_chat_request(R"({"messages":[{"role":"user","content":"x"}],"cache_prompt":false})");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->common.cache_prompt);
  auto bad = openai::parse_completion_request(R"({"prompt":"x","cache_prompt":1})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("'cache_prompt' must be a boolean"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace splash::app
