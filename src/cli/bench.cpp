// `splash bench --model PATH -p 512,2048 -n 128 -r 5`: llama-bench-style throughput. "ppN" prefills N
// fixed pseudo-random tokens into an empty cache in one forward call; "tgN" decodes N tokens one
// forward call each after a one-token prompt. -d D (llama-bench's depth) puts D tokens in the cache
// first, untimed ("tg128 @ d4096": decode speed at a long context). Each test runs r times after one
// untimed warm-up; the table shows the median tok/s and the min-max spread. A benchmark, not a test:
// nothing is asserted.
//
// Memory: the model's weight bytes, the KV pool's bytes, resident memory after load (VmRSS, split
// into file-backed pages, i.e. the mapped weights touched so far, and anonymous memory: copies made
// at load, KV pool, arenas) and the peak (VmHWM) after every run, so "resident = weights + KV +
// small arenas" can be checked: a second line splits resident after load into the repacked weights,
// the KV pool, norms/biases and RoPE rows, the file pages held, and the rest (code, tokenizer,
// allocator). --profile adds a per-op time breakdown (forward_profile.h).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/cpu/matmul.h"
#include "cli/commands.h"
#include "cli/bench_spec.h"
#include "cli/model_source.h"
#include "core/sizes.h"
#include "model/model.h"

namespace splash::cli {

namespace {

struct BenchArgs {
  std::string model;
  ModelSourceArgs source;  // --revision, --offline
  std::string tokenizer;
  std::vector<int64_t> pp{512};
  int64_t tg = 128;
  int64_t depth = 0;  // -d: tokens in the cache before each test (prefilled untimed)
  int reps = 5;
  int threads = 0;
  std::string kv_format = "int8";
  int64_t chunk = 0;
  bool json = false;
  bool profile = false;
  SpecBenchArgs spec;  // --spec METHOD: the speculative test instead of pp/tg (bench_spec.h)
};

// Resident-memory figures from /proc/self/status, in bytes (0 when the field is absent).
struct MemoryStatus {
  uint64_t rss = 0;       // VmRSS
  uint64_t rss_anon = 0;  // RssAnon: heap, copies made at load, the KV pool
  uint64_t rss_file = 0;  // RssFile: file-backed pages, i.e. the mapped weights touched
  uint64_t hwm = 0;       // VmHWM: peak RSS so far
};

MemoryStatus read_memory_status() {
  MemoryStatus m;
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long kb = 0;
    if (std::sscanf(line.c_str(), "VmRSS: %llu kB", &kb) == 1) m.rss = kb * 1024;
    else if (std::sscanf(line.c_str(), "RssAnon: %llu kB", &kb) == 1) m.rss_anon = kb * 1024;
    else if (std::sscanf(line.c_str(), "RssFile: %llu kB", &kb) == 1) m.rss_file = kb * 1024;
    else if (std::sscanf(line.c_str(), "VmHWM: %llu kB", &kb) == 1) m.hwm = kb * 1024;
  }
  return m;
}

struct BenchResult {
  std::string test;
  int64_t n_tokens = 0;
  std::vector<double> tok_s;  // [reps]
  double median = 0, min = 0, max = 0;
  ForwardProfile profile;     // timed runs only; empty without --profile
};

using Clock = std::chrono::steady_clock;

// Fixed tokens so runs are comparable across builds; ids below 3 are skipped (special in llama vocabs).
std::vector<int32_t> bench_tokens(int64_t n, int32_t n_vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint64_t s = 0x9E3779B97F4A7C15ull;
  const uint64_t range = n_vocab > 3 ? static_cast<uint64_t>(n_vocab - 3) : 1;
  for (auto& x : t) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<int32_t>(3 + (s >> 33) % range);
  }
  return t;
}

// Fills `seq` with the depth tokens (untimed, unprofiled); a no-op for none.
Status fill_depth(const Model& m, KvPagePool& kv, ThreadPool& th, SequenceState& seq, std::span<const int32_t> ctx,
                  ForwardOptions fo) {
  if (ctx.empty()) return Status{};
  fo.profile = nullptr;
  SequenceRun run{&seq, ctx, LogitRows::kLast};
  auto out = m.forward({&run, 1}, kv, th, fo);
  if (!out.ok()) return out.error();
  return Status{};
}

