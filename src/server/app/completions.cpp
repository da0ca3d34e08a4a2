// The inference routes: POST /v1/chat/completions, /v1/completions and /apply-template. Each request
// is validated by the OpenAI schema layer, rendered and tokenized here, checked against the served
// context, and handed to the engine; the engine's events are turned into SSE chunks or one body on
// the engine's callback thread (the connection thread has returned by then).
#include <chrono>
#include <ctime>
#include <deque>
#include <mutex>

#include "server/app/app.h"
#include "server/http/sse.h"
#include "server/openai/json_input.h"
#include "server/openai/logprobs.h"
#include "server/openai/render.h"
#include "server/openai/request.h"
#include "server/openai/response.h"
#include "server/openai/tool_call_parser.h"

namespace splash::app {

namespace {

using Clock = std::chrono::steady_clock;

void respond_api_error(http::ResponseWriter& w, const openai::ApiError& e) {
  respond_error(w, e.status, e.code, e.message);
}

openai::GenerationStats stats_of(const EngineEvent& e) {
  openai::GenerationStats s;
  s.prompt_tokens = e.prompt_tokens;
  s.cached_tokens = e.cached_tokens;
  s.completion_tokens = e.completion_tokens;
  s.prompt_ms = e.prompt_ms;
  s.predicted_ms = e.predicted_ms;
  return s;
}

// One request in flight: turns engine events into the response. Events that arrive before the
// handler has started the stream (the engine may call back before submit() returns) are held and
// replayed, so the handler never holds a lock across submit().
class Job : public KeepAliveTarget {
 public:
  Job(std::shared_ptr<http::ResponseWriter> w, bool stream, openai::ResponseMeta meta)
      : w_(std::move(w)), stream_(stream), meta_(std::move(meta)) {}

  std::optional<openai::ChatStream> chat_stream;
  std::optional<openai::CompletionStream> text_stream;
  std::optional<openai::ChatOutput> chat_out;  // non-stream chat
  bool chat = false;
  // `logprobs` asked for: token texts come from `piece`; completions accumulate in text_logprobs.
  openai::TokenPiece piece;
  std::optional<openai::CompletionLogprobs> text_logprobs;
  // Completions `echo`: the prompt's text and ids go out before the completion (with their logprobs
  // once the engine has scored the prompt, when logprobs were asked for).
  bool echo = false;
  std::string echo_text;
  std::vector<int32_t> echo_ids;

  void on_event(const EngineEvent& e) {
    std::lock_guard lock(mu_);
    if (!started_) {
      held_.push_back(e);
      return;
    }
    apply(e);
  }

  // An empty delta (empty text for completions) after 2 s without output.
  void keepalive_if_idle(Clock::time_point now) override {
    std::lock_guard lock(mu_);
    if (!stream_ || !started_ || done_ || now - last_write_ < std::chrono::seconds(2)) return;
    send(chat ? chat_stream->keepalive() : text_stream->keepalive());
  }

  // After a successful submit(): opens the stream (when streaming) and replays held events.
  void start() {
    std::lock_guard lock(mu_);
    if (stream_) {
      w_->start_stream(200, http::sse_headers());
      if (chat) send(chat_stream->start());
      last_write_ = Clock::now();
    }
    started_ = true;
    // Without logprobs (or with a one-token prompt, which has nothing to score) the echo needs nothing
    // from the engine; otherwise it waits for the prompt_logprobs event, which comes before any text.
    if (echo && (!text_logprobs || echo_ids.size() <= 1)) emit_echo({});
    for (const EngineEvent& e : held_) apply(e);
    held_.clear();
  }

 private:
  void send(const std::string& chunk) {
    w_->write(http::sse_event(chunk));
    last_write_ = Clock::now();
  }

  void emit_echo(std::span<const TokenLogprob> scored) {
    if (echo_sent_) return;
    echo_sent_ = true;
    nlohmann::ordered_json lp = nullptr;
    if (text_logprobs) {
      if (!echo_ids.empty()) text_logprobs->add_unscored(echo_ids.front());
      text_logprobs->add(scored);
      if (stream_) lp = text_logprobs->take();
    }
    if (!stream_) {
      text_ = echo_text + text_;
    } else if (auto c = text_stream->text(echo_text, lp)) {
      send(*c);
    }
  }

