#include "server/app/startup.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <thread>

#include "cache/disk/disk_block_store.h"
#include "core/sizes.h"
#include "engine/cache_namespace.h"
#include "engine/host_memory.h"
#include "engine/memory_plan.h"
#include "engine/scheduler.h"
#include "formats/model_files.h"
#include "hub/draft_registry.h"
#include "hub/resolve.h"
#include "model/model.h"
#include "server/app/app.h"
#include "server/app/drafter_watch.h"
#include "server/app/engine_host.h"
#include "server/app/sleep_inhibitor.h"
#include "server/http/server.h"
#include "spec/dflash/dflash_drafter.h"
#include "spec/make_source.h"
#include "template/chat_template.h"
#include "tokenizer/model_tokenizer.h"

namespace splash::app {

namespace {

// SIGINT / SIGTERM are blocked in every thread and taken by sigwait() on one thread, so no work runs
// in a signal handler. Before the server is up there is nothing to release and the process exits at
// once; afterwards the main thread is woken to stop the engine and the server in order.
class SignalWaiter {
 public:
  SignalWaiter() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
    thread_ = std::thread([this] { wait_loop(); });
  }
  ~SignalWaiter() {
    // Wake our own sigwait with a signal directed at that thread only.
    {
      std::lock_guard lock(mu_);
      closing_ = true;
    }
    pthread_kill(thread_.native_handle(), SIGTERM);
    thread_.join();
  }
  // From now on a signal wakes wait() instead of exiting.
  void serving() {
    std::lock_guard lock(mu_);
    serving_ = true;
  }
  int wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return signal_ != 0; });
    return signal_;
  }

 private:
  void wait_loop() {
    int sig = 0;
    while (sigwait(&set_, &sig) == 0) {
      std::lock_guard lock(mu_);
      if (closing_) return;
      if (!serving_) {
        std::printf("Stopping · releasing engine resources\n");
        std::fflush(stdout);
        _exit(128 + sig);
      }
      signal_ = sig;
      cv_.notify_all();
    }
  }

  sigset_t set_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool serving_ = false, closing_ = false;
  int signal_ = 0;
  std::thread thread_;
};

int64_t rss_anon_bytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "RssAnon:") {
      int64_t kb = 0;
      in >> kb;
      return kb * 1024;
    }
    std::string rest;
    std::getline(in, rest);
  }
  return 0;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

