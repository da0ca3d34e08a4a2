// GET /status (spec 3, the fields that apply to this build) and GET /metrics (Prometheus text
// exposition 0.0.4) from one snapshot of the server, the memory plan and the engine. Pure functions
// of their input so tests build snapshots by hand.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cache/block_store.h"
#include "engine/memory_plan.h"
#include "engine/scheduler.h"
#include "server/app/engine_host.h"
#include "server/app/sleep_inhibitor.h"
#include "server/http/server.h"

namespace splash::app {

constexpr int kStatusSchemaVersion = 6;  // the spec's engine status schema; added fields keep it

struct HttpCounters {
  int64_t requests = 0;            // requests routed (refusals before the body included)
  int64_t request_body_bytes = 0;  // bytes of bodies handed to routes
  int64_t max_request_bytes = 0;   // --max-request-size in effect
  bool max_request_auto = true;    // derived from the context (--max-request-size auto)
  int64_t responses_2xx = 0, responses_4xx = 0, responses_5xx = 0;
  http::ConnectionStats connections;  // the transport's (zero in tests without one)
};

struct StatusSnapshot {
  bool ready = false;
  // instance
  std::string instance_id;  // random per start
  int64_t pid = 0;
  std::string model_id;
  std::string host;
  uint16_t port = 0;
  std::string started_at;  // RFC 3339 UTC
  double uptime_s = 0;
  HttpCounters http;
  MemoryPlan plan;
  std::string device_name;  // "cpu"
  std::string os;           // "Linux 6.1.0"
  int cpu_cores = 0;
  EngineStatus engine;
  std::optional<BlockStoreStats> disk;  // the SSD cache (cache/disk/); nullopt when off
  WeightsStatus weights;                // --idle-release state (spec 3 `weights`)
  bool language_only = false;           // --language-only
  bool disable_ane = false;             // --disable-ane
  double decode_share = 0.5;            // --decode-share
  int64_t max_image_pixels = 0;         // --max-image-pixels
  SleepInhibitorStatus sleep_inhibitor;  // --allow-idle-sleep turns it off
};

nlohmann::json status_json(const StatusSnapshot& s);
// Content-Type: text/plain; version=0.0.4.
std::string metrics_text(const StatusSnapshot& s);

}  // namespace splash::app