  void apply(const EngineEvent& e) {
    if (done_) return;
    switch (e.kind) {
      case EngineEvent::kProgress: {
        if (!stream_) return;
        openai::PromptProgress p{e.total, e.cache, e.processed, e.time_ms};
        auto c = chat ? chat_stream->progress(p) : text_stream->progress(p);
        if (c) send(*c);
        return;
      }
      case EngineEvent::kText: {
        if (!e.prompt_logprobs.empty()) {
          if (echo) emit_echo(e.prompt_logprobs);
          return;
        }
        const int64_t n = static_cast<int64_t>(e.tokens.size());
        nlohmann::ordered_json lp = nullptr;
        if (piece && chat) lp = openai::chat_logprob_entries(e.logprobs, piece);
        if (text_logprobs) text_logprobs->add(e.logprobs);
        if (stream_ && chat) {
          for (const std::string& c : chat_stream->text(e.text, n, lp)) send(c);
        } else if (stream_) {
          if (text_logprobs && !text_logprobs->empty()) lp = text_logprobs->take();
          if (auto c = text_stream->text(e.text, lp)) send(*c);
        } else if (chat) {
          chat_out->feed(e.text, n);
          if (lp.is_array()) chat_logprobs_.insert(chat_logprobs_.end(), lp.begin(), lp.end());
        } else {
          text_ += e.text;
        }
        return;
      }
      case EngineEvent::kDone:
        done_ = true;
        finish(e);
        return;
    }
  }

  void finish(const EngineEvent& e) {
    const auto end = static_cast<openai::GenerationEnd>(e.finish);
    const openai::GenerationStats stats = stats_of(e);
    if (auto err = openai::generation_error(end, e.error)) {
      if (stream_) {
        send(openai::error_chunk(*err));
        w_->write(http::sse_done());
        w_->end();
      } else {
        respond_api_error(*w_, *err);
      }
      return;
    }
    if (stream_) {
      for (const std::string& c : chat ? chat_stream->finish(end, stats) : text_stream->finish(end, stats)) send(c);
      w_->write(http::sse_done());
      w_->end();
      return;
    }
    std::string body;
    if (chat) {
      chat_out->finish();
      nlohmann::ordered_json lp = piece ? openai::chat_logprobs(std::move(chat_logprobs_)) : nlohmann::ordered_json();
      body = openai::chat_completion_body(meta_, *chat_out, end, stats, lp);
    } else {
      body = openai::text_completion_body(meta_, text_, end, stats,
                                          text_logprobs ? text_logprobs->take() : nlohmann::ordered_json());
    }
    w_->respond(200, {{"Content-Type", "application/json"}}, std::move(body));
  }

  std::mutex mu_;
  std::shared_ptr<http::ResponseWriter> w_;
  bool stream_;
  openai::ResponseMeta meta_;
  bool started_ = false, done_ = false;
  Clock::time_point last_write_;
  std::deque<EngineEvent> held_;
  std::string text_;
  bool echo_sent_ = false;
  nlohmann::ordered_json chat_logprobs_ = nlohmann::ordered_json::array();  // non-stream chat entries
};

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

// Token texts for logprobs; the tokenizer outlives every request.
openai::TokenPiece token_piece(const Tokenizer& tok) {
  return [&tok](int32_t id) { return tok.token_to_piece(id); };
}

}  // namespace

// Shared tail of both routes: context check, submit, cancel on disconnect.
namespace {

struct Prepared {
  std::vector<int32_t> prompt;
  bool prompt_fills_context = false;  // tokenizing stopped at the context: the prompt has at least that many
  std::optional<int64_t> max_tokens;  // nullopt: the rest of the context
  bool prompt_logprobs = false;       // completions echo: the engine scores the prompt
  const openai::CommonFields* common = nullptr;
};

// Tokenizes at most what the context can hold: a prompt of `context` tokens or more is refused, so
// tokenizing stops there, and a huge prompt costs what the context costs, not what the text costs.
// Special-token text is parsed (as llama.cpp does).
void encode_prompt(const Tokenizer& tok, std::string_view text, bool add_special, int64_t context, Prepared& p) {
  const size_t limit = static_cast<size_t>(std::max<int64_t>(context - 1, 0));
  if (auto ids = tok.encode_bounded(text, add_special, /*parse_special=*/true, limit)) {
    p.prompt = std::move(*ids);
  } else {
    p.prompt_fills_context = true;
  }
}

void submit_job(Engine* engine, int64_t context, const std::optional<std::chrono::milliseconds>& server_timeout,
                Clock::time_point arrival, Prepared p, std::shared_ptr<Job> job,
                const std::shared_ptr<http::ResponseWriter>& w) {
  const int64_t n = static_cast<int64_t>(p.prompt.size());
  if (p.prompt_fills_context || n >= context)
    return respond_error(*w, 400, "context_length_exceeded",
                         str_cat("the prompt is ", p.prompt_fills_context ? "at least " : "", std::max(n, context),
                                 " tokens but this server's context is ", context,
                                 " tokens (the model's window, memory and --max-context allow at most ", context,
                                 "); shorten the prompt"));
  if (n == 0) return respond_error(*w, 400, "invalid_request_error", "the prompt is empty after tokenization");
  int64_t max_tokens = context - n;
  if (p.max_tokens) {
    if (*p.max_tokens > context - n)
      return respond_error(*w, 400, "context_length_exceeded",
                           str_cat("the prompt (", n, " tokens) plus max_tokens (", *p.max_tokens,
                                   ") exceeds this server's context of ", context, " tokens; at most ", context - n,
                                   " tokens can be generated"));
    max_tokens = *p.max_tokens;
  }
  if (!engine) return respond_error(*w, 503, "runtime_unavailable", "the engine is not running");

  EngineRequest req;
  req.prompt = std::move(p.prompt);
  req.max_tokens = max_tokens;
  req.sampling = openai::to_sampling_params(p.common->sampling);
  req.stop = p.common->stop;
  req.ignore_eos = p.common->ignore_eos;
  req.cache_prompt = p.common->cache_prompt;
  req.want_progress = p.common->stream && p.common->return_progress;
  req.logprobs = p.common->logprobs.value_or(-1);
  req.prompt_logprobs = p.prompt_logprobs;
  std::optional<Clock::time_point> deadline;
  if (server_timeout) deadline = arrival + *server_timeout;
  if (p.common->timeout_s) {  // under kNoDeadlineTimeout: the parser drops longer ones
    auto mine = arrival + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*p.common->timeout_s));
    deadline = deadline ? std::min(*deadline, mine) : mine;
  }
  if (deadline) req.deadline = *deadline;