std::string mib_text(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

// The disk tier from the SSD cache flags, with its console lines. auto (spec 5.5): on only when the
// plan cannot hold one full-context request, quota min(free space of the temp volume / 10, 16 GiB).
Result<DiskTier> open_ssd_cache(const ServeOptions& options, const MemoryPlan& plan, const std::string& ns,
                                int64_t state_bytes) {
  DiskTierConfig c;
  c.state_bytes = state_bytes;
  c.persistent = options.persistent_cache;
  c.cache_dir = options.cache_dir;
  c.temp_dir = options.temp_dir.empty() ? "/tmp" : options.temp_dir;
  c.namespace_description = ns;
  const bool short_of_memory = plan.maximum_context_tokens < plan.model_window;
  if (options.max_cache_disk) {
    c.quota_bytes = static_cast<int64_t>(*options.max_cache_disk);
  } else if (short_of_memory || options.persistent_cache) {
    struct statvfs vfs {};
    const std::string& probe = options.persistent_cache ? options.cache_dir : c.temp_dir;
    const uint64_t free_bytes = ::statvfs(probe.c_str(), &vfs) == 0 ? uint64_t{vfs.f_bavail} * vfs.f_frsize
                                : ::statvfs(c.temp_dir.c_str(), &vfs) == 0 ? uint64_t{vfs.f_bavail} * vfs.f_frsize
                                                                            : 0;
    c.quota_bytes = static_cast<int64_t>(std::min<uint64_t>(free_bytes / 10, uint64_t{16} << 30));
    std::printf("SSD cache · auto quota %s (a tenth of the free space, at most 16 GiB)\n",
                mib_text(static_cast<uint64_t>(c.quota_bytes)).c_str());
  }
  if (c.quota_bytes <= 0) {
    if (short_of_memory)
      std::printf("Hint · memory holds %lld of the model's %lld context tokens; --max-cache-disk SIZE keeps "
                  "evicted prompt pages on disk\n",
                  static_cast<long long>(plan.maximum_context_tokens), static_cast<long long>(plan.model_window));
    return DiskTier{};
  }
  auto tier = open_disk_tier(c);
  if (!tier.ok()) return make_error("SSD cache: ", tier.error_message());
  for (const std::string& line : tier->lines) std::printf("%s\n", line.c_str());
  if (!tier->store) return tier;  // off (a quota below one restore state): the line said why
  const std::string states =
      state_bytes > 0 ? str_cat(" and states of ", mib_text(static_cast<uint64_t>(state_bytes))) : std::string();
  std::printf("SSD cache: %s for KV pages of %.0f KiB%s in %s\n", mib_text(static_cast<uint64_t>(c.quota_bytes)).c_str(),
              static_cast<double>(plan.kv_page_bytes) / 1024.0, states.c_str(),
              tier->store->persistent() ? tier->store->directory().c_str()
                                        : (c.temp_dir + " (temporary, unlinked)").c_str());
  std::fflush(stdout);
  return tier;
}

// --draft-model resolved (an error stops the start), else the registry's draft for a Hub target (a
// failure there is a warning: the server still starts, with the next drafter --spec auto finds).
// Empty when none applies: --spec off / lookup / mtp need no weights of their own.
Result<std::string> resolve_draft_path(const ServeOptions& options, const ModelFiles& files, bool target_from_hub) {
  const SpecMethod m = options.spec.method;
  if (m == SpecMethod::kOff || m == SpecMethod::kLookup || m == SpecMethod::kMtp || options.spec.block < 2) return std::string();
  if (!options.draft_model.empty()) {
    auto draft = hub::resolve_draft(files.config(), options.draft_model, options.hub);
    if (!draft.ok()) return make_error("--draft-model: ", draft.error_message());
    if (!*draft) return std::string();
    std::printf("Draft · %s\n", (*draft)->path.c_str());
    return (*draft)->path;
  }
  if (!target_from_hub) return std::string();
  auto draft = hub::resolve_draft(files.config(), "", options.hub);
  if (!draft.ok()) {
    std::fprintf(stderr, "warning: the registry's DFlash draft for this model is unavailable (%s); serving without it\n",
                 draft.error_message().c_str());
    return std::string();
  }
  if (!*draft) return std::string();
  std::printf("Draft · %s (registry)\n", (*draft)->path.c_str());
  return (*draft)->path;
}

struct LoadedDrafter {
  std::unique_ptr<DrafterSource> source;  // null: plain decoding
  int block = 1;
  uint64_t bytes = 0;  // resident memory it holds (memory plan)
};

// The drafter --spec asks for, with its Ready-time line. A registry draft that fails to load falls
// back to what --spec auto finds without it (a warning); everything else the user named is an error.
Result<LoadedDrafter> load_drafter(const ServeOptions& options, const std::string& draft_path,
                                   const std::string& model_path, const ModelFiles& files, const Model& model,
                                   int threads) {
  SpecOptions spec = options.spec;
  spec.draft_model = draft_path;
  const int lanes = std::min(kMaxLanes, options.queue_size);
  const int64_t anon0 = rss_anon_bytes();
  auto src = make_drafter_source(spec, model_path, files, model, lanes, threads);
  if (!src.ok() && options.draft_model.empty() && !draft_path.empty()) {
    std::fprintf(stderr, "warning: %s; serving without the registry's draft\n", src.error_message().c_str());
    spec.draft_model.clear();
    src = make_drafter_source(spec, model_path, files, model, lanes, threads);
  }
  if (!src.ok()) return make_error(src.error_message());
  LoadedDrafter d;
  d.source = std::move(*src);
  if (!d.source) {
    std::printf("Speculative · off\n");
    return d;
  }
  d.block = spec.block;
  d.bytes = std::max<uint64_t>(d.source->memory_bytes(),
                               static_cast<uint64_t>(std::max<int64_t>(0, rss_anon_bytes() - anon0)));
  // Name the drafter's files: --draft-model / the registry's draft, or the '<name>-dflash' folder
  // found beside the model (the demo's trained drafter).
  std::string drafter_path = spec.draft_model;
  if (drafter_path.empty() && d.source->method() == "dflash")
    drafter_path = find_dflash_drafter(model_path).value_or("");
  std::printf("Speculative · %s · block %d%s%s\n", std::string(d.source->method()).c_str(), d.block,
              drafter_path.empty() ? "" : " · ", drafter_path.c_str());
  std::fflush(stdout);
  return d;
}

// One load of the weights and the engine on them: what --idle-release frees and the next request
// builds again with the same two functions start-up uses (load_weights, start_engine). Members are
// destroyed in reverse order: the watch, the engine (a persistent SSD cache gets its cached pages
// first), the drafter, the model, then the files it maps.
struct LoadedAssembly final : EngineAssembly {
  std::optional<ModelFiles> files;
  std::optional<Model> model;
  LoadedDrafter drafter;
  int64_t anon_growth = 0;  // anonymous memory the model load added (fused and repacked copies)
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<DrafterWatch> watch;
  Engine& engine() override { return *engine_; }
  void stop(bool to_disk) override {
    watch.reset();  // a drafter being loaded finishes first; nothing attaches to a stopping engine
    if (engine_) engine_->shutdown(to_disk);
  }
};

// The target's files, weights and drafter.
Result<std::unique_ptr<LoadedAssembly>> load_weights(const ServeOptions& options, const std::string& model_path,
                                                     const std::string& draft_path, int threads) {
  auto a = std::make_unique<LoadedAssembly>();
  ModelFilesOptions fopts;
  fopts.tokenizer_path = options.tokenizer;
  auto files = ModelFiles::open(model_path, fopts);
  if (!files.ok()) return files.error();
  a->files.emplace(std::move(*files));
  ModelOptions mopts;
  if (a->files->config().max_position > 0)
    mopts.max_context = std::min<int64_t>(a->files->config().max_position, kMaxContextTokens);
  const int64_t anon_before = rss_anon_bytes();
  auto model = Model::load(*a->files, mopts);
  if (!model.ok()) return model.error();
  a->model.emplace(std::move(*model));
  a->anon_growth = std::max<int64_t>(0, rss_anon_bytes() - anon_before);
  auto drafter = load_drafter(options, draft_path, model_path, *a->files, *a->model, threads);
  if (!drafter.ok()) return drafter.error();
  a->drafter = std::move(*drafter);
  return a;
}

// The engine on a loaded assembly, sized by the start-up plan, and the DrafterWatch where --spec
// auto settled for prompt lookup.
Status start_engine(LoadedAssembly& a, const ServeOptions& options, const MemoryPlan& plan, const Tokenizer& tokenizer,
                    BlockStore* cache_store, const std::string& model_path, bool draft_named, int threads) {
  EngineOptions eopts;
  eopts.cache_identity = weights_identity(a.files->path());
  eopts.cache_store = cache_store;
  eopts.cache_write_behind_delay = options.cache_write_behind;
  const uint64_t state_bytes = static_cast<uint64_t>(a.model->recurrent_state_floats()) * sizeof(float);
  eopts.max_checkpoint_bytes = static_cast<int64_t>(checkpoint_budget_bytes(state_bytes));
  eopts.lanes = std::min(plan.lanes, options.queue_size);
  eopts.queue_size = options.queue_size;
  eopts.decode_share = options.decode_share;
  eopts.kv_pages = plan.kv_pool_pages;
  eopts.kv_format = options.kv_format;
  eopts.threads = options.threads;
  eopts.drafter = a.drafter.source.get();
  eopts.spec_block = a.drafter.block;
  auto engine = Engine::create(*a.model, tokenizer, eopts);
  if (!engine.ok()) return make_error("cannot start the engine: ", engine.error_message());
  a.engine_ = std::move(*engine);
  // --spec auto settled for prompt lookup: the model's DFlash drafter may still be on its way (the
  // demo's trains in the background), so watch for it and switch when it appears (drafter_watch.h).
  if (options.spec.method == SpecMethod::kAuto && !draft_named && a.drafter.source &&
      a.drafter.source->method() == "lookup") {
    a.watch = std::make_unique<DrafterWatch>(
        DrafterWatchOptions{model_path, options.drafter_watch, threads, a.drafter.block}, *a.model, *a.engine_);
  }
  return {};
}

// Raises the soft RLIMIT_NOFILE to `want` (or the hard limit if lower); returns the limit in force.
rlim_t raise_descriptor_limit(rlim_t want) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return 1024;
  if (lim.rlim_cur < want) {
    rlimit raised = lim;
    raised.rlim_cur = lim.rlim_max == RLIM_INFINITY ? want : std::min(want, lim.rlim_max);
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  return lim.rlim_cur;
}

}  // namespace

