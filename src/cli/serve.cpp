// `splash serve --model PATH`: flags and --help (spec 1.2 / 1.3). The flags' text is checked here
// (exit 2 naming the flag); everything after that, from binding the port to the Ready line and the
// signals, is app::serve (src/server/app/startup.h).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/spec_flags.h"
#include "cache/disk/disk_block_store.h"
#include "core/sizes.h"
#include "hub/model_ref.h"
#include "server/app/serve_options.h"
#include "server/app/startup.h"

namespace splash::cli {

namespace {

// Flag values as typed; defaults shown in --help come from here.
struct ServeArgs {
  std::string model, tokenizer;
  std::string revision = "main", draft_model;
  SpecArgs spec;  // --draft-model stays draft_model above (a repository id or a folder)
  bool offline = false;
  std::vector<std::string> served_model_names;
  bool announce_served_name = false;
  std::string host = "127.0.0.1";
  std::string port;  // empty: SPLASH_PORT or 8000
  std::string api_key;
  bool api_key_given = false;
  std::vector<std::string> allowed_hosts, allowed_origins;
  bool no_webui = false;
  std::string max_memory = "auto", max_context = "auto", kv_format = "int8";
  std::string default_reasoning_effort;
  std::string max_request_size = "auto";
  std::string request_timeout;
  int queue_size = 32;
  std::string decode_share = "0.5";
  std::string max_image_pixels = "4194304";
  bool allow_idle_sleep = false;
  int threads = 0;
  bool disable_ane = false;
  bool language_only = false;
  std::string idle_release = "10m";
  std::string max_cache_disk = "0", cache_dir;
  bool persistent_cache = false;
  std::string cache_write_behind;  // hidden: tests shorten the write-behind delay
  std::string drafter_watch;       // hidden: tests shorten the paired-drafter poll
  std::string mask_timeout = "5s";
  std::string test_mask_delay;     // hidden: tests make structured-output masks late on purpose
};

int serve_usage_error(const std::string& msg) {
  std::fprintf(stderr, "error: %s\nRun 'splash serve --help' for the flags.\n", msg.c_str());
  return 2;
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// Flags win over the SPLASH_* environment; a bad environment value names its variable.
int to_options(const ServeArgs& a, app::ServeOptions& o) {
  o.model = a.model;
  if (!std::filesystem::exists(a.model)) {
    auto ref = hub::parse_model_ref(a.model, [](const std::string&) { return false; });
    if (!ref.ok()) return serve_usage_error(ref.error_message());
  }
  if (Status st = hub::check_revision(a.revision); !st.ok()) return serve_usage_error(st.error_message());
  o.hub = hub::settings_from_environment(a.offline);
  o.hub.revision = a.revision;
  o.draft_model = a.draft_model;
  SpecArgs spec_args = a.spec;
  spec_args.draft_model = a.draft_model;  // resolved (Hub or folder) at start-up, then set again
  auto spec = spec_options(spec_args);
  if (!spec.ok()) return serve_usage_error(spec.error_message());
  o.spec = *spec;
  if (o.spec.method == SpecMethod::kMtp && !a.draft_model.empty())
    return serve_usage_error("--spec mtp uses the model's own MTP head: --draft-model does not apply");
  if ((o.spec.method == SpecMethod::kLookup || o.spec.method == SpecMethod::kOff) && !a.draft_model.empty())
    return serve_usage_error(str_cat("--spec ", spec_method_name(o.spec.method), " uses no draft model: drop --draft-model"));
  o.tokenizer = a.tokenizer;
  for (const std::string& n : a.served_model_names) {
    if (Status st = app::check_served_model_name(n); !st.ok()) return serve_usage_error(st.error_message());
  }
  o.served_model_names = a.served_model_names;
  if (Status st = app::check_announce_served_name(a.announce_served_name, a.served_model_names); !st.ok())
    return serve_usage_error(st.error_message());
  o.announce_served_name = a.announce_served_name;
  if (a.host.empty()) return serve_usage_error("--host: the address is empty");
  o.host = a.host;
  if (!a.port.empty()) {
    auto p = app::parse_port(a.port);
    if (!p.ok()) return serve_usage_error(p.error_message());
    o.port = *p;
  } else if (const char* e = env("SPLASH_PORT")) {
    auto p = app::parse_port(e, "SPLASH_PORT");
    if (!p.ok()) return serve_usage_error(p.error_message());
    o.port = *p;
  }
  if (a.api_key_given) {
    o.api_key = a.api_key;
  } else if (const char* e = env("SPLASH_API_KEY")) {
    o.api_key = e;
  }
  if (a.api_key_given || !o.api_key.empty()) {
    if (Status st = app::check_api_key(o.api_key, a.api_key_given ? "--api-key" : "SPLASH_API_KEY"); !st.ok())
      return serve_usage_error(st.error_message());
  }
  for (const std::string& h : a.allowed_hosts)
    if (Status st = app::check_allowed_host(h); !st.ok()) return serve_usage_error(st.error_message());
  o.allowed_hosts = a.allowed_hosts;
  for (const std::string& h : a.allowed_origins)
    if (Status st = app::check_allowed_origin(h); !st.ok()) return serve_usage_error(st.error_message());
  o.allowed_origins = a.allowed_origins;
  o.webui = !a.no_webui;

  auto mm = app::parse_max_memory(a.max_memory);
  if (!mm.ok()) return serve_usage_error(mm.error_message());
  o.max_memory = *mm;
  auto mc = app::parse_max_context(a.max_context);
  if (!mc.ok()) return serve_usage_error(mc.error_message());
  o.max_context = *mc;
  auto kv = app::parse_kv_format(a.kv_format);
  if (!kv.ok()) return serve_usage_error(kv.error_message());
  o.kv_format = *kv;

  std::string effort = a.default_reasoning_effort;
  if (effort.empty())
    if (const char* e = env("SPLASH_DEFAULT_REASONING_EFFORT")) effort = e;
  if (!effort.empty()) {
    if (Status st = app::check_reasoning_effort(effort); !st.ok()) return serve_usage_error(st.error_message());
  }
  o.default_reasoning_effort = effort;
  auto mr = app::parse_max_request_size(a.max_request_size);
  if (!mr.ok()) return serve_usage_error(mr.error_message());
  o.max_request_bytes = *mr;
  if (!a.request_timeout.empty()) {
    auto d = app::parse_duration(a.request_timeout);
    if (!d.ok()) return serve_usage_error(d.error_message());
    o.request_timeout = *d;
  }
  if (a.queue_size < 1 || a.queue_size > 4096) return serve_usage_error("--queue-size: must be in 1..4096");
  o.queue_size = a.queue_size;
  auto share = app::parse_decode_share(a.decode_share);
  if (!share.ok()) return serve_usage_error(share.error_message());
  o.decode_share = *share;
  auto pixels = app::parse_max_image_pixels(a.max_image_pixels);
  if (!pixels.ok()) return serve_usage_error(pixels.error_message());
  o.max_image_pixels = *pixels;
  o.allow_idle_sleep = a.allow_idle_sleep;
  if (a.threads < 0 || a.threads > 1024) return serve_usage_error("--threads: must be in 0..1024 (0 = physical cores)");
  o.threads = a.threads;
  o.disable_ane = a.disable_ane;
  o.language_only = a.language_only;
  auto idle = app::parse_idle_release(a.idle_release);
  if (!idle.ok()) return serve_usage_error(idle.error_message());
  o.idle_release = *idle;

  auto disk = app::parse_max_cache_disk(a.max_cache_disk);
  if (!disk.ok()) return serve_usage_error(disk.error_message());
  if (Status st = app::check_cache_flags(*disk, a.persistent_cache, !a.cache_dir.empty()); !st.ok())
    return serve_usage_error(st.error_message());
  o.max_cache_disk = *disk;
  o.persistent_cache = a.persistent_cache;
  o.cache_dir = a.cache_dir.empty() ? default_cache_dir(env("XDG_CACHE_HOME"), env("HOME")) : a.cache_dir;
  o.temp_dir = env("TMPDIR") ? env("TMPDIR") : "/tmp";
  if (!a.cache_write_behind.empty()) {
    auto d = app::parse_duration(a.cache_write_behind, "--cache-write-behind");
    if (!d.ok()) return serve_usage_error(d.error_message());
    o.cache_write_behind = *d;
  }
  if (!a.drafter_watch.empty()) {
    auto d = app::parse_duration(a.drafter_watch, "--drafter-watch");
    if (!d.ok()) return serve_usage_error(d.error_message());
    o.drafter_watch = *d;
  }
  auto mask_timeout = app::parse_duration(a.mask_timeout, "--mask-timeout");
  if (!mask_timeout.ok()) return serve_usage_error(mask_timeout.error_message());
  o.mask_timeout = *mask_timeout;
  if (!a.test_mask_delay.empty()) {
    auto d = app::parse_duration(a.test_mask_delay, "--test-mask-delay");
    if (!d.ok()) return serve_usage_error(d.error_message());
    o.test_mask_delay = *d;
  }
  return 0;
}

constexpr const char* kEpilog = R"(Examples:
  splash serve --model Qwen/Qwen3-0.6B-GGUF:Q8_0
  splash serve --model ~/models/Qwen3-0.6B-Q8_0.gguf
  splash serve --model ~/models/qwen3-mlx --port 8080 --api-key secret --max-context 32K
  splash serve --model stories15M.bin --tokenizer tokenizer.bin --host 0.0.0.0 --allowed-host box.lan

SIZE: bytes or a K/M/G/T binary suffix (28G = 28GB = 28GiB = 28g). TOKENS: a count or K = 1024
(100K = 102400). DURATION: seconds or an s/m/h suffix, floats allowed (90, 1.5m, 2h).
Environment: SPLASH_PORT, SPLASH_API_KEY, SPLASH_DEFAULT_REASONING_EFFORT (flags win); HF_TOKEN (gated
and private repositories), HF_HOME / HF_HUB_CACHE (the Hugging Face cache), HF_HUB_OFFLINE, HF_ENDPOINT.

The context is fitted to this machine's memory (MemAvailable and the cgroup limit): the startup
summary (the Ready line) and /status show the effective context. --max-memory and --max-context can
only lower it.

SSD cache: prompt KV pages evicted from memory go to disk instead of being lost (--max-cache-disk),
in an unlinked file under TMPDIR (else /tmp), or, with --persistent-cache, in --cache-dir, where the
next start takes them back.)";

}  // namespace

Runner register_serve(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  app.footer(kEpilog);
  const char* kModel = "Model";
  const char* kNet = "Network and access";
  const char* kMem = "Memory and context";
  const char* kApi = "API";
  const char* kReq = "Requests";
  app.add_option("--model", a->model,
                 "Model to serve (required): OWNER/REPO (MLX / safetensors) or OWNER/REPO:VARIANT (GGUF) on "
                 "the Hugging Face Hub, downloaded into its cache; or a .gguf file, an MLX / safetensors folder, "
                 "or a llama2.c .bin (with --tokenizer)")
      ->required()->group(kModel);
  app.add_option("--revision", a->revision, "Branch, tag or commit of the --model repository (default: main)")
      ->group(kModel);
  app.add_option("--draft-model", a->draft_model,
                 "Drafter for speculative decoding: OWNER/REPO or an existing folder, a DFlash checkpoint or a "
                 "smaller model with the same tokenizer (default: the registry's DFlash draft for the target, "
                 "else a '<model name>-dflash' folder beside a local model)")
      ->group(kModel);
  app.add_flag("--language-only", a->language_only,
               "Serve text only: requests with images are refused (400) (default: off; this build has no "
               "vision encoder, so images are refused either way)")
      ->group(kModel);
  add_spec_flags(app, a->spec, /*with_draft_model=*/false);
  for (const char* name : {"--spec", "--spec-block", "--lookup-ngram"}) app.get_option(name)->group(kModel);
  app.add_flag("--offline", a->offline,
               "Use only the Hugging Face cache, never the network (default: off; HF_HUB_OFFLINE=1 too)")
      ->group(kModel);
  app.add_option("--tokenizer", a->tokenizer, "llama2.c tokenizer.bin (default: tokenizer.bin beside the model)")
      ->group(kModel);
  app.add_option("--host", a->host, "IPv4 address to bind; 0.0.0.0 for the LAN (default: 127.0.0.1)")->group(kNet);
  app.add_option("--port", a->port, "TCP port, 1-65535 (default: SPLASH_PORT or 8000)")->group(kNet);
  app.add_option("--allowed-host", a->allowed_hosts,
                 "Extra Host header name to accept, not a bind address (repeatable; default: none)")
      ->group(kNet);
  app.add_option("--allowed-origin", a->allowed_origins,
                 "Browser origin to accept: exact scheme://host[:port] or * (repeatable; default: none)")
      ->group(kNet);
  app.add_option_function<std::string>(
         "--api-key",
         [a](const std::string& k) {
           a->api_key = k;
           a->api_key_given = true;
         },
         "Require this key (Authorization: Bearer or x-api-key) on every endpoint but /, /health, /ready "
         "(default: SPLASH_API_KEY, else no key)")
      ->group(kNet);
  app.add_flag("--no-webui", a->no_webui, "Do not serve the chat page at / (default: served)")->group(kNet);
  app.add_option("--max-memory", a->max_memory,
                 "SIZE|auto: memory budget; can only lower the automatic one, 0 refused (default: auto)")
      ->group(kMem);
  app.add_option("--max-context", a->max_context,
                 "TOKENS|auto: longest context, 1..262144; can only lower what memory allows (default: auto)")
      ->group(kMem);
  app.add_option("--kv-format", a->kv_format, "KV cache storage: int8 or bf16 (f32 for debugging) (default: int8)")
      ->group(kMem);
  app.add_option("--threads", a->threads, "Compute threads, 0 = physical cores (default: 0)")->group(kMem);
  app.add_option("--idle-release", a->idle_release,
                 "DURATION|off: after this long without requests, release the weights and the KV memory (the "
                 "SSD cache stays) and load them again on the next request (default: 10m)")
      ->group(kMem);
  app.add_flag("--disable-ane", a->disable_ane,
               "Accepted for compatibility: this build has no second compute device to split the FFN onto "
               "(/status ane_ffn.state is unavailable) (default: off)")
      ->group(kMem);
  const char* kDisk = "SSD cache";
  app.add_option("--max-cache-disk", a->max_cache_disk,
                 "SIZE|auto: disk quota for prefix-cache pages evicted from memory, 0 = off; auto = on only when "
                 "memory cannot hold one full-context request, min(free space of TMPDIR's volume / 10, 16G) "
                 "(default: 0)")
      ->group(kDisk);
  app.add_flag("--persistent-cache", a->persistent_cache,
               "Keep the SSD cache across restarts in --cache-dir (one server per directory); needs "
               "--max-cache-disk (default: off)")
      ->group(kDisk);
  app.add_option("--cache-dir", a->cache_dir,
                 "DIR: folder of the persistent cache; needs --persistent-cache (default: "
                 "$XDG_CACHE_HOME/splash/prefix-cache, else ~/.cache/splash/prefix-cache)")
      ->group(kDisk);
  app.add_option("--served-model-name", a->served_model_names,
                 "Extra name clients may use for the model, listed by /v1/models (repeatable; default: none; "
                 "responses report the real id, the repository or file name)")
      ->group(kApi);
  app.add_flag("--announce-served-name", a->announce_served_name,
               "Responses, the Ready line and /status report the first --served-model-name instead of the real "
               "id; needs --served-model-name (default: off)")
      ->group(kApi);
  app.add_option("--default-reasoning-effort", a->default_reasoning_effort,
                 "none|minimal|low|medium|high|xhigh|max: effort when a request names none (default: "
                 "SPLASH_DEFAULT_REASONING_EFFORT, else the template's)")
      ->group(kApi);
  app.add_option("--max-request-size", a->max_request_size,
                 str_cat("SIZE|auto: largest request body (default: ", app::auto_max_request_rule(),
                         "; 8M up to a 128K context, 16M at 256K)"))
      ->group(kReq);
  app.add_option("--max-image-pixels", a->max_image_pixels,
                 "N: pixels an image is resized to at most; applies when a vision model is served (this build "
                 "serves text only and refuses images with a 400; the value shows in /status) (default: 4194304)")
      ->group(kReq);
  app.add_option("--request-timeout", a->request_timeout,
                 "DURATION: deadline from arrival; a request's own timeout only shortens it (default: none)")
      ->group(kReq);
  app.add_option("--queue-size", a->queue_size, "Admitted requests, running and waiting; beyond: 503 (default: 32)")
      ->group(kReq);
  app.add_option("--decode-share", a->decode_share,
                 "X: while a prompt's prefill competes with decoding requests, decode-only passes get X times "
                 "the time of each prefill pass (at least one pass); 0 = alternate (default: 0.5)")
      ->group(kReq);
  app.add_flag("--allow-idle-sleep", a->allow_idle_sleep,
               "Let the system sleep while requests run; otherwise a systemd-inhibit sleep lock is held while "
               "requests run, where systemd-inhibit and logind are available (default: off)")
      ->group(kReq);
  app.add_option("--mask-timeout", a->mask_timeout,
                 "DURATION: how long a structured-output token mask may take before the request fails with "
                 "503 mask_timeout (default: 5s)")
      ->group(kReq);
  // Not in --help (an empty group hides it): the persistent cache's write-behind delay, for tests.
  app.add_option("--cache-write-behind", a->cache_write_behind, "DURATION: write-behind delay (default: 10s)")
      ->group("");
  app.add_option("--drafter-watch", a->drafter_watch,
                 "DURATION: how often --spec auto on lookup looks for the model's DFlash drafter (default: 5s)")
      ->group("");
  app.add_option("--test-mask-delay", a->test_mask_delay,
                 "DURATION: added before every structured-output mask, to test --mask-timeout (default: none)")
      ->group("");
  return [a] {
    app::ServeOptions o;
    if (int rc = to_options(*a, o); rc != 0) return rc;
    return app::serve(o);
  };
}

}  // namespace splash::cli
