#include "server/openai/wire.h"

#include <span>
#include <utility>

#include "server/http/sse.h"

namespace splash::openai {

namespace {

void respond_error(gen::Sink& out, const ApiError& e) {
  http::SimpleResponse r = http::error_response(e.status, e.code, e.message);
  out.respond(r.status, std::move(r.headers), std::move(r.body));
}

// What both routes share: errors, and the stream's framing.
class OpenAiWire : public gen::WireWriter {
 public:
  explicit OpenAiWire(bool stream) : stream_(stream) {}
  void refuse(const ApiError& error, gen::Sink& out) override { respond_error(out, error); }
  void fail(const ApiError& error, gen::Sink& out) override {
    if (!stream_) return respond_error(out, error);
    out.write(http::sse_event(error_chunk(error)));
    end_stream(out);
  }

 protected:
  void send(gen::Sink& out, const std::string& chunk) { out.write(http::sse_event(chunk)); }
  void end_stream(gen::Sink& out) {
    out.write(http::sse_done());
    out.end();
  }
  bool stream_;
};

class ChatWire : public OpenAiWire {
 public:
  ChatWire(ResponseMeta meta, ChatOutputOptions output, StreamOptions options, bool stream, TokenPiece piece)
      : OpenAiWire(stream),
        meta_(meta),
        chunks_(std::move(meta), std::move(output), options),
        piece_(std::move(piece)) {}

  void open(gen::Sink& out) override {
    out.start_stream(http::sse_headers());
    send(out, chunks_.start());
  }
  void progress(const PromptProgress& p, gen::Sink& out) override {
    if (auto c = chunks_.progress(p)) send(out, *c);
  }
  void events(std::span<const gen::Event> events, gen::Sink& out) override {
    nlohmann::ordered_json lp = nullptr;
    if (piece_) {
      lp = nlohmann::ordered_json::array();
      for (const gen::Event& e : events) append_entries(lp, e.logprobs);
    }
    if (!stream_) {  // the body is built from Finish::output and the entries collected here
      if (piece_) body_logprobs_.insert(body_logprobs_.end(), lp.begin(), lp.end());
      return;
    }
    for (const std::string& c : chunks_.chunks(gen::to_parts(events), lp)) send(out, c);
  }
  void keepalive(gen::Sink& out) override { send(out, chunks_.keepalive()); }
  void finish(const gen::Finish& f, gen::Sink& out) override {
    nlohmann::ordered_json lp = nullptr;
    if (piece_) {
      lp = stream_ ? nlohmann::ordered_json::array() : std::exchange(body_logprobs_, nlohmann::ordered_json::array());
      append_entries(lp, f.logprobs);
    }
    if (!stream_) {
      out.respond(200, {{"Content-Type", "application/json"}},
                  chat_completion_body(meta_, *f.output, f.end, f.stats, piece_ ? chat_logprobs(std::move(lp)) : lp));
      return;
    }
    for (const std::string& c : chunks_.end_chunks(f.end, f.stats, f.made_tool_calls, f.reasoning_tokens, lp))
      send(out, c);
    end_stream(out);
  }

 private:
  void append_entries(nlohmann::ordered_json& list, std::span<const TokenLogprob> tokens) const {
    if (tokens.empty()) return;
    for (nlohmann::ordered_json& e : chat_logprob_entries(tokens, piece_)) list.push_back(std::move(e));
  }

  ResponseMeta meta_;
  ChatStream chunks_;
  TokenPiece piece_;                                                        // empty: no logprobs
  nlohmann::ordered_json body_logprobs_ = nlohmann::ordered_json::array();  // non-stream: every entry
};

class CompletionWire : public OpenAiWire {
 public:
  CompletionWire(ResponseMeta meta, StreamOptions options, bool stream, TokenPiece piece,
                 std::optional<CompletionEcho> echo)
      : OpenAiWire(stream), meta_(meta), chunks_(std::move(meta), options), echo_(std::move(echo)) {
    if (piece) logprobs_.emplace(std::move(piece));
  }

  void open(gen::Sink& out) override {
    out.start_stream(http::sse_headers());
    echo_unscored(out);
  }
  void progress(const PromptProgress& p, gen::Sink& out) override {
    if (auto c = chunks_.progress(p)) send(out, *c);
  }
  void prompt_scored(std::span<const TokenLogprob> scored, gen::Sink& out) override { emit_echo(scored, out); }
  void events(std::span<const gen::Event> events, gen::Sink& out) override {
    echo_unscored(out);
    for (const gen::Event& e : events) {
      nlohmann::ordered_json lp = nullptr;
      if (logprobs_) {
        logprobs_->add(e.logprobs);
        if (stream_ && !logprobs_->empty()) lp = logprobs_->take();
      }
      if (!stream_) continue;  // the body is built from Finish::text and logprobs_
      if (auto c = chunks_.text(e.text, lp)) send(out, *c);
    }
  }
  void keepalive(gen::Sink& out) override { send(out, chunks_.keepalive()); }
  void finish(const gen::Finish& f, gen::Sink& out) override {
    echo_unscored(out);
    if (logprobs_) logprobs_->add(f.logprobs);  // plain output lists every token on an event: none left
    if (!stream_) {
      std::string text = echo_ ? echo_->text + std::string(f.text) : std::string(f.text);
      out.respond(200, {{"Content-Type", "application/json"}},
                  text_completion_body(meta_, text, f.end, f.stats, logprobs_ ? logprobs_->take() : nullptr));
      return;
    }
    for (const std::string& c : chunks_.finish(f.end, f.stats)) send(out, c);
    end_stream(out);
  }

 private:
  // The echo needs nothing from the engine without logprobs, or with a one-token prompt (nothing to
  // score); otherwise prompt_scored() sends it, before any output.
  void echo_unscored(gen::Sink& out) {
    if (echo_ && (!logprobs_ || echo_->ids.size() <= 1)) emit_echo({}, out);
  }
  void emit_echo(std::span<const TokenLogprob> scored, gen::Sink& out) {
    if (!echo_ || echo_sent_) return;
    echo_sent_ = true;
    nlohmann::ordered_json lp = nullptr;
    if (logprobs_) {
      if (!echo_->ids.empty()) logprobs_->add_unscored(echo_->ids.front());
      logprobs_->add(scored);
      if (stream_) lp = logprobs_->take();
    }
    if (!stream_) return;  // finish() puts the text in front
    if (auto c = chunks_.text(echo_->text, lp)) send(out, *c);
  }

  ResponseMeta meta_;
  CompletionStream chunks_;
  std::optional<CompletionLogprobs> logprobs_;  // the request asked for logprobs
  std::optional<CompletionEcho> echo_;
  bool echo_sent_ = false;
};

}  // namespace

std::unique_ptr<gen::WireWriter> chat_wire(ResponseMeta meta, ChatOutputOptions output, StreamOptions options,
                                           bool stream, TokenPiece piece) {
  return std::make_unique<ChatWire>(std::move(meta), std::move(output), options, stream, std::move(piece));
}

std::unique_ptr<gen::WireWriter> completion_wire(ResponseMeta meta, StreamOptions options, bool stream,
                                                 TokenPiece piece, std::optional<CompletionEcho> echo) {
  return std::make_unique<CompletionWire>(std::move(meta), options, stream, std::move(piece), std::move(echo));
}

}  // namespace splash::openai
