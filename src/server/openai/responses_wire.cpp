#include "server/openai/responses_wire.h"

#include "server/http/sse.h"
#include "server/openai/json_input.h"

namespace splash::openai {

namespace {

class ResponsesWire : public gen::WireWriter {
 public:
  ResponsesWire(ResponseSettings settings, bool stream, std::shared_ptr<ResponseStore> store,
                std::vector<ChatMessage> conversation)
      : stream_(stream), events_(std::move(settings)), store_(std::move(store)), conversation_(std::move(conversation)) {}

  void refuse(const ApiError& error, gen::Sink& out) override { respond(out, error); }

  void open(gen::Sink& out) override {
    out.start_stream(http::sse_headers());
    send(out, events_.start());
  }

  void progress(const PromptProgress& p, gen::Sink& out) override {
    if (!stream_) return;
    if (auto e = events_.progress(p)) out.write(sse_frame(*e));
  }

  // Fed in streams and bodies alike: the body is the same object the stream ends with.
  void events(std::span<const gen::Event> events, gen::Sink& out) override {
    auto sent = events_.feed(gen::to_parts(events));
    if (stream_) send(out, sent);
  }

  void keepalive(gen::Sink& out) override { out.write(http::sse_comment()); }

  void finish(const gen::Finish& f, gen::Sink& out) override {
    auto sent = events_.finish(f.end, f.stats, f.reasoning_tokens);
    keep();
    if (!stream_) {
      out.respond(200, {{"Content-Type", "application/json"}}, dump_json(events_.body()));
      return;
    }
    send(out, sent);
    out.end();
  }

  void fail(const ApiError& error, gen::Sink& out) override {
    if (!stream_) return respond(out, error);
    send(out, events_.fail(error, GenerationStats{}, 0));
    keep();
    out.end();
  }

 private:
  static void respond(gen::Sink& out, const ApiError& e) {
    http::SimpleResponse r = http::error_response(e.status, e.code, e.message);
    out.respond(r.status, std::move(r.headers), std::move(r.body));
  }
  static void send(gen::Sink& out, const std::vector<ResponseEvent>& events) {
    for (const ResponseEvent& e : events) out.write(sse_frame(e));
  }
  // The finished response and its conversation, for GET and previous_response_id.
  void keep() {
    if (!store_) return;
    StoredResponse entry;
    entry.id = events_.response()["id"].get<std::string>();
    entry.response = events_.body();
    entry.conversation = std::move(conversation_);
    entry.conversation.push_back(events_.assistant_turn());
    store_->put(std::move(entry));
  }

  bool stream_;
  ResponseEvents events_;
  std::shared_ptr<ResponseStore> store_;
  std::vector<ChatMessage> conversation_;
};

}  // namespace

std::unique_ptr<gen::WireWriter> responses_wire(ResponseSettings settings, bool stream,
                                                std::shared_ptr<ResponseStore> store,
                                                std::vector<ChatMessage> conversation) {
  return std::make_unique<ResponsesWire>(std::move(settings), stream, std::move(store), std::move(conversation));
}

}  // namespace splash::openai
