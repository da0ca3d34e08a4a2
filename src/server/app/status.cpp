#include "server/app/status.h"

#include "server/app/status_cache.h"

#include <cstdio>
#include <ctime>

namespace splash::app {

namespace {

nlohmann::json latency(const LatencySummary& l) {
  return {{"p50", l.p50}, {"p95", l.p95}, {"samples", l.samples}};
}

nlohmann::json memory_plan_json(const StatusSnapshot& s) {
  const MemoryPlan& p = s.plan;
  nlohmann::json budget = nlohmann::json::object();
  for (const MemoryPlan::Line& l : p.breakdown()) {
    if (l.value) budget[l.key] = *l.value;
    else budget[l.key] = nullptr;
  }
  return {
      {"valid", p.valid},
      {"maximum_context_tokens", p.maximum_context_tokens},
      {"device",
       {{"name", s.device_name},
        {"os_version", s.os},
        {"cores", s.cpu_cores},
        {"physical_memory_bytes", p.physical_bytes},
        {"available_memory_bytes", p.available_bytes},
        {"cgroup_limit_bytes", p.cgroup_limit_bytes ? nlohmann::json(*p.cgroup_limit_bytes) : nlohmann::json()}}},
      {"model",
       {{"attention_layers", p.attention_layers},
        {"kv_heads", p.kv_heads},
        {"head_dimension", p.head_dimension},
        {"kv_page_tokens", kKvPageTokens},
        {"kv_format", kv_format_name(p.kv_format)},
        {"kv_page_bytes", p.kv_page_bytes},
        {"memory", {{"weights_bytes", p.weights_bytes}, {"context_window_tokens", p.model_window}}}}},
      {"budget", budget},
  };
}

// spec 3 `disk`: the SSD cache's quota, usage, traffic and take-back (all zero when it is off).
nlohmann::json disk_json(const std::optional<BlockStoreStats>& d, const PrefixCacheStats& c) {
  const BlockStoreStats z = d.value_or(BlockStoreStats{});
  return {
      {"enabled", d.has_value()},
      {"persistent", z.persistent},
      {"capacity_bytes", z.quota_bytes},
      {"used_bytes", z.bytes_used},
      {"file_bytes", z.file_bytes},
      {"read_bytes", z.bytes_read},
      {"written_bytes", z.bytes_written},
      {"kv_blocks", z.kv_records},
      {"state_blocks", z.state_records},
      {"kv_demotions", z.records_written - z.states_written},
      {"kv_restores", z.records_read - z.states_read},
      {"state_demotions", z.states_written},
      {"state_restores", z.states_read},
      {"kv_pending_pages", z.pending_records},
      {"kv_copies", z.records},
      {"evictions", z.evictions},
      {"read_failures", z.read_failures},
      // Residency (spec 5.4): copies of blocks RAM also holds go first; writes of such blocks yield
      // to sole copies and pause above the hourly write limit (spec 5.6: 128 GiB).
      {"redundant_copies", z.redundant_records},
      {"copies_yielded", z.copies_yielded},
      {"copies_paused", z.copies_paused},
      {"written_last_hour_bytes", z.written_last_hour},
      {"probation", z.probation},
      {"taken_back",
       {{"states", z.restored_states},
        {"kv_blocks", z.restored_kv_blocks},
        {"bytes", z.restored_bytes},
        {"restore_points", z.restored_points},
        {"left_behind", z.left_behind}}},
      // Restore points written behind (--persistent-cache): waiting, written, superseded, refused.
      {"write_behind",
       {{"waiting", c.write_behind_waiting},
        {"durable", c.write_behind_durable},
        {"unneeded", c.write_behind_superseded},
        {"refused", c.write_behind_refused}}},
  };
}

}  // namespace

namespace {

double acceptance_rate(const EngineStatus::Metrics::DraftMethod& m) {
  return m.drafted_tokens > 0 ? static_cast<double>(m.accepted_draft_tokens) / static_cast<double>(m.drafted_tokens) : 0;
}
double mean_accepted_length(const EngineStatus::Metrics::DraftMethod& m) {
  return m.verify_steps > 0
             ? static_cast<double>(m.accepted_draft_tokens + m.verify_steps) / static_cast<double>(m.verify_steps)
             : 0;
}

// Per speculative method: {"lookup": {drafted_tokens, ...}}; {} when speculation is off. Two entries
// when a drafter was attached while serving (lookup until the demo's DFlash drafter appeared).
// "2026-12-06T14:05:09Z"; null for 0 (never).
nlohmann::json unix_time_json(int64_t unix_s) {
  if (unix_s <= 0) return nullptr;
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// A snapshot without per-method entries (built by hand) counts its totals under draft_method.
std::vector<EngineStatus::Metrics::DraftMethod> draft_methods(const EngineStatus::Metrics& m) {
  if (!m.draft_methods.empty() || m.draft_method.empty()) return m.draft_methods;
  return {{m.draft_method, m.drafted_tokens, m.accepted_draft_tokens, m.verify_steps}};
}

nlohmann::json draft_methods_json(const EngineStatus::Metrics& m) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& d : draft_methods(m))
    out[d.method] = {{"drafted_tokens", d.drafted_tokens},
                     {"accepted_draft_tokens", d.accepted_draft_tokens},
                     {"draft_acceptance_rate", acceptance_rate(d)},
                     {"verify_steps", d.verify_steps},
                     {"mean_accepted_length", mean_accepted_length(d)}};
  return out;
}

}  // namespace