std::string default_model_id(const std::string& model_path) {
  std::string p = model_path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

int serve(const ServeOptions& options) {
  SignalWaiter signals;
  signal(SIGPIPE, SIG_IGN);  // a client gone mid-write must be an error code, not a dead server

  // 1. Bind first: a port in use fails before the (slow) model load.
  http::ServerOptions sopts;
  sopts.host = options.host;
  sopts.port = options.port;
  // The transport's own limit is the flag, or under auto the largest auto value: the context (and so
  // the auto limit) is known only after the load; App::pre_body_check refuses by the effective one.
  sopts.max_request_bytes = options.max_request_bytes.value_or(app::kAutoRequestBytesMax);
  sopts.max_connections = options.queue_size + 64;
  // Spec 2.8: the descriptor limit goes to 10240 where the hard limit allows; waiting connections
  // may take half of it, the rest is for served ones, lingering refusals and the model's files.
  sopts.max_waiting = static_cast<int>(std::min<rlim_t>(4096, raise_descriptor_limit(10240) / 2));
  // The App that answers the checks exists only after the load; nothing is accepted before start().
  std::function<std::optional<http::SimpleResponse>(const http::Request&)> check;
  sopts.pre_body_check = [&check](const http::Request& head) { return check(head); };
  auto bound = http::Server::bind(sopts);
  if (!bound.ok()) return fail(bound.error_message());
  std::unique_ptr<http::Server> server = std::move(*bound);

  // 2. --model: a local path, or a Hub repository identified, then fetched into the HF cache.
  auto resolved = hub::resolve_model(options.model, options.hub);
  if (!resolved.ok()) {
    fail(resolved.error_message());
    if (resolved.error().code == ErrorCode::kUnavailable) fail("model download or verification failed");
    return 1;
  }
  const std::string& model_path = resolved->path;

  // 3. Model, tokenizer, chat template.
  std::printf("Loading · %s\n", options.model.c_str());
  std::fflush(stdout);
  const auto t0 = std::chrono::steady_clock::now();
  ModelFilesOptions fopts;
  fopts.tokenizer_path = options.tokenizer;
  auto files = ModelFiles::open(model_path, fopts);
  if (!files.ok()) return fail(files.error_message());
  auto tok = load_model_tokenizer(*files);
  if (!tok.ok()) return fail(tok.error_message());
  if (!*tok) return fail(str_cat(options.model, " has no tokenizer (llama2.c: pass --tokenizer)"));
  std::unique_ptr<Tokenizer> tokenizer = std::move(*tok);
  std::optional<ChatTemplate> chat_template;
  if (const std::string& src = files->tokenizer().chat_template; !src.empty()) {
    auto parsed = ChatTemplate::parse(src);
    if (parsed.ok()) chat_template = std::move(*parsed);
    else std::fprintf(stderr, "warning: the model's chat template is not supported: %s\n", parsed.error_message().c_str());
  }
  std::printf("Chat template · %s\n", chat_template ? "native" : "unsupported");
  std::fflush(stdout);

  // The drafter's weights (spec 6): --draft-model (a folder or a repository, fetched like the
  // target), else for a Hub target the registry's DFlash draft for its shape.
  auto draft_path = resolve_draft_path(options, *files, resolved->from_hub);
  if (!draft_path.ok()) return fail(draft_path.error_message());

  const int threads = options.threads > 0 ? options.threads : default_thread_count();
  auto loaded = load_weights(options, model_path, *draft_path, threads);
  if (!loaded.ok()) return fail(loaded.error_message());
  std::unique_ptr<LoadedAssembly> first = std::move(*loaded);
  const Model* model = &*first->model;
  const LoadedDrafter* drafter = &first->drafter;
  std::printf("Weights loaded in %.2f s.\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  std::fflush(stdout);

  // 4. Memory plan.
  auto host = probe_host_memory();
  if (!host.ok()) return fail(host.error_message());
  const ModelConfig& cfg = model->config();
  MemoryPlanInputs in;
  in.host = *host;
  in.max_memory = options.max_memory;
  in.max_context = options.max_context;
  // The mapping becomes resident as the forward touches it; load-time copies (fused and repacked
  // matrices) are what anonymous memory grew by during the load.
  uint64_t mapped = 0;
  for (const ModelTensor& t : files->tensors()) mapped += t.n_bytes();
  in.weights_bytes = mapped + static_cast<uint64_t>(first->anon_growth) + drafter->bytes;
  const int64_t chunk = model->options().chunk_tokens;
  // With a drafter every decoding lane feeds its verify block (the last token + proposals).
  const int64_t decode_rows = int64_t{kMaxLanes} * (drafter->source ? drafter->block : 1);
  in.prefill_arena_bytes = estimate_forward_scratch_bytes(cfg, chunk + decode_rows, kMaxLanes, threads);
  in.decode_arena_bytes = estimate_forward_scratch_bytes(cfg, decode_rows, kMaxLanes, threads);
  const uint64_t state_bytes = static_cast<uint64_t>(model->recurrent_state_floats()) * sizeof(float);
  in.lane_state_bytes = estimate_lane_state_bytes(cfg, state_bytes);
  // The SSD tier's buffers when it will be on (an explicit quota, or --persistent-cache's auto one;
  // the automatic tier of a machine short of memory is decided after the plan and not reserved).
  const uint64_t disk_quota_hint = options.max_cache_disk ? *options.max_cache_disk
                                   : options.persistent_cache ? uint64_t{16} << 30 : 0;
  in.cache_reserve_bytes = checkpoint_budget_bytes(state_bytes) + disk_tier_buffer_bytes(disk_quota_hint);
  in.kv_page_bytes = static_cast<uint64_t>(KvPagePool::page_bytes(model->kv_cache_config(options.kv_format, 1)));
  in.model_window = model->max_context();
  in.attention_layers = static_cast<int>(cfg.n_layer);
  in.kv_heads = static_cast<int>(cfg.n_head_kv);
  in.head_dimension = static_cast<int>(model->kv_cache_config(options.kv_format, 1).head_dim);
  in.kv_format = options.kv_format;
  MemoryPlan plan = plan_memory(in);
  if (!plan.valid) {
    std::fprintf(stderr, "error: %s\n%s", plan.error.c_str(), plan.format_breakdown().c_str());
    return 1;
  }
  // The weights include the drafter's (spec 4: target + draft weight images); say how much of it is.
  const std::string draft_part =
      drafter->bytes > 0 ? str_cat(" (draft ", format_bytes(drafter->bytes), ")") : std::string();
  std::printf("Memory plan · budget %s · weights %s%s · KV pool %lld pages (%s) · lanes %d\n",
              format_bytes(plan.hard_budget_bytes).c_str(), format_bytes(plan.weights_bytes).c_str(),
              draft_part.c_str(), static_cast<long long>(plan.kv_pool_pages),
              format_bytes(plan.kv_pool_bytes).c_str(), plan.lanes);

  // 5. Engine.
  // SSD cache (spec 5.4-5.6): opened before the engine, whose prefix cache hands it evicted pages. It
  // outlives every engine of this run: an idle release keeps what it holds.
  auto disk = open_ssd_cache(options, plan,
                             engine_cache_namespace(*model, weights_identity(files->path()), options.kv_format),
                             model->recurrent_state_floats() * int64_t{sizeof(float)});
  if (!disk.ok()) return fail(disk.error_message());
  const bool draft_named = !draft_path->empty();
  if (Status st = start_engine(*first, options, plan, *tokenizer, disk->store.get(), model_path, draft_named, threads);
      !st.ok())
    return fail(st.error_message());
  // --idle-release reloads through the same two steps, with the start-up plan.
  EngineHost engines(
      std::move(first),
      [&]() -> Result<std::unique_ptr<EngineAssembly>> {
        auto again = load_weights(options, model_path, *draft_path, threads);
        if (!again.ok()) return again.error();
        if (Status st = start_engine(**again, options, plan, *tokenizer, disk->store.get(), model_path, draft_named,
                                     threads);
            !st.ok())
          return st.error();
        return std::unique_ptr<EngineAssembly>(std::move(*again));
      },
      options.idle_release);
  // Spec 10: the machine stays awake while requests run, unless --allow-idle-sleep.
  SleepInhibitorOptions awake_options;
  awake_options.enabled = !options.allow_idle_sleep;
  SleepInhibitor awake([&engines] { return engines.busy(); }, awake_options);

  // 6. Routes, then accept.
  AppConfig acfg;
  acfg.options = options;
  acfg.model_path = model_path;
  acfg.model_id = resolved->model_id;
  acfg.aliases = options.served_model_names;
  AppDeps deps;
  deps.tokenizer = tokenizer.get();
  deps.chat_template = chat_template ? &*chat_template : nullptr;
  deps.engines = &engines;
  deps.plan = &plan;
  deps.n_vocab = model->config().n_vocab;
  deps.disk = disk->store.get();
  deps.transport = server.get();
  deps.awake = &awake;
  App app(acfg, deps);
  check = [&app](const http::Request& head) { return app.pre_body_check(head); };
  server->set_handler([&app](const http::Request& req, std::shared_ptr<http::ResponseWriter> w) {
    app.handle(req, std::move(w));
  });
  if (options.allowed_origins.size() == 1 && options.allowed_origins[0] == "*" && options.api_key.empty())
    std::fprintf(stderr, "warning: --allowed-origin * without --api-key lets any web page use this server\n");
  if (Status st = server->start(); !st.ok()) {
    engines.shutdown();
    std::fprintf(stderr, "Error · unable to start HTTP server: %s\n", st.error_message().c_str());
    return 1;
  }
  app.set_ready(true);
  signals.serving();
  std::printf("Ready · %s · context %s%s · http://%s:%u\n", acfg.reported_id().c_str(),
              format_context_tokens(plan.maximum_context_tokens).c_str(),
              options.language_only ? " · language only" : "", options.host.c_str(),
              static_cast<unsigned>(server->bound_port()));
  std::fflush(stdout);

  // 7. Until SIGINT / SIGTERM.
  const int sig = signals.wait();
  std::printf("Stopping · releasing engine resources\n");
  std::fflush(stdout);
  app.set_ready(false);
  // The drafter watch stops first, then the engine (a persistent SSD cache gets its cached pages).
  engines.shutdown();
  server->stop();
  if (disk->store) disk->store->flush();
  return 128 + sig;
}

}  // namespace splash::app
