#include "server/gen/generation.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <utility>

#include "core/result.h"
#include "server/app/engine_host.h"

namespace splash::gen {

void Sink::start_stream(std::vector<http::Header> headers) {
  w_->start_stream(200, std::move(headers));
  last_write_ = Clock::now();
}

void Sink::write(std::string_view data) {
  w_->write(data);
  last_write_ = Clock::now();
}

namespace {

openai::GenerationStats stats_of(const EngineEvent& e) {
  openai::GenerationStats s;
  s.prompt_tokens = e.prompt_tokens;
  s.cached_tokens = e.cached_tokens;
  s.completion_tokens = e.completion_tokens;
  s.prompt_ms = e.prompt_ms;
  s.predicted_ms = e.predicted_ms;
  return s;
}

// ChatOutput parts -> events. `open_call` is the call whose arguments are still arriving (-1: none);
// it is closed before anything that is not one of its argument deltas.
void append_events(std::vector<openai::OutputPart> parts, int& open_call, std::vector<Event>& out) {
  auto close_open = [&] {
    if (open_call < 0) return;
    Event done;
    done.kind = Event::Kind::kToolCallDone;
    done.index = open_call;
    out.push_back(std::move(done));
    open_call = -1;
  };
  for (openai::OutputPart& p : parts) {
    Event e;
    switch (p.kind) {
      case openai::OutputPart::Kind::kReasoning:
      case openai::OutputPart::Kind::kContent:
        close_open();
        e.kind = p.kind == openai::OutputPart::Kind::kReasoning ? Event::Kind::kReasoning : Event::Kind::kText;
        e.text = std::move(p.text);
        out.push_back(std::move(e));
        break;
      case openai::OutputPart::Kind::kToolCall:
        if (!p.call.id.empty()) {
          close_open();
          Event start;
          start.kind = Event::Kind::kToolCallStart;
          start.index = p.call.index;
          start.id = std::move(p.call.id);
          start.name = std::move(p.call.name);
          out.push_back(std::move(start));
          open_call = p.call.index;
        }
        if (!p.call.arguments.empty()) {
          e.kind = Event::Kind::kToolCallArguments;
          e.index = p.call.index;
          e.text = std::move(p.call.arguments);
          out.push_back(std::move(e));
        }
        break;
    }
  }
}

// One request in flight. Events that arrive before start() (the engine may call back before submit()
// returns) are held and replayed, so the handler never holds the lock across submit().
class GenerationJob : public KeepAliveTarget {
 public:
  double load_wait_ms = 0;  // waited for the weights to load again (--idle-release); set before submit

  GenerationJob(std::unique_ptr<WireWriter> writer, std::shared_ptr<http::ResponseWriter> w, const GenerationRequest& r)
      : writer_(std::move(writer)), sink_(std::move(w)), stream_(r.stream), want_progress_(r.want_progress) {
    if (r.output.split) chat_.emplace(r.output.chat);
  }

  void refuse(const openai::ApiError& error) {
    std::lock_guard lock(mu_);
    done_ = true;
    writer_->refuse(error, sink_);
  }

  void on_event(const EngineEvent& e) {
    std::lock_guard lock(mu_);
    if (!started_) {
      held_.push_back(e);
      return;
    }
    apply(e);
  }

  void keepalive_if_idle(Clock::time_point now) override {
    std::lock_guard lock(mu_);
    if (!stream_ || !started_ || done_ || now - sink_.last_write() < std::chrono::seconds(2)) return;
    writer_->keepalive(sink_);
  }

  // After a successful submit(): opens the stream, replays held events.
  void start(bool clamped) {
    std::lock_guard lock(mu_);
    clamped_ = clamped;
    if (stream_) writer_->open(sink_);
    started_ = true;
    for (const EngineEvent& e : held_) apply(e);
    held_.clear();
  }

 private:
  void feed(std::string_view piece, int64_t n_tokens, std::span<const TokenLogprob> logprobs = {}) {
    logprobs_.insert(logprobs_.end(), logprobs.begin(), logprobs.end());
    std::vector<Event> events;
    if (chat_) {
      append_events(chat_->feed(piece, n_tokens), open_call_, events);
      close_if_complete(events);
    } else if (!piece.empty() || !logprobs_.empty()) {
      text_ += piece;
      Event e;
      e.kind = Event::Kind::kText;
      e.text = std::string(piece);
      events.push_back(std::move(e));
    }
    if (events.empty()) return;
    events.front().logprobs = std::exchange(logprobs_, {});
    writer_->events(events, sink_);
  }