namespace {

// Spec 3 `weights`: idle_release_seconds (null when off), released, restores, restore_failures; plus
// how long the last reload took (what a request arriving after a release waited).
nlohmann::json weights_json(const WeightsStatus& w) {
  nlohmann::json j = {
      {"idle_release_seconds", w.idle_release_seconds ? nlohmann::json(*w.idle_release_seconds) : nlohmann::json()},
      {"released", w.released},
      {"state", w.released ? "released" : "loaded"},
      {"releases", w.releases},
      {"restores", w.restores},
      {"restore_failures", w.restore_failures},
      {"last_restore_ms", w.last_restore_ms},
  };
  if (!w.last_restore_error.empty()) j["last_restore_error"] = w.last_restore_error;
  return j;
}

// Spec 10 "machine kept awake during requests": the systemd-inhibit lock (sleep_inhibitor.h).
nlohmann::json sleep_inhibitor_json(const SleepInhibitorStatus& i) {
  nlohmann::json j = {
      {"enabled", i.enabled},
      {"held", i.held},
      {"acquisitions", i.acquisitions},
      {"failures", i.failures},
  };
  if (!i.enabled) j["reason"] = "--allow-idle-sleep";
  if (!i.last_error.empty()) j["last_error"] = i.last_error;
  return j;
}

}  // namespace

nlohmann::json status_json(const StatusSnapshot& s) {
  const EngineStatus& e = s.engine;
  nlohmann::json by_width = nlohmann::json::object();
  for (int w = 1; w <= kMaxLanes; ++w) {
    const size_t i = static_cast<size_t>(w - 1);
    by_width[str_cat("b", w)] = i < e.scheduler.decode_batches_by_width.size()
                                            ? e.scheduler.decode_batches_by_width[i]
                                            : int64_t{0};
  }
  return {
      {"schema_version", kStatusSchemaVersion},
      {"ready", s.ready},
      {"maximum_context_tokens", s.plan.maximum_context_tokens},
      {"memory_pressure", "normal"},
      {"instance",
       {{"id", s.instance_id},
        {"pid", s.pid},
        {"model", s.model_id},
        {"host", s.host},
        {"port", s.port},
        {"started_at", s.started_at},
        {"uptime_seconds", s.uptime_s}}},
      {"http",
       {{"requests", s.http.requests},
        {"request_body_bytes", s.http.request_body_bytes},
        {"max_request_bytes", s.http.max_request_bytes},
        {"max_request_size", s.http.max_request_auto ? "auto" : "flag"},
        {"responses", {{"2xx", s.http.responses_2xx}, {"4xx", s.http.responses_4xx}, {"5xx", s.http.responses_5xx}}},
        {"connections",
         {{"waiting", s.http.connections.waiting},
          {"serving", s.http.connections.serving},
          {"lingering", s.http.connections.lingering},
          {"accepted", s.http.connections.accepted},
          {"evicted", s.http.connections.evicted},
          {"head_timeouts", s.http.connections.head_timeouts},
          {"refused_overloaded", s.http.connections.refused_overloaded},
          {"refused_not_http", s.http.connections.refused_not_http}}}}},
      {"memory_plan", memory_plan_json(s)},
      {"kv", kv_status_json(e)},
      {"state", state_status_json(e, s.disk)},
      {"cache", cache_status_json(e)},
      {"scheduler",
       {{"queued", e.scheduler.queued},
        {"waiting_resources", e.scheduler.waiting_resources},
        {"waiting_prefix", e.scheduler.waiting_prefix},
        {"waiting_disk", e.scheduler.waiting_disk},
        {"prefilling", e.scheduler.prefilling},
        {"decoding", e.scheduler.decoding},
        {"prefill_batches", e.scheduler.prefill_batches},
        {"prefill_rows", e.scheduler.prefill_rows},
        {"decode_batches", e.scheduler.decode_batches},
        {"decode_batches_by_width", by_width},
        {"preemptions", e.scheduler.preemptions},
        {"decode_share", s.decode_share},
        {"decode_share_batches", e.scheduler.decode_share_batches},
        {"queue_size", e.queue_size}}},
      {"requests",
       {{"submitted", e.requests.submitted},
        {"completed", e.requests.completed},
        {"cancelled", e.requests.cancelled},
        {"failed", e.requests.failed},
        {"rejected", e.requests.rejected}}},
      {"metrics",
       {{"ttft_ms", latency(e.metrics.ttft_ms)},
        {"itl_ms", latency(e.metrics.itl_ms)},
        {"prefill_tokens", e.metrics.prefill_tokens},
        {"decode_tokens", e.metrics.decode_tokens},
        {"prefill_ms", e.metrics.prefill_ms},
        {"decode_ms", e.metrics.decode_ms},
        {"prefill_tokens_per_second", e.metrics.prefill_tok_s},
        {"decode_tokens_per_second", e.metrics.decode_tok_s},
        // Speculative decoding (spec 3, 6): totals, and the same per method (one drafter per engine).
        {"drafted_tokens", e.metrics.drafted_tokens},
        {"accepted_draft_tokens", e.metrics.accepted_draft_tokens},
        {"draft_acceptance_rate", e.metrics.draft_acceptance_rate},
        {"mean_accepted_length", e.metrics.mean_accepted_length},
        {"draft_methods", draft_methods_json(e.metrics)},
        // The drafter new requests get, how many were attached while serving (a DFlash drafter that
        // appeared beside the model after the start: lookup -> dflash) and when the last one was.
        {"draft_method", e.metrics.draft_method},
        {"drafters_attached", e.metrics.drafters_attached},
        {"drafter_attached_at", unix_time_json(e.metrics.drafter_attached_unix_s)}}},
      {"disk", disk_json(s.disk, e.cache)},
      {"ane_ffn",
       {{"state", "unavailable"},
        {"disabled_by_flag", s.disable_ane},
        {"reason", s.disable_ane ? "--disable-ane; and no second compute device: this build runs the whole model "
                                   "on the CPU"
                                 : "no second compute device: this build runs the whole model on the CPU"}}},
      {"weights", weights_json(s.weights)},
      {"input_modalities", nlohmann::json::array({"text"})},
      {"vision",
       {{"enabled", false},
        {"reason", s.language_only ? "--language-only" : "this build has no vision encoder"},
        {"max_image_pixels", s.max_image_pixels}}},
      {"sleep_inhibitor", sleep_inhibitor_json(s.sleep_inhibitor)},
  };
}