  auto id = engine->submit(std::move(req), [job](const EngineEvent& e) { job->on_event(e); });
  if (!id.ok()) {
    const std::string& msg = id.error_message();
    switch (submit_error_kind(msg)) {
      case SubmitError::kQueueFull:
        return respond_error(*w, 503, "runtime_busy", str_cat(msg, "; retry shortly"));
      case SubmitError::kCapacityExhausted:
        return respond_error(*w, 400, "capacity_exhausted",
                             str_cat(msg, " (raise --max-memory or lower --max-context)"));
      case SubmitError::kShuttingDown:
        return respond_error(*w, 503, "server_shutdown", msg);
      case SubmitError::kInvalid:
        return respond_error(*w, 400, "invalid_request_error", msg);
    }
  }
  const uint64_t rid = *id;
  w->on_disconnect([engine, rid] { engine->cancel(rid); });
  job->start();
}

}  // namespace

void App::handle_chat(const http::Request& req, const Writer& w) {
  const auto arrival = Clock::now();
  auto parsed = openai::parse_chat_request(std::string_view(req.body));
  if (!parsed.ok()) return respond_api_error(*w, parsed.error());
  openai::ChatRequest& r = *parsed;
  if (r.common.model && !known_model(*r.common.model))
    return respond_error(*w, 404, "model_not_found",
                         str_cat("model '", *r.common.model, "' is not served here (serving '", config_.model_id, "')"));
  if (!deps_.chat_template)
    return respond_error(*w, 400, "invalid_request_error",
                         "this model has no chat template Splash can render; use /v1/completions");
  openai::TemplateExtras extras;
  const Tokenizer& tok = *deps_.tokenizer;
  if (tok.bos_id() >= 0) extras.bos_token = tok.token_text(tok.bos_id());
  if (tok.eos_id() >= 0) extras.eos_token = tok.token_text(tok.eos_id());
  if (!config_.options.default_reasoning_effort.empty())
    extras.default_reasoning_effort = config_.options.default_reasoning_effort;
  auto prompt = openai::render_chat(*deps_.chat_template, r, extras);
  if (!prompt.ok())
    return respond_error(*w, 400, "invalid_request_error", str_cat("chat template: ", prompt.error_message()));

  openai::IdGenerator ids;
  openai::ResponseMeta meta{ids.next("chatcmpl-"), unix_now(), config_.model_id};
  auto job = std::make_shared<Job>(w, r.common.stream, meta);
  job->chat = true;
  openai::ChatOutputOptions out = openai::ChatOutputOptions::for_request(r, *prompt);
  if (r.common.stream)
    job->chat_stream.emplace(meta, out, openai::StreamOptions{r.common.include_usage, r.common.return_progress});
  else
    job->chat_out.emplace(out);
  if (r.common.logprobs) job->piece = token_piece(tok);

  if (r.common.stream) watch_stream(job);
  Prepared p;
  encode_prompt(tok, *prompt, /*add_special=*/false, deps_.plan->maximum_context_tokens, p);
  p.max_tokens = r.max_tokens;
  p.common = &r.common;
  submit_job(deps_.engine, deps_.plan->maximum_context_tokens, config_.options.request_timeout, arrival,
             std::move(p), job, w);
}