// One timed run after the `ctx` tokens: seconds; the sequence is released before returning.
Result<double> time_prefill(const Model& m, KvPagePool& kv, ThreadPool& th, std::span<const int32_t> ctx,
                            std::span<const int32_t> toks, const ForwardOptions& fo) {
  SequenceState seq;
  if (Status st = fill_depth(m, kv, th, seq, ctx, fo); !st.ok()) {
    release_sequence(kv, seq);
    return st.error();
  }
  SequenceRun run{&seq, toks, LogitRows::kLast};
  const auto t0 = Clock::now();
  auto out = m.forward({&run, 1}, kv, th, fo);
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  release_sequence(kv, seq);
  if (!out.ok()) return out.error();
  return s;
}

Result<double> time_decode(const Model& m, KvPagePool& kv, ThreadPool& th, std::span<const int32_t> ctx,
                           std::span<const int32_t> toks, const ForwardOptions& fo) {
  SequenceState seq;
  if (Status st = fill_depth(m, kv, th, seq, ctx, fo); !st.ok()) {
    release_sequence(kv, seq);
    return st.error();
  }
  // One ForwardOutput for every step, as `splash run` and the server decode (Model::forward_into: no
  // allocation per step), so tgN measures their decode step.
  ForwardOutput out;
  SequenceRun first{&seq, toks.subspan(0, 1), LogitRows::kLast};
  if (Status st = m.forward_into({&first, 1}, kv, th, out, fo); !st.ok()) {
    release_sequence(kv, seq);
    return st.error();
  }
  const auto t0 = Clock::now();
  for (size_t i = 1; i < toks.size(); ++i) {
    SequenceRun step{&seq, toks.subspan(i, 1), LogitRows::kLast};
    if (Status st = m.forward_into({&step, 1}, kv, th, out, fo); !st.ok()) {
      release_sequence(kv, seq);
      return st.error();
    }
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  release_sequence(kv, seq);
  return s;
}

std::string format_params(uint64_t n) {
  char buf[32];
  if (n >= 1000000000ull) std::snprintf(buf, sizeof buf, "%.2f B", n / 1e9);
  else std::snprintf(buf, sizeof buf, "%.2f M", n / 1e6);
  return buf;
}

int bench_usage_error(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  return 2;
}

int run_bench(BenchArgs a) {
  // SPLASH_PROFILE=1 is the same as --profile (read here, at the edge; the forward takes a pointer).
  if (const char* e = std::getenv("SPLASH_PROFILE"); e != nullptr && *e != '\0' && std::string(e) != "0") a.profile = true;
  if (a.reps < 1) return bench_usage_error(str_cat("-r ", a.reps, " must be >= 1"));
  if (a.tg < 0) return bench_usage_error(str_cat("-n ", a.tg, " is negative"));
  if (a.depth < 0) return bench_usage_error(str_cat("-d ", a.depth, " is negative"));
  if (a.threads < 0) return bench_usage_error(str_cat("--threads ", a.threads, " is negative"));
  for (int64_t p : a.pp)
    if (p < 0) return bench_usage_error(str_cat("-p ", p, " is negative"));
  KvFormat format;
  if (a.kv_format == "int8") format = KvFormat::kInt8;
  else if (a.kv_format == "bf16") format = KvFormat::kBF16;
  else if (a.kv_format == "f32") format = KvFormat::kF32;
  else return bench_usage_error(str_cat("--kv-format '", a.kv_format, "' is not one of int8, bf16, f32"));

  ModelFilesOptions fopts;
  fopts.tokenizer_path = a.tokenizer;
  auto path = resolve_model_arg(a.model, a.source);
  if (!path.ok()) return std::fprintf(stderr, "error: %s\n", path.error_message().c_str()), 1;
  auto files = ModelFiles::open(*path, fopts);
  if (!files.ok()) return std::fprintf(stderr, "error: %s\n", files.error_message().c_str()), 1;
  auto model = Model::load(*files);
  if (!model.ok()) return std::fprintf(stderr, "error: %s\n", model.error_message().c_str()), 1;
  const Model& m = *model;
  if (a.spec.spec.method != "off")
    return run_spec_bench(a.spec, *path, *files, m, a.tg, a.reps, a.threads, format, a.json);

  uint64_t n_bytes = 0, n_params = 0;
  for (const auto& t : files->tensors()) {
    n_bytes += t.n_bytes();
    n_params += t.n_elems();
  }
  int64_t longest = a.tg + 1;  // tgN: a one-token prompt, then N steps
  for (int64_t p : a.pp) longest = std::max(longest, p);
  if (a.depth + longest > m.max_context())
    return bench_usage_error(str_cat("a test needs ", a.depth + longest, " positions (", a.depth, " of depth); the model's ",
                               "context limit is ", m.max_context()));
  auto kv = KvPagePool::create(m.kv_cache_config(format, (a.depth + longest) / kKvPageTokens + 2));
  if (!kv.ok()) return std::fprintf(stderr, "error: %s\n", kv.error_message().c_str()), 1;
  const MemoryStatus mem_load = read_memory_status();
  const ModelMemory mm = m.memory();
  const uint64_t kv_bytes = static_cast<uint64_t>(kv->kv_bytes_total());
  const uint64_t accounted = mm.weights_owned + kv_bytes + mm.vectors + mm.rope + mem_load.rss_file;
  const uint64_t other = mem_load.rss > accounted ? mem_load.rss - accounted : 0;
  ThreadPool threads(a.threads);
  ForwardOptions fo;
  fo.chunk_tokens = a.chunk;
  // The depth tokens come first, then each test's own.
  const std::vector<int32_t> all = bench_tokens(a.depth + longest, static_cast<int32_t>(m.config().n_vocab));
  const std::span<const int32_t> ctx(all.data(), static_cast<size_t>(a.depth));
  const std::vector<int32_t> toks(all.begin() + a.depth, all.end());

  std::vector<BenchResult> results;
  auto run_test = [&](bool decode, int64_t n) -> Status {
    if (n == 0) return Status{};
    BenchResult r;
    r.test = str_cat(decode ? "tg" : "pp", n, a.depth > 0 ? str_cat(" @ d", a.depth) : std::string());
    r.n_tokens = n;
    // time_decode times every token after the first (the one-token prompt): N + 1 tokens time N steps.
    std::vector<int32_t> t(toks.begin(), toks.begin() + std::min<int64_t>(n, static_cast<int64_t>(toks.size())));
    if (decode) t.push_back(toks[0]);
    ForwardOptions run_fo = fo;
    for (int i = 0; i <= a.reps; ++i) {  // i == 0: untimed warm-up
      run_fo.profile = a.profile && i > 0 ? &r.profile : nullptr;
      SPLASH_TRY(double s, decode ? time_decode(m, *kv, threads, ctx, t, run_fo)
                                  : time_prefill(m, *kv, threads, ctx, t, run_fo));
      if (i > 0) r.tok_s.push_back(s > 0 ? n / s : 0);
    }
    std::vector<double> v = r.tok_s;
    std::sort(v.begin(), v.end());
    r.median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    r.min = v.front();
    r.max = v.back();
    if (!a.json)
      std::fprintf(stderr, "  %s: %.2f tok/s (median of %d)\n", r.test.c_str(), r.median, a.reps);
    results.push_back(std::move(r));
    return Status{};
  };
  for (int64_t p : a.pp)
    if (Status st = run_test(false, p); !st.ok()) return std::fprintf(stderr, "error: %s\n", st.error_message().c_str()), 1;
  if (Status st = run_test(true, a.tg); !st.ok()) return std::fprintf(stderr, "error: %s\n", st.error_message().c_str()), 1;
  const MemoryStatus mem_end = read_memory_status();

  // "llama F32 matrices (avx2)": describe_weights() ("llama, F32 matrices (avx2), embeddings ...")
  // up to its second item; the rest (every fusion) would not fit a table column.
  const std::string& weights = m.describe_weights();
  const size_t first = weights.find(", ");
  const size_t second = first == std::string::npos ? first : weights.find(',', first + 2);
  std::string model_name = weights.substr(0, second);
  if (first != std::string::npos) model_name.replace(first, 2, " ");
  auto profile_json = [&](const ForwardProfile& p) {
    nlohmann::json ops = nlohmann::json::object();
    const double n = p.forwards > 0 ? static_cast<double>(p.forwards) : 1.0;
    for (size_t i = 0; i < p.seconds.size(); ++i)
      if (p.calls[i] > 0) ops[forward_op_name(static_cast<ForwardOp>(i))] = p.seconds[i] * 1e3 / n;
    return nlohmann::json{{"ms_per_forward", ops},
                          {"forward_ms", p.forward_seconds * 1e3 / n},
                          {"other_ms", (p.forward_seconds - p.op_seconds()) * 1e3 / n},
                          {"cpu_ms", p.cpu_seconds * 1e3 / n},
                          {"forwards", p.forwards}};
  };
  // Decode's memory traffic: the weights a step reads (only the selected experts of a MoE layer),
  // the recurrent state read and written, plus the KV of the positions it attends to (depth +
  // positions 1..N for tgN, so depth + (N + 1) / 2 on average), at the median rate.
  const double kv_per_token = static_cast<double>(kv->page_bytes()) / kKvPageTokens;
  auto mean_context = [&](const BenchResult& r) {
    return static_cast<double>(a.depth) + static_cast<double>(r.n_tokens + 1) / 2.0;
  };
  auto decode_bytes = [&](const BenchResult& r) {
    return static_cast<double>(mm.decode_read + mm.decode_state) + kv_per_token * mean_context(r);
  };
  auto is_decode = [](const BenchResult& r) { return r.test.rfind("tg", 0) == 0; };
  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : results) {
      out.push_back({{"model", model_name},
                     {"weights", weights},
                     {"path", a.model},
                     {"size_bytes", n_bytes},
                     {"params", n_params},
                     {"threads", threads.size()},
                     {"kv_format", kv_format_name(format)},
                     {"test", r.test},
                     {"n_tokens", r.n_tokens},
                     {"n_depth", a.depth},
                     {"reps", a.reps},
                     {"tok_s_median", r.median},
                     {"tok_s_min", r.min},
                     {"tok_s_max", r.max},
                     {"tok_s", r.tok_s},
                     {"weights_bytes", n_bytes},
                     {"kv_bytes", kv_bytes},
                     {"rss_load_bytes", mem_load.rss},
                     {"rss_load_file_bytes", mem_load.rss_file},
                     {"rss_load_anon_bytes", mem_load.rss_anon},
                     {"weights_repacked_bytes", mm.weights_owned},
                     {"weights_mapped_bytes", mm.weights_mapped},
                     {"vectors_bytes", mm.vectors},
                     {"rope_bytes", mm.rope},
                     {"rss_load_other_bytes", other},
                     {"rss_peak_bytes", mem_end.hwm}});
      if (is_decode(r)) {
        out.back()["decode_bytes_per_token"] = decode_bytes(r);
        out.back()["decode_gb_s"] = decode_bytes(r) * r.median * 1e-9;
        out.back()["decode_prefetch"] = decode_prefetch_summary();
      }
      if (a.profile) out.back()["profile"] = profile_json(r.profile);
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  int test_w = 8;  // "tg128 @ d4096" needs more
  for (const auto& r : results) test_w = std::max(test_w, static_cast<int>(r.test.size()));
  std::printf("| %-32s | %10s | %9s | %7s | %4s | %*s | %26s |\n", "model", "size", "params", "threads", "kv", test_w,
              "test", "t/s (median, min-max)");
  std::printf("| %s | %s | %s | %s | %s | %s | %s |\n", std::string(32, '-').c_str(), std::string(10, '-').c_str(),
              std::string(9, '-').c_str(), std::string(7, '-').c_str(), std::string(4, '-').c_str(),
              std::string(static_cast<size_t>(test_w), '-').c_str(), std::string(26, '-').c_str());
  for (const auto& r : results) {
    char ts[64];
    std::snprintf(ts, sizeof ts, "%.2f (%.2f-%.2f)", r.median, r.min, r.max);
    std::printf("| %-32s | %10s | %9s | %7d | %4s | %*s | %26s |\n", model_name.c_str(), format_bytes(n_bytes).c_str(),
                format_params(n_params).c_str(), threads.size(), kv_format_name(format), test_w, r.test.c_str(), ts);
  }
  std::printf("\nmemory: weights %s, KV pool %s (%lld pages); resident after load %s (mapped file %s, anonymous %s), "
              "peak %s\n",
              format_bytes(n_bytes).c_str(), format_bytes(kv_bytes).c_str(),
              static_cast<long long>(kv->kv_pages_total()), format_bytes(mem_load.rss).c_str(),
              format_bytes(mem_load.rss_file).c_str(), format_bytes(mem_load.rss_anon).c_str(),
              format_bytes(mem_end.hwm).c_str());
  std::printf("resident after load = repacked weights %s + KV pool %s + norms/biases %s + RoPE rows %s + file pages "
              "%s (of %s read in place) + other %s (code, tokenizer, allocator)\n",
              format_bytes(mm.weights_owned).c_str(), format_bytes(kv_bytes).c_str(), format_bytes(mm.vectors).c_str(),
              format_bytes(mm.rope).c_str(), format_bytes(mem_load.rss_file).c_str(),
              format_bytes(mm.weights_mapped).c_str(), format_bytes(other).c_str());
  for (const auto& r : results) {
    if (!is_decode(r)) continue;
    std::printf("decode %s: %s read per token (weights %s + recurrent state %s + KV %s at mean context %.1f) = %.2f "
                "GB/s at %.2f tok/s; compare with bench_matmul's membw (bench/decode_bandwidth.sh)\n",
                r.test.c_str(), format_bytes(static_cast<uint64_t>(decode_bytes(r))).c_str(),
                format_bytes(mm.decode_read).c_str(), format_bytes(mm.decode_state).c_str(),
                format_bytes(static_cast<uint64_t>(decode_bytes(r)) - mm.decode_read - mm.decode_state).c_str(),
                mean_context(r), decode_bytes(r) * r.median * 1e-9, r.median);
  }
  if (const std::string tuned = decode_prefetch_summary(); !tuned.empty())
    std::printf("decode prefetch distance, tuned per layout while decoding: %s\n", tuned.c_str());
  if (a.profile) {
    for (const auto& r : results)
      std::printf("\nprofile %s (%d threads):\n%s", r.test.c_str(), threads.size(), r.profile.table(threads.size()).c_str());
  }
  return 0;
}

}  // namespace

