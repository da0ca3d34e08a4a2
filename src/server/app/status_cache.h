// The prefix cache's parts of GET /status (spec 3: `kv`, `state`, `cache`) and its /metrics series,
// from the engine's counters. Kept apart from status.cpp, which assembles the whole document.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/scheduler.h"

namespace splash::app {

nlohmann::json kv_status_json(const EngineStatus& e);     // `kv`: pages by holder, bytes
// `state`: checkpoints (recurrent-state snapshots), lanes; with the SSD tier's state records.
nlohmann::json state_status_json(const EngineStatus& e, const std::optional<BlockStoreStats>& disk);
nlohmann::json cache_status_json(const EngineStatus& e);  // `cache`: lookups, reused tokens, pages, evictions
// Prometheus samples (splash_cache_*), appended to `out` in the exposition format.
void append_cache_metrics(std::string& out, const EngineStatus& e);

}  // namespace splash::app
