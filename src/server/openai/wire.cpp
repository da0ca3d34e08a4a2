#include "server/openai/wire.h"

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
  ChatWire(ResponseMeta meta, ChatOutputOptions output, StreamOptions options, bool stream)
      : OpenAiWire(stream), meta_(meta), chunks_(std::move(meta), std::move(output), options) {}

  void open(gen::Sink& out) override {
    out.start_stream(http::sse_headers());
    send(out, chunks_.start());
  }
  void progress(const PromptProgress& p, gen::Sink& out) override {
    if (auto c = chunks_.progress(p)) send(out, *c);
  }
  void events(std::span<const gen::Event> events, gen::Sink& out) override {
    if (!stream_) return;  // the body is built from Finish::output
    for (const std::string& c : chunks_.chunks(gen::to_parts(events))) send(out, c);
  }
  void keepalive(gen::Sink& out) override { send(out, chunks_.keepalive()); }
  void finish(const gen::Finish& f, gen::Sink& out) override {
    if (!stream_) {
      out.respond(200, {{"Content-Type", "application/json"}}, chat_completion_body(meta_, *f.output, f.end, f.stats));
      return;
    }
    for (const std::string& c : chunks_.end_chunks(f.end, f.stats, f.made_tool_calls, f.reasoning_tokens)) send(out, c);
    end_stream(out);
  }

 private:
  ResponseMeta meta_;
  ChatStream chunks_;
};

class CompletionWire : public OpenAiWire {
 public:
  CompletionWire(ResponseMeta meta, StreamOptions options, bool stream)
      : OpenAiWire(stream), meta_(meta), chunks_(std::move(meta), options) {}

  void open(gen::Sink& out) override { out.start_stream(http::sse_headers()); }
  void progress(const PromptProgress& p, gen::Sink& out) override {
    if (auto c = chunks_.progress(p)) send(out, *c);
  }
  void events(std::span<const gen::Event> events, gen::Sink& out) override {
    if (!stream_) return;  // the body is built from Finish::text
    for (const gen::Event& e : events) {
      if (auto c = chunks_.text(e.text)) send(out, *c);
    }
  }
  void keepalive(gen::Sink& out) override { send(out, chunks_.keepalive()); }
  void finish(const gen::Finish& f, gen::Sink& out) override {
    if (!stream_) {
      out.respond(200, {{"Content-Type", "application/json"}}, text_completion_body(meta_, f.text, f.end, f.stats));
      return;
    }
    for (const std::string& c : chunks_.finish(f.end, f.stats)) send(out, c);
    end_stream(out);
  }

 private:
  ResponseMeta meta_;
  CompletionStream chunks_;
};

}  // namespace

std::unique_ptr<gen::WireWriter> chat_wire(ResponseMeta meta, ChatOutputOptions output, StreamOptions options,
                                           bool stream) {
  return std::make_unique<ChatWire>(std::move(meta), std::move(output), options, stream);
}

std::unique_ptr<gen::WireWriter> completion_wire(ResponseMeta meta, StreamOptions options, bool stream) {
  return std::make_unique<CompletionWire>(std::move(meta), options, stream);
}

}  // namespace splash::openai