  // The parser saw `</tool_call>`: the call is done now, not when the next part arrives.
  void close_if_complete(std::vector<Event>& events) {
    if (open_call_ < 0 || !chat_->tool_calls()[static_cast<size_t>(open_call_)].complete) return;
    Event done;
    done.kind = Event::Kind::kToolCallDone;
    done.index = open_call_;
    events.push_back(std::move(done));
    open_call_ = -1;
  }

  void apply(const EngineEvent& e) {
    if (done_) return;
    switch (e.kind) {
      case EngineEvent::kProgress:
        if (stream_ && want_progress_) writer_->progress(openai::PromptProgress{e.total, e.cache, e.processed, e.time_ms}, sink_);
        return;
      case EngineEvent::kText:
        if (!e.prompt_logprobs.empty()) return writer_->prompt_scored(e.prompt_logprobs, sink_);
        feed(e.text, static_cast<int64_t>(e.tokens.size()), e.logprobs);
        return;
      case EngineEvent::kDone:
        done_ = true;
        finish(e);
        return;
    }
  }

  void finish(const EngineEvent& e) {
    FinishReason end = e.finish;
    if (auto err = openai::generation_error(end, e.error)) return writer_->fail(*err, sink_);
    // max_tokens was lowered to the rest of the context: reaching it is reaching the context.
    if (clamped_ && end == FinishReason::kLength) end = FinishReason::kContext;
    std::vector<Event> events;
    if (chat_) append_events(chat_->finish(), open_call_, events);
    append_events({}, open_call_, events);  // closes a call cut by the end of output
    if (!events.empty()) {
      events.front().logprobs = std::exchange(logprobs_, {});
      writer_->events(events, sink_);
    }
    Finish f;
    f.end = end;
    if (e.stop_index >= 0) f.stop_index = e.stop_index;
    f.made_tool_calls = chat_ && !chat_->tool_calls().empty();
    f.reasoning_tokens = chat_ ? chat_->reasoning_tokens() : 0;
    f.stats = stats_of(e);
    f.stats.load_ms = load_wait_ms;
    f.output = chat_ ? &*chat_ : nullptr;
    f.text = text_;
    f.logprobs = std::exchange(logprobs_, {});
    writer_->finish(f, sink_);
  }

  std::mutex mu_;
  std::unique_ptr<WireWriter> writer_;
  Sink sink_;
  bool stream_, want_progress_;
  std::optional<openai::ChatOutput> chat_;
  std::string text_;  // plain output
  std::vector<TokenLogprob> logprobs_;  // generated tokens' logprobs no event has carried yet
  int open_call_ = -1;
  bool started_ = false, done_ = false, clamped_ = false;
  std::deque<EngineEvent> held_;
};

}  // namespace

void encode_prompt(const Tokenizer& tok, std::string_view text, bool add_special, int64_t context,
                   GenerationRequest& request) {
  const size_t limit = static_cast<size_t>(std::max<int64_t>(context - 1, 0));
  if (auto ids = tok.encode_bounded(text, add_special, /*parse_special=*/true, limit)) {
    request.prompt = std::move(*ids);
  } else {
    request.prompt_fills_context = true;
  }
}

void generate(const GenerationContext& ctx, GenerationRequest r, std::unique_ptr<WireWriter> writer,
              std::shared_ptr<http::ResponseWriter> http_writer) {
  auto job = std::make_shared<GenerationJob>(std::move(writer), http_writer, r);
  if (r.stream && ctx.watch) ctx.watch(job);
  const int64_t context = ctx.context;
  const int64_t n = static_cast<int64_t>(r.prompt.size());
  if (r.prompt_fills_context || n >= context)
    return job->refuse(openai::api_error(
        400, "context_length_exceeded",
        str_cat("the prompt is ", r.prompt_fills_context ? "at least " : "", std::max(n, context),
                " tokens but this server's context is ", context, " tokens (the model's window, memory and --max-context allow at most ",
                context, "); shorten the prompt")));
  if (n == 0) return job->refuse(openai::invalid_request("the prompt is empty after tokenization"));
  int64_t max_tokens = context - n;
  bool clamped = false;
  if (r.max_tokens) {
    if (*r.max_tokens > context - n && !r.clamp_max_tokens)
      return job->refuse(openai::api_error(
          400, "context_length_exceeded",
          str_cat("the prompt (", n, " tokens) plus max_tokens (", *r.max_tokens, ") exceeds this server's context of ",
                  context, " tokens; at most ", context - n, " tokens can be generated")));
    clamped = *r.max_tokens > context - n;
    max_tokens = std::min(*r.max_tokens, context - n);
  }
  if (!ctx.engines) return job->refuse(openai::api_error(503, "runtime_unavailable", "the engine is not running"));
  // Loads the weights again when --idle-release let them go; the request holds the lease to its end.
  auto lease = ctx.engines->acquire();
  if (!lease.ok()) return job->refuse(openai::api_error(lease.error()));
  job->load_wait_ms = (*lease)->load_wait_ms();

  EngineRequest req;
  req.prompt = std::move(r.prompt);
  req.max_tokens = max_tokens;
  req.sampling = r.sampling;
  req.stop = std::move(r.stop);
  req.ignore_eos = r.ignore_eos;
  req.cache_prompt = r.cache_prompt;
  req.want_progress = r.stream && r.want_progress;
  req.logprobs = r.logprobs;
  req.prompt_logprobs = r.prompt_logprobs;
  req.constraint = std::move(r.constraint);
  std::optional<Clock::time_point> deadline;
  if (ctx.server_timeout) deadline = r.arrival + *ctx.server_timeout;
  if (r.timeout_s) {  // under kNoDeadlineTimeout: the parsers drop longer ones
    auto mine = r.arrival + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(*r.timeout_s));
    deadline = deadline ? std::min(*deadline, mine) : mine;
  }
  if (deadline) req.deadline = *deadline;

