// `splash serve`'s settings after parsing, and the checks on each flag's text (spec 1.2). The CLI
// (src/cli/serve.cpp) turns argv and the SPLASH_* environment into ServeOptions through these
// functions; every error message names the flag, and the CLI exits 2 with it.
//
// Pure functions, no I/O, no environment reads: the caller passes what it read.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/cpu/attention_kv.h"
#include "core/result.h"
#include "hub/hub_settings.h"
#include "spec/drafter.h"

namespace splash::app {

struct ServeOptions {
  // Model.
  std::string model;                            // local path (.gguf, safetensors/MLX folder, llama2.c .bin)
                                                // or OWNER/REPO[:VARIANT] (hub/resolve.h)
  hub::HubSettings hub;                         // --revision, --offline and the HF_* environment
  std::string draft_model;                      // --draft-model: DFlash draft folder or repository
  SpecOptions spec;                             // --spec, --spec-block, --lookup-ngram (spec 6); its
                                                // draft_model is filled in at start-up once resolved
  std::string tokenizer;                        // llama2.c tokenizer.bin (default: beside the model)
  std::vector<std::string> served_model_names;  // --served-model-name aliases, accepted in `model`
  // --announce-served-name: responses, the Ready line and /status report the first alias instead of
  // the real id (spec 1.2, 2.3); needs an alias.
  bool announce_served_name = false;
  // Network and access.
  std::string host = "127.0.0.1";
  uint16_t port = 8000;
  std::string api_key;                          // empty = auth off
  std::vector<std::string> allowed_hosts;
  std::vector<std::string> allowed_origins;
  bool webui = true;
  // Memory and context.
  std::optional<uint64_t> max_memory;           // nullopt = auto
  std::optional<int64_t> max_context;           // nullopt = auto
  KvFormat kv_format = KvFormat::kInt8;
  // SSD cache (spec 1.2, 5.4-5.6).
  std::optional<uint64_t> max_cache_disk = 0;   // --max-cache-disk bytes, 0 = off; nullopt = auto
  bool persistent_cache = false;
  std::string cache_dir;                        // persistent cache root ($XDG_CACHE_HOME/splash/prefix-cache)
  std::string temp_dir;                         // temporary cache files: $TMPDIR, else /tmp
  // --persistent-cache write-behind delay (spec 5.6: 10 s; a hidden flag lets tests shorten it).
  std::chrono::milliseconds cache_write_behind{10000};
  // --spec auto that starts on prompt lookup looks for the '<model>-dflash' drafter this often and
  // attaches it when it appears (drafter_watch.h; the demo's is trained in the background). Hidden
  // flag --drafter-watch; tests shorten it.
  std::chrono::milliseconds drafter_watch{5000};
  // --mask-timeout: a structured-output mask not ready this long after the logits fails the request
  // (503 mask_timeout). --test-mask-delay (hidden) makes every mask that late, for tests.
  std::chrono::milliseconds mask_timeout{5000};
  std::chrono::milliseconds test_mask_delay{0};
  // API and requests.
  std::string default_reasoning_effort;         // "" = the template's default
  std::optional<uint64_t> max_request_bytes;    // --max-request-size; nullopt = auto (auto_max_request_bytes)
  std::optional<std::chrono::milliseconds> request_timeout;
  int queue_size = 32;
  // --decode-share X (spec 5.2): decode time owed to decoding lanes per unit of prefill time when a
  // prompt's prefill competes with them; 0 = strictly alternate. EngineOptions::decode_share.
  double decode_share = 0.5;
  // --max-image-pixels N (spec 1.2): the pixel budget an image is resized to. This build serves
  // text-only models (images are refused with a 400), so it is validated and reported only.
  int64_t max_image_pixels = 4194304;
  // --allow-idle-sleep: off = a sleep inhibitor (systemd-inhibit) is held while requests run.
  bool allow_idle_sleep = false;
  int threads = 0;                              // 0 = default_thread_count()
  bool disable_ane = false;                     // accepted; there is no second compute device
  // --language-only: text only (images refused with a 400 naming the part); the Ready line says so.
  bool language_only = false;
  // --idle-release: after this long without requests the weights, the engine's KV pool and the RAM
  // prefix cache are released (the SSD tier stays) and the next request loads them again
  // (engine_host.h). nullopt = off.
  std::optional<std::chrono::milliseconds> idle_release = std::chrono::minutes(10);
};

// "--port": 1..65535.
Result<uint16_t> parse_port(const std::string& text, const char* flag = "--port");
// "--api-key" (or the environment variable that set it): non-empty printable ASCII without whitespace.
Status check_api_key(const std::string& key, const char* source = "--api-key");
// "--allowed-origin": exactly `*` or scheme://host[:port] (http/https, no path, no wildcard pattern).
Status check_allowed_origin(const std::string& origin);
// "--allowed-host": a host name or address without scheme, path or whitespace (an optional :port).
Status check_allowed_host(const std::string& host);
// "--served-model-name": no whitespace or control characters, none of \ % ? #, no empty, "." or ".."
// path segment.
Status check_served_model_name(const std::string& name);
// "--announce-served-name needs --served-model-name" (spec 1.2 cross-check).
Status check_announce_served_name(bool announce, const std::vector<std::string>& served_model_names);
// "--decode-share X": a finite number >= 0.
Result<double> parse_decode_share(const std::string& text);
// "--max-image-pixels N": a positive integer.
Result<int64_t> parse_max_image_pixels(const std::string& text);
// "--default-reasoning-effort": none minimal low medium high xhigh max.
Status check_reasoning_effort(const std::string& effort);
// DURATION: seconds or an s/m/h suffix, floats allowed, > 0 and finite ("90", "1.5m", "2h"); errors
// name `flag`.
Result<std::chrono::milliseconds> parse_duration(const std::string& text, const char* flag = "--request-timeout");
// "--idle-release DURATION|off": nullopt for off.
Result<std::optional<std::chrono::milliseconds>> parse_idle_release(const std::string& text);
// "--max-memory SIZE|auto": nullopt for auto; 0 refused.
Result<std::optional<uint64_t>> parse_max_memory(const std::string& text);
// "--max-context TOKENS|auto": 1..262144, K = 1024; nullopt for auto.
Result<std::optional<int64_t>> parse_max_context(const std::string& text);
// "--max-request-size SIZE|auto": bytes (0 refused); nullopt for auto.
Result<std::optional<uint64_t>> parse_max_request_size(const std::string& text);
// The auto --max-request-size: kAutoRequestBytesPerToken bytes per token of the served context,
// within [kAutoRequestBytesMin, kAutoRequestBytesMax]. A prompt cannot usefully hold more: real text
// runs 3-5 bytes per token, JSON escapes (\uXXXX) and long whitespace tokens stay well under 64, and
// a body past the context costs the server parsing, rendering and tokenizing it only to refuse it.
// The maximum is the spec's fixed default (128M), which the transport enforces in every case.
constexpr uint64_t kAutoRequestBytesPerToken = 64;
constexpr uint64_t kAutoRequestBytesMin = uint64_t{8} << 20;
constexpr uint64_t kAutoRequestBytesMax = uint64_t{128} << 20;
uint64_t auto_max_request_bytes(int64_t context_tokens);
// "auto: 64 bytes per context token, 8M..128M": the rule, for --help and error messages.
std::string auto_max_request_rule();

// "--kv-format": int8, bf16 (f32 accepted for debugging).
Result<KvFormat> parse_kv_format(const std::string& text);
// "--max-cache-disk SIZE|auto": bytes (0 = off); nullopt for auto.
Result<std::optional<uint64_t>> parse_max_cache_disk(const std::string& text);
// The SSD cache flags' cross-checks (spec 1.2): --persistent-cache needs a nonzero --max-cache-disk,
// --cache-dir needs --persistent-cache.
Status check_cache_flags(const std::optional<uint64_t>& max_cache_disk, bool persistent_cache, bool cache_dir_given);

}  // namespace splash::app