namespace {

// One metric family: HELP, TYPE and its samples.
class Exposition {
 public:
  void family(const char* name, const char* type, const char* help) {
    out_ += str_cat("# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  }
  void sample(const std::string& name_and_labels, double v) {
    char buf[64];
    // Integers print without an exponent so scrapers and tests read them exactly.
    if (v == static_cast<double>(static_cast<int64_t>(v)) && v < 9e15 && v > -9e15)
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
    else
      std::snprintf(buf, sizeof buf, "%.6g", v);
    out_ += name_and_labels;
    out_ += ' ';
    out_ += buf;
    out_ += '\n';
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

}  // namespace

std::string metrics_text(const StatusSnapshot& s) {
  const EngineStatus& e = s.engine;
  Exposition x;
  x.family("splash_ready", "gauge", "1 when the server accepts inference requests");
  x.sample("splash_ready", s.ready ? 1 : 0);
  x.family("splash_maximum_context_tokens", "gauge", "longest context one request may use");
  x.sample("splash_maximum_context_tokens", static_cast<double>(s.plan.maximum_context_tokens));
  x.family("splash_http_requests_total", "counter", "HTTP requests received");
  x.sample("splash_http_requests_total", static_cast<double>(s.http.requests));
  x.family("splash_requests_total", "counter", "inference requests by outcome");
  x.sample("splash_requests_total{state=\"submitted\"}", static_cast<double>(e.requests.submitted));
  x.sample("splash_requests_total{state=\"completed\"}", static_cast<double>(e.requests.completed));
  x.sample("splash_requests_total{state=\"cancelled\"}", static_cast<double>(e.requests.cancelled));
  x.sample("splash_requests_total{state=\"failed\"}", static_cast<double>(e.requests.failed));
  x.sample("splash_requests_total{state=\"rejected\"}", static_cast<double>(e.requests.rejected));
  x.family("splash_scheduler_requests", "gauge", "requests by scheduler state");
  x.sample("splash_scheduler_requests{state=\"queued\"}", static_cast<double>(e.scheduler.queued));
  x.sample("splash_scheduler_requests{state=\"waiting_resources\"}", static_cast<double>(e.scheduler.waiting_resources));
  x.sample("splash_scheduler_requests{state=\"waiting_prefix\"}", static_cast<double>(e.scheduler.waiting_prefix));
  x.sample("splash_scheduler_requests{state=\"waiting_disk\"}", static_cast<double>(e.scheduler.waiting_disk));
  x.sample("splash_scheduler_requests{state=\"prefilling\"}", static_cast<double>(e.scheduler.prefilling));
  x.sample("splash_scheduler_requests{state=\"decoding\"}", static_cast<double>(e.scheduler.decoding));
  x.family("splash_scheduler_batches_total", "counter", "forward passes carrying prefill or decode rows");
  x.sample("splash_scheduler_batches_total{kind=\"prefill\"}", static_cast<double>(e.scheduler.prefill_batches));
  x.sample("splash_scheduler_batches_total{kind=\"decode\"}", static_cast<double>(e.scheduler.decode_batches));
  x.family("splash_active_lanes", "gauge", "lanes holding a request");
  x.sample("splash_active_lanes", static_cast<double>(e.active_lanes));
  x.family("splash_kv_pages", "gauge", "KV cache pages by state");
  x.sample("splash_kv_pages{state=\"allocated\"}", static_cast<double>(e.kv.pages_allocated));
  x.sample("splash_kv_pages{state=\"active\"}", static_cast<double>(e.kv.pages_active));
  x.sample("splash_kv_pages{state=\"free\"}", static_cast<double>(e.kv.pages_free));
  x.family("splash_kv_allocated_bytes", "gauge", "bytes of the KV page pool");
  x.sample("splash_kv_allocated_bytes", static_cast<double>(e.kv.allocated_bytes));
  if (s.disk) {
    x.family("splash_cache_disk_used_bytes", "gauge", "bytes of records in the SSD cache (quota: --max-cache-disk)");
    x.sample("splash_cache_disk_used_bytes", static_cast<double>(s.disk->bytes_used));
    x.family("splash_cache_disk_io_bytes_total", "counter", "bytes the SSD cache wrote and read back");
    x.sample("splash_cache_disk_io_bytes_total{direction=\"written\"}", static_cast<double>(s.disk->bytes_written));
    x.sample("splash_cache_disk_io_bytes_total{direction=\"read\"}", static_cast<double>(s.disk->bytes_read));
  }
  x.family("splash_tokens_total", "counter", "tokens run through the model");
  x.sample("splash_tokens_total{kind=\"prefill\"}", static_cast<double>(e.metrics.prefill_tokens));
  x.sample("splash_tokens_total{kind=\"decode\"}", static_cast<double>(e.metrics.decode_tokens));
  if (const auto methods = draft_methods(e.metrics); !methods.empty()) {
    auto label = [](const EngineStatus::Metrics::DraftMethod& d) { return str_cat("method=\"", d.method, "\""); };
    x.family("splash_draft_tokens_total", "counter", "speculative proposals verified and accepted, by method");
    for (const auto& d : methods) {
      x.sample(str_cat("splash_draft_tokens_total{", label(d), ",kind=\"drafted\"}"), static_cast<double>(d.drafted_tokens));
      x.sample(str_cat("splash_draft_tokens_total{", label(d), ",kind=\"accepted\"}"),
               static_cast<double>(d.accepted_draft_tokens));
    }
    x.family("splash_draft_acceptance_rate", "gauge", "accepted / drafted tokens, by method");
    for (const auto& d : methods) x.sample(str_cat("splash_draft_acceptance_rate{", label(d), "}"), acceptance_rate(d));
    x.family("splash_draft_mean_accepted_length", "gauge", "tokens committed per verify step of a lane, by method");
    for (const auto& d : methods)
      x.sample(str_cat("splash_draft_mean_accepted_length{", label(d), "}"), mean_accepted_length(d));
  }
  x.family("splash_ttft_ms", "gauge", "time to first token over recent requests, milliseconds");
  x.sample("splash_ttft_ms{quantile=\"0.5\"}", e.metrics.ttft_ms.p50);
  x.sample("splash_ttft_ms{quantile=\"0.95\"}", e.metrics.ttft_ms.p95);
  x.family("splash_itl_ms", "gauge", "inter-token latency over recent tokens, milliseconds");
  x.sample("splash_itl_ms{quantile=\"0.5\"}", e.metrics.itl_ms.p50);
  x.sample("splash_itl_ms{quantile=\"0.95\"}", e.metrics.itl_ms.p95);
  x.family("splash_memory_budget_bytes", "gauge", "hard memory budget of the start-up plan");
  x.sample("splash_memory_budget_bytes", static_cast<double>(s.plan.hard_budget_bytes));
  std::string out = x.take();
  append_cache_metrics(out, e);
  return out;
}

}  // namespace splash::app