  Engine* engine = &(*lease)->engine();
  auto id = engine->submit(std::move(req), [job, held = *lease](const EngineEvent& e) { job->on_event(e); });
  if (!id.ok()) return job->refuse(openai::api_error(id.error()));
  const uint64_t rid = *id;
  // Weak: a finished request's writer must not keep the weights loaded.
  http_writer->on_disconnect([weak = std::weak_ptr<app::EngineHost::Lease>(*lease), rid] {
    if (auto l = weak.lock()) l->engine().cancel(rid);
  });
  job->start(clamped);
}

// --- building blocks for writers --------------------------------------------------------------------

std::vector<openai::OutputPart> to_parts(std::span<const Event> events) {
  std::vector<openai::OutputPart> parts;
  for (const Event& e : events) {
    openai::OutputPart p;
    switch (e.kind) {
      case Event::Kind::kReasoning:
        p.kind = openai::OutputPart::Kind::kReasoning;
        p.text = e.text;
        break;
      case Event::Kind::kText:
        p.kind = openai::OutputPart::Kind::kContent;
        p.text = e.text;
        break;
      case Event::Kind::kToolCallStart:
        p.kind = openai::OutputPart::Kind::kToolCall;
        p.call.index = e.index;
        p.call.id = e.id;
        p.call.name = e.name;
        break;
      case Event::Kind::kToolCallArguments:
        p.kind = openai::OutputPart::Kind::kToolCall;
        p.call.index = e.index;
        p.call.arguments = e.text;
        break;
      case Event::Kind::kToolCallDone:
        continue;
    }
    parts.push_back(std::move(p));
  }
  return parts;
}

void BlockList::add(const Event& e) {
  auto call_block = [&](int index) -> Block* {
    for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it)
      if (it->kind == Block::Kind::kToolCall && it->index == index) return &*it;
    return nullptr;
  };
  switch (e.kind) {
    case Event::Kind::kReasoning:
    case Event::Kind::kText: {
      const Block::Kind k = e.kind == Event::Kind::kReasoning ? Block::Kind::kReasoning : Block::Kind::kText;
      if (blocks_.empty() || blocks_.back().kind != k) {
        blocks_.emplace_back();
        blocks_.back().kind = k;
      }
      blocks_.back().text += e.text;
      return;
    }
    case Event::Kind::kToolCallStart:
      blocks_.emplace_back();
      blocks_.back().kind = Block::Kind::kToolCall;
      blocks_.back().index = e.index;
      blocks_.back().id = e.id;
      blocks_.back().name = e.name;
      return;
    case Event::Kind::kToolCallArguments:
      if (Block* b = call_block(e.index)) b->arguments += e.text;
      return;
    case Event::Kind::kToolCallDone:
      if (Block* b = call_block(e.index)) b->done = true;
      return;
  }
}

}  // namespace splash::gen