Runner register_bench(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  app.add_option("-m,--model", a->model,
                 "Model: .gguf file, llama2.c .bin, safetensors directory, or OWNER/REPO[:VARIANT] on the Hub")
      ->required();
  add_model_source_flags(app, a->source);
  app.add_option("-p,--n-prompt", a->pp, "Prompt lengths for the ppN tests (comma separated; 0 = none)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("-n,--n-gen", a->tg, "Tokens for the tgN test (0 = none)")->capture_default_str();
  app.add_option("-d,--depth", a->depth,
                 "Tokens already in the cache before each test, prefilled untimed (llama-bench's depth: "
                 "\"tg128 @ d4096\" is decode at a 4k context)")
      ->capture_default_str();
  app.add_option("-r,--repetitions", a->reps, "Timed runs per test")->capture_default_str();
  app.add_option("-t,--threads", a->threads, "Threads (0 = physical cores)")->capture_default_str();
  app.add_option("--kv-format", a->kv_format, "KV cache format: int8, bf16 or f32")->capture_default_str();
  app.add_option("--chunk", a->chunk, "Prefill chunk tokens (0 = the model's default)")->capture_default_str();
  app.add_flag("--json", a->json, "Print the results as JSON");
  app.add_flag("--profile", a->profile,
               "Time every op of the forward (matmul, attention, norms ...) and print the breakdown per test");
  app.add_option("--tokenizer", a->tokenizer, "llama2.c tokenizer.bin (default: beside the model)");
  a->spec.spec.method = "off";
  add_spec_bench_flags(app, a->spec);
  return [a] { return run_bench(*a); };
}

}  // namespace splash::cli