void App::handle_completion(const http::Request& req, const Writer& w) {
  const auto arrival = Clock::now();
  auto parsed = openai::parse_completion_request(std::string_view(req.body));
  if (!parsed.ok()) return respond_api_error(*w, parsed.error());
  openai::CompletionRequest& r = *parsed;
  if (r.common.model && !known_model(*r.common.model))
    return respond_error(*w, 404, "model_not_found",
                         str_cat("model '", *r.common.model, "' is not served here (serving '", config_.model_id, "')"));
  openai::IdGenerator ids;
  openai::ResponseMeta meta{ids.next("cmpl-"), unix_now(), config_.model_id};
  auto job = std::make_shared<Job>(w, r.common.stream, meta);
  if (r.common.stream) job->text_stream.emplace(meta, openai::StreamOptions{r.common.include_usage, r.common.return_progress});
  if (r.common.logprobs) {
    job->piece = token_piece(*deps_.tokenizer);
    job->text_logprobs.emplace(job->piece);
  }

  if (r.common.stream) watch_stream(job);
  Prepared p;
  if (const auto* text = std::get_if<std::string>(&r.prompt)) {
    // As llama.cpp does: the tokenizer's own BOS rule applies, special-token text is parsed.
    encode_prompt(*deps_.tokenizer, *text, /*add_special=*/true, deps_.plan->maximum_context_tokens, p);
  } else {
    p.prompt = std::get<std::vector<int32_t>>(r.prompt);
  }
  if (r.echo) {
    job->echo = true;
    job->echo_ids = p.prompt;
    const auto* text = std::get_if<std::string>(&r.prompt);
    job->echo_text = text ? *text : deps_.tokenizer->decode(p.prompt);
    // max_tokens 0 generates nothing: the engine only scores the prompt (as it must for its logprobs).
    p.prompt_logprobs = r.common.logprobs.has_value() || r.max_tokens == 0;
  }
  p.max_tokens = r.max_tokens;
  p.common = &r.common;
  submit_job(deps_.engine, deps_.plan->maximum_context_tokens, config_.options.request_timeout, arrival,
             std::move(p), job, w);
}

void App::handle_apply_template(const http::Request& req, const Writer& w) {
  auto body = openai::parse_json(req.body);
  if (!body.ok()) return respond_api_error(*w, body.error());
  bool add_generation_prompt = true;
  if (body->is_object()) {
    if (auto it = body->find("add_generation_prompt"); it != body->end() && !it->is_null()) {
      if (!it->is_boolean())
        return respond_error(*w, 400, "invalid_request_error", "'add_generation_prompt' must be a boolean");
      add_generation_prompt = it->get<bool>();
    }
  }
  auto parsed = openai::parse_chat_request(*body);
  if (!parsed.ok()) return respond_api_error(*w, parsed.error());
  if (!deps_.chat_template)
    return respond_error(*w, 400, "invalid_request_error", "this model has no chat template Splash can render");
  openai::TemplateExtras extras;
  const Tokenizer& tok = *deps_.tokenizer;
  if (tok.bos_id() >= 0) extras.bos_token = tok.token_text(tok.bos_id());
  if (tok.eos_id() >= 0) extras.eos_token = tok.token_text(tok.eos_id());
  extras.add_generation_prompt = add_generation_prompt;
  if (!config_.options.default_reasoning_effort.empty())
    extras.default_reasoning_effort = config_.options.default_reasoning_effort;
  auto prompt = openai::render_chat(*deps_.chat_template, *parsed, extras);
  if (!prompt.ok())
    return respond_error(*w, 400, "invalid_request_error", str_cat("chat template: ", prompt.error_message()));
  respond_json(*w, 200, {{"prompt", *prompt}});
}

}  // namespace splash::app
