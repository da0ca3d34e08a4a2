// `splash perplexity --model M -f FILE [--ctx N] [--chunks K] [--batch B]`: llama-perplexity's method
// (eval/perplexity_stats.h): the file is tokenized whole (BOS first when the vocabulary adds one),
// cut into non-overlapping windows of --ctx tokens whose first token is replaced by BOS (when the
// vocabulary adds one), and each window is scored on its second half. Prints the running perplexity
// after each chunk ("[1]x,[2]y,...") and "PPL = x +/- e"; --json prints one object instead.
//
// KL-divergence mode: --save-logits FILE keeps the base model's log-probabilities of every scored
// token (eval/logits_file.h); --kl-base FILE evaluates another model (a quantized copy) on the tokens
// stored there and reports mean KLD, top-1 agreement, KLD percentiles and both perplexities. A
// llama-perplexity --kl-divergence-base file is accepted as the base too.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_source.h"
#include "eval/logits_file.h"
#include "eval/perplexity_stats.h"
#include "model/model.h"
#include "tokenizer/model_tokenizer.h"

namespace splash::cli {

namespace {

struct PerplexityArgs {
  std::string model;
  ModelSourceArgs source;
  std::string tokenizer;
  std::string file;
  int64_t ctx = 0;  // 0: 512, or the base file's
  int64_t chunks = -1;
  int64_t batch = 2048;
  int threads = 0;
  std::string kv_format = "f32";
  bool json = false;
  std::string save_logits;
  std::string kl_base;
};

int ppl_usage_error(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  return 2;
}

int ppl_fail(const std::string& msg) {
  std::fprintf(stderr, "error: %s\n", msg.c_str());
  return 1;
}

// What one pass over the windows produces, per scored token in order: the logits row and its target.
using RowSink = std::function<Status(int64_t chunk, int64_t i, std::span<const float> logits, int32_t target)>;

// Evaluates chunks [0, n_chunk) of `tokens` (windows of n_ctx) and hands every scored row to `sink`
// in chunk order; `chunk_done` runs after each chunk's rows. Several windows share a forward pass
// when batch >= 2 * n_ctx (llama.cpp's n_seq = batch / n_ctx); a window longer than the batch is fed
// in pieces of `batch` tokens.
Status evaluate_windows(const Model& m, KvPagePool& kv, ThreadPool& threads, std::span<const int32_t> tokens,
                        int64_t n_ctx, int64_t n_chunk, int64_t batch, int32_t bos, const RowSink& sink,
                        const std::function<void(int64_t chunk)>& chunk_done) {
  const int64_t first = n_ctx / 2;
  const int64_t n_seq = std::max<int64_t>(1, batch / n_ctx);
  const int64_t piece = std::min(batch, n_ctx);
  ForwardOptions fo;
  fo.chunk_tokens = piece;
  ForwardOutput out;
  // The last position's logits predict nothing inside the window, so positions [0, n_ctx - 1) are fed.
  const int64_t n_fed = n_ctx - 1;
  for (int64_t c0 = 0; c0 < n_chunk; c0 += n_seq) {
    const int64_t n_here = std::min(n_seq, n_chunk - c0);
    std::vector<std::vector<int32_t>> windows(static_cast<size_t>(n_here));
    std::vector<SequenceState> seqs(static_cast<size_t>(n_here));
    for (int64_t s = 0; s < n_here; ++s) {
      auto w = tokens.subspan(static_cast<size_t>((c0 + s) * n_ctx), static_cast<size_t>(n_ctx));
      windows[s].assign(w.begin(), w.end());
      if (bos >= 0) windows[s][0] = bos;
    }
    // Pieces never straddle `first`: before it no logits are needed, from it on every row is.
    Status st;
    for (int64_t a = 0; a < n_fed && st.ok();) {
      int64_t b = std::min(a + piece, n_fed);
      if (a < first && b > first) b = first;
      const bool want = a >= first;
      std::vector<SequenceRun> runs;
      for (int64_t s = 0; s < n_here; ++s)
        runs.push_back(
            {&seqs[s], std::span<const int32_t>(windows[s]).subspan(static_cast<size_t>(a), static_cast<size_t>(b - a)),
             want ? LogitRows::kAll : LogitRows::kNone});
      st = m.forward_into(runs, kv, threads, out, fo);
      if (!st.ok()) break;
      if (want) {
        for (int64_t s = 0; s < n_here && st.ok(); ++s)
          for (int64_t t = 0; t < b - a && st.ok(); ++t) {
            const int64_t pos = a + t;
            const int32_t target = tokens[static_cast<size_t>((c0 + s) * n_ctx + pos + 1)];
            st = sink(c0 + s, pos - first, {out.logits_at(static_cast<size_t>(s), t), static_cast<size_t>(out.n_vocab)},
                      target);
          }
      }
      a = b;
    }
    for (auto& seq : seqs) release_sequence(kv, seq);
    if (!st.ok()) return st;
    for (int64_t s = 0; s < n_here; ++s) chunk_done(c0 + s);
  }
  return {};
}

int run_perplexity(const PerplexityArgs& a) {
  if (a.threads < 0) return ppl_usage_error(str_cat("--threads ", a.threads, " is negative"));
  if (a.batch < 1) return ppl_usage_error(str_cat("--batch ", a.batch, " must be >= 1"));
  if (a.chunks == 0 || a.chunks < -1)
    return ppl_usage_error(str_cat("--chunks ", a.chunks, " must be >= 1 (or -1: all)"));
  if (a.ctx != 0 && (a.ctx < 4 || a.ctx % 2 != 0))
    return ppl_usage_error(str_cat("--ctx ", a.ctx, " must be even and >= 4"));
  if (!a.save_logits.empty() && !a.kl_base.empty())
    return ppl_usage_error(
        "--save-logits and --kl-base cannot be combined (save with the base model, compare with the other)");
  if (a.kl_base.empty() && a.file.empty()) return ppl_usage_error("-f FILE is required (or --kl-base FILE)");
  if (!a.kl_base.empty() && !a.file.empty())
    return ppl_usage_error("-f is not used with --kl-base: the text is the token ids stored in the base file");
  KvFormat kv_format;
  if (a.kv_format == "int8") kv_format = KvFormat::kInt8;
  else if (a.kv_format == "bf16") kv_format = KvFormat::kBF16;
  else if (a.kv_format == "f32") kv_format = KvFormat::kF32;
  else return ppl_usage_error(str_cat("--kv-format '", a.kv_format, "' is not one of int8, bf16, f32"));

  std::optional<eval::LogitsBase> base;
  if (!a.kl_base.empty()) {
    auto b = eval::LogitsBase::open(a.kl_base);
    if (!b.ok()) return ppl_fail(b.error_message());
    base = std::move(*b);
    if (a.ctx != 0 && a.ctx != base->n_ctx())
      return ppl_usage_error(str_cat("--ctx ", a.ctx, " differs from the base file's ", base->n_ctx()));
  }
  std::string text;
  if (!a.file.empty()) {
    std::ifstream in(a.file, std::ios::binary);
    if (!in) return ppl_fail(str_cat(a.file, ": cannot open"));
    std::ostringstream ss;
    ss << in.rdbuf();
    text = ss.str();
    // One final newline is dropped, as llama.cpp's -f does, so both tools score the same tokens.
    if (!text.empty() && text.back() == '\n') text.pop_back();
  }

  auto path = resolve_model_arg(a.model, a.source);
  if (!path.ok()) return ppl_fail(path.error_message());
  ModelFilesOptions fopts;
  fopts.tokenizer_path = a.tokenizer;
  auto files = ModelFiles::open(*path, fopts);
  if (!files.ok()) return ppl_fail(files.error_message());
  auto tok = load_model_tokenizer(*files);
  if (!tok.ok()) return ppl_fail(tok.error_message());
  if (!*tok) return ppl_fail(str_cat(a.model, " has no tokenizer (llama2.c: pass --tokenizer)"));
  const Tokenizer& tokenizer = **tok;
  const int64_t n_ctx = base ? base->n_ctx() : (a.ctx != 0 ? a.ctx : 512);
  // Like llama-perplexity, a window longer than the model's context is evaluated (with a warning).
  ModelOptions mopts;
  const int64_t trained = files->config().max_position;
  if (trained > 0 && n_ctx > trained) {
    std::fprintf(stderr, "warning: --ctx %lld exceeds the model's context of %lld tokens\n",
                 static_cast<long long>(n_ctx), static_cast<long long>(trained));
    mopts.max_context = n_ctx;
  }
  auto model = Model::load(*files, mopts);
  if (!model.ok()) return ppl_fail(model.error_message());
  const Model& m = *model;
  const int64_t n_vocab = m.config().n_vocab;
  if (n_ctx > m.max_context())
    return ppl_usage_error(
        str_cat("--ctx ", n_ctx, " exceeds the longest sequence this model runs (", m.max_context(), ")"));

  const bool add_bos = tokenizer.add_bos() && tokenizer.bos_id() >= 0;
  std::vector<int32_t> tokens;
  int64_t n_chunk = 0, n_text_tokens = 0;
  if (base) {
    if (base->n_vocab() != n_vocab)
      return ppl_fail(str_cat(a.kl_base, ": vocabulary of ", base->n_vocab(), " tokens, the model has ", n_vocab));
    n_chunk = a.chunks < 0 ? base->n_chunk() : std::min(a.chunks, base->n_chunk());
    tokens.assign(base->tokens().begin(), base->tokens().begin() + n_chunk * n_ctx);
  } else {
    if (add_bos) tokens.push_back(tokenizer.bos_id());
    const std::vector<int32_t> ids = tokenizer.encode(text, /*add_special=*/false, /*parse_special=*/false);
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    n_text_tokens = static_cast<int64_t>(tokens.size());
    if (static_cast<int64_t>(tokens.size()) < 2 * n_ctx)
      return ppl_fail(
          str_cat(a.file, " tokenizes to ", tokens.size(), " tokens; --ctx ", n_ctx, " needs at least ", 2 * n_ctx));
    const int64_t n_max = static_cast<int64_t>(tokens.size()) / n_ctx;
    n_chunk = a.chunks < 0 ? n_max : std::min(a.chunks, n_max);
    tokens.resize(static_cast<size_t>(n_chunk * n_ctx));
  }
  for (int32_t t : tokens)
    if (t < 0 || t >= n_vocab)
      return ppl_fail(str_cat("token id ", t, " is outside the model's vocabulary of ", n_vocab));

  std::optional<eval::LogitsWriter> writer;
  if (!a.save_logits.empty()) {
    auto w = eval::LogitsWriter::create(a.save_logits, n_ctx, n_vocab, n_chunk, add_bos, tokens);
    if (!w.ok()) return ppl_fail(w.error_message());
    writer = std::move(*w);
  }

  const int64_t n_seq = std::max<int64_t>(1, a.batch / n_ctx);
  auto kv = KvPagePool::create(m.kv_cache_config(kv_format, n_seq * (n_ctx / kKvPageTokens + 2)));
  if (!kv.ok()) return ppl_fail(kv.error_message());
  ThreadPool threads(a.threads);
  std::fprintf(stderr,
               "perplexity: %lld tokens, %lld chunks of %lld (scoring %lld tokens each), batch %lld, "
               "%d threads, BOS %s\n",
               static_cast<long long>(tokens.size()), static_cast<long long>(n_chunk), static_cast<long long>(n_ctx),
               static_cast<long long>(eval::scored_per_chunk(n_ctx)), static_cast<long long>(a.batch), threads.size(),
               add_bos ? "first" : "none (the vocabulary adds none)");

  const int64_t per_chunk = eval::scored_per_chunk(n_ctx);
  // Rows of the chunks in flight, indexed chunk - c_lo; summed in order when their chunk is done.
  std::vector<std::vector<double>> nll_rows;
  std::vector<std::vector<eval::TokenComparison>> cmp_rows;
  int64_t c_lo = 0;
  eval::PerplexityAccumulator ppl;
  eval::KlAccumulator kl;
  std::vector<double> running;
  auto row_of = [&](int64_t chunk) -> size_t {
    const size_t i = static_cast<size_t>(chunk - c_lo);
    if (base) {
      if (cmp_rows.size() <= i)
        cmp_rows.resize(i + 1, std::vector<eval::TokenComparison>(static_cast<size_t>(per_chunk)));
    } else if (nll_rows.size() <= i) {
      nll_rows.resize(i + 1, std::vector<double>(static_cast<size_t>(per_chunk)));
    }
    return i;
  };
  // Writes go in chunk order: rows of a later sequence in the pass wait for the earlier ones.
  std::vector<std::vector<std::vector<float>>> pending_save;
  auto sink = [&](int64_t chunk, int64_t i, std::span<const float> logits, int32_t target) -> Status {
    const size_t r = row_of(chunk);
    if (base) {
      cmp_rows[r][static_cast<size_t>(i)] = eval::compare_token(logits, base->row(chunk, i), target);
    } else {
      nll_rows[r][static_cast<size_t>(i)] = eval::token_nll(logits, target);
      if (writer) {
        if (pending_save.size() <= r) pending_save.resize(r + 1);
        pending_save[r].emplace_back(logits.begin(), logits.end());
      }
    }
    return {};
  };
  Status save_status;
  auto chunk_done = [&](int64_t chunk) {
    const size_t r = static_cast<size_t>(chunk - c_lo);
    if (base) {
      for (const auto& t : cmp_rows[r]) kl.add(t);
      running.push_back(kl.running_ppl());
    } else {
      for (double v : nll_rows[r]) ppl.add(v);
      running.push_back(ppl.ppl());
      if (writer && save_status.ok())
        for (const auto& row : pending_save[r])
          if (save_status = writer->add_row(row); !save_status.ok()) break;
    }
    if (!a.json) {
      std::printf("[%lld]%.4f,", static_cast<long long>(chunk + 1), running.back());
      std::fflush(stdout);
    }
    // The pass's last chunk: the buffers start again at the next pass's first chunk.
    const int64_t pass_end = std::min(c_lo + n_seq, n_chunk);
    if (chunk + 1 == pass_end) {
      c_lo = pass_end;
      nll_rows.clear();
      cmp_rows.clear();
      pending_save.clear();
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  Status st = evaluate_windows(m, *kv, threads, tokens, n_ctx, n_chunk, a.batch, add_bos ? tokenizer.bos_id() : -1,
                               sink, chunk_done);
  if (!a.json) std::printf("\n");
  std::fflush(stdout);
  if (!st.ok()) return ppl_fail(st.error_message());
  if (!save_status.ok()) return ppl_fail(save_status.error_message());
  if (writer) {
    if (Status w = writer->finish(); !w.ok()) return ppl_fail(w.error_message());
    std::fprintf(stderr, "saved the log-probabilities of %lld tokens to %s\n",
                 static_cast<long long>(n_chunk * per_chunk), a.save_logits.c_str());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double tok_s = seconds > 0 ? static_cast<double>(n_chunk * n_ctx) / seconds : 0;

  if (!base) {
    if (a.json) {
      nlohmann::json j = {{"model", a.model},
                          {"file", a.file},
                          {"n_ctx", n_ctx},
                          {"n_chunk", n_chunk},
                          {"n_text_tokens", n_text_tokens},
                          {"n_tokens", tokens.size()},
                          {"n_scored", ppl.count()},
                          {"bos", add_bos},
                          {"ppl", ppl.ppl()},
                          {"ppl_uncertainty", ppl.ppl_uncertainty()},
                          {"mean_nll", ppl.mean_nll()},
                          {"running_ppl", running},
                          {"seconds", seconds},
                          {"tok_s", tok_s}};
      if (writer) j["saved_logits"] = a.save_logits;
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      std::printf("PPL = %.4f +/- %.5f\n", ppl.ppl(), ppl.ppl_uncertainty());
      std::fprintf(stderr, "%lld tokens scored in %.2f s (%.0f tok/s evaluated)\n", static_cast<long long>(ppl.count()),
                   seconds, tok_s);
    }
    return 0;
  }
  const eval::KlSummary s = kl.summary();
  if (a.json) {
    auto me = [](const eval::MeanError& v) { return nlohmann::json{{"value", v.value}, {"error", v.error}}; };
    nlohmann::json j = {{"model", a.model},
                        {"kl_base", a.kl_base},
                        {"base_format", base->is_llama_cpp() ? "llama.cpp" : "splash"},
                        {"n_ctx", n_ctx},
                        {"n_chunk", n_chunk},
                        {"n_scored", s.count},
                        {"ppl", me(s.ppl)},
                        {"ppl_base", me(s.ppl_base)},
                        {"ln_ppl_ratio", me(s.log_ppl_ratio)},
                        {"kld_mean", me(s.kld)},
                        {"kld_max", s.kld_max},
                        {"kld_p999", s.kld_p999},
                        {"kld_p99", s.kld_p99},
                        {"kld_median", s.kld_median},
                        {"kld_min", s.kld_min},
                        {"same_top", me(s.same_top)},
                        {"p_diff_rms", s.p_diff_rms},
                        {"running_ppl", running},
                        {"seconds", seconds}};
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("Mean PPL(Q)                : %10.6f +/- %10.6f\n", s.ppl.value, s.ppl.error);
  std::printf("Mean PPL(base)             : %10.6f +/- %10.6f\n", s.ppl_base.value, s.ppl_base.error);
  std::printf("Mean ln(PPL(Q)/PPL(base))  : %10.6f +/- %10.6f\n", s.log_ppl_ratio.value, s.log_ppl_ratio.error);
  std::printf("Mean    KLD: %10.6f +/- %10.6f\n", s.kld.value, s.kld.error);
  std::printf("Maximum KLD: %10.6f\n", s.kld_max);
  std::printf("99.9%%   KLD: %10.6f\n", s.kld_p999);
  std::printf("99.0%%   KLD: %10.6f\n", s.kld_p99);
  std::printf("Median  KLD: %10.6f\n", s.kld_median);
  std::printf("Minimum KLD: %10.6f\n", s.kld_min);
  std::printf("RMS dp     : %6.3f %%\n", 100.0 * s.p_diff_rms);
  std::printf("Same top p : %6.3f +/- %5.3f %%\n", 100.0 * s.same_top.value, 100.0 * s.same_top.error);
  std::fprintf(stderr, "%lld tokens compared in %.2f s\n", static_cast<long long>(s.count), seconds);
  return 0;
}

}  // namespace

Runner register_perplexity(CLI::App& app) {
  auto a = std::make_shared<PerplexityArgs>();
  app.add_option("-m,--model", a->model,
                 "Model: .gguf file, llama2.c .bin, safetensors directory, or OWNER/REPO[:VARIANT] on the Hub")
      ->required();
  add_model_source_flags(app, a->source);
  app.add_option("-f,--file", a->file, "Text file to evaluate (tokenized whole)");
  app.add_option("-c,--ctx", a->ctx, "Window length in tokens; each window scores its second half (default 512)");
  app.add_option("--chunks", a->chunks, "Evaluate at most this many windows (-1 = all)")->capture_default_str();
  app.add_option("-b,--batch", a->batch,
                 "Tokens per forward pass: batch / ctx windows share a pass; a longer window goes in pieces")
      ->capture_default_str();
  app.add_option("-t,--threads", a->threads, "Threads (0 = physical cores)")->capture_default_str();
  app.add_option("--kv-format", a->kv_format, "KV cache format: f32, bf16 or int8")->capture_default_str();
  app.add_flag("--json", a->json, "Print one JSON object instead of the running values and the final line");
  app.add_option("--save-logits", a->save_logits,
                 "Save the base model's log-probabilities of every scored token (and the tokens) to FILE");
  app.add_option("--kl-base", a->kl_base,
                 "Compare with a --save-logits FILE (or llama-perplexity's --kl-divergence-base file): KLD, "
                 "top-1 agreement, both perplexities");
  app.add_option("--tokenizer", a->tokenizer, "llama2.c tokenizer.bin (default: beside the model)");
  return [a] { return run_perplexity(*a); };
}

}  // namespace splash::cli
