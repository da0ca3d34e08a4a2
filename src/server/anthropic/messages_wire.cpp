#include "server/anthropic/messages_wire.h"

#include <cstdio>

#include "server/http/sse.h"
#include "server/openai/json_input.h"

namespace splash::anthropic {

namespace {

using ojson = nlohmann::ordered_json;

std::string sse(std::string_view type, const ojson& data) {
  return str_cat("event: ", type, "\n", http::sse_event(openai::dump_json(data)));
}

std::string_view stop_reason(const gen::Finish& f) {
  switch (f.end) {
    case FinishReason::kLength:
      return "max_tokens";
    case FinishReason::kContext:
      return "model_context_window_exceeded";
    default:
      if (f.stop_index) return "stop_sequence";
      return f.made_tool_calls ? "tool_use" : "end_turn";
  }
}

ojson usage(const openai::GenerationStats& s) {
  ojson u = ojson::object();
  u["input_tokens"] = std::max<int64_t>(s.prompt_tokens - s.cached_tokens, 0);
  u["cache_creation_input_tokens"] = 0;
  u["cache_read_input_tokens"] = s.cached_tokens;
  u["output_tokens"] = s.completion_tokens;
  return u;
}

// A tool call's arguments as the `input` object; text that is not a JSON object becomes {}.
ojson tool_input(const std::string& arguments) {
  auto parsed = openai::parse_json(arguments, "tool call arguments");
  if (parsed.ok() && parsed->is_object()) return std::move(parsed).value();
  return ojson::object();
}

ojson block_json(const gen::Block& b) {
  ojson j = ojson::object();
  switch (b.kind) {
    case gen::Block::Kind::kReasoning:
      j["type"] = "thinking";
      j["thinking"] = b.text;
      j["signature"] = thinking_signature(b.text);
      break;
    case gen::Block::Kind::kText:
      j["type"] = "text";
      j["text"] = b.text;
      break;
    case gen::Block::Kind::kToolCall:
      j["type"] = "tool_use";
      j["id"] = b.id;
      j["name"] = b.name;
      j["input"] = tool_input(b.arguments);
      break;
  }
  return j;
}

ojson error_json(const openai::ApiError& e) {
  ojson j = ojson::object();
  j["type"] = "error";
  j["error"]["type"] = error_type(error_status(e), e.code);
  j["error"]["message"] = e.message;
  return j;
}

class MessagesWire : public gen::WireWriter {
 public:
  MessagesWire(MessageMeta meta, bool stream) : meta_(std::move(meta)), stream_(stream) {}

  void refuse(const openai::ApiError& error, gen::Sink& out) override { respond(error, out); }

  void open(gen::Sink& out) override {
    out.start_stream(http::sse_headers());
    ojson message = message_json();
    message["usage"]["input_tokens"] = meta_.prompt_tokens;
    message["usage"]["cache_creation_input_tokens"] = 0;
    message["usage"]["cache_read_input_tokens"] = 0;
    message["usage"]["output_tokens"] = 0;
    ojson e = ojson::object();
    e["type"] = "message_start";
    e["message"] = std::move(message);
    out.write(sse("message_start", e));
  }

  void progress(const openai::PromptProgress& p, gen::Sink& out) override {
    if (!meta_.return_progress) return;
    ojson e = ojson::object();
    e["type"] = "ping";
    e["prompt_progress"] = {{"total", p.total}, {"cache", p.cache}, {"processed", p.processed}, {"time_ms", p.time_ms}};
    out.write(sse("ping", e));
  }

  void events(std::span<const gen::Event> events, gen::Sink& out) override {
    for (const gen::Event& e : events) {
      const size_t before = blocks_.blocks().size();
      blocks_.add(e);
      if (!stream_) continue;
      const auto& blocks = blocks_.blocks();
      if (blocks.size() > before) {
        if (open_ >= 0) stop_block(out);
        open_ = static_cast<int>(blocks.size() - 1);
        start_block(blocks.back(), out);
      }
      switch (e.kind) {
        case gen::Event::Kind::kReasoning:
          delta({{"type", "thinking_delta"}, {"thinking", e.text}}, out);
          break;
        case gen::Event::Kind::kText:
          delta({{"type", "text_delta"}, {"text", e.text}}, out);
          break;
        case gen::Event::Kind::kToolCallDone:
          if (open_ >= 0) stop_block(out);  // the call is the open block: calls end before anything else starts
          break;
        default:
          break;
      }
    }
  }

  void keepalive(gen::Sink& out) override { out.write(sse("ping", ojson{{"type", "ping"}})); }

  void finish(const gen::Finish& f, gen::Sink& out) override {
    std::optional<std::string> stop_sequence;
    if (f.stop_index && *f.stop_index < static_cast<int>(meta_.stop_sequences.size()))
      stop_sequence = meta_.stop_sequences[static_cast<size_t>(*f.stop_index)];
    if (!stream_) {
      ojson body = message_json();
      ojson content = ojson::array();
      for (const gen::Block& b : blocks_.blocks()) content.push_back(block_json(b));
      body["content"] = std::move(content);
      body["stop_reason"] = stop_reason(f);
      body["stop_sequence"] = stop_sequence ? ojson(*stop_sequence) : ojson(nullptr);
      body["usage"] = usage(f.stats);
      out.respond(200, {{"Content-Type", "application/json"}}, openai::dump_json(body));
      return;
    }
    if (open_ >= 0) stop_block(out);
    ojson md = ojson::object();
    md["type"] = "message_delta";
    md["delta"]["stop_reason"] = stop_reason(f);
    md["delta"]["stop_sequence"] = stop_sequence ? ojson(*stop_sequence) : ojson(nullptr);
    md["usage"] = usage(f.stats);
    out.write(sse("message_delta", md));
    out.write(sse("message_stop", ojson{{"type", "message_stop"}}));
    out.end();
  }

  void fail(const openai::ApiError& error, gen::Sink& out) override {
    if (!stream_) return respond(error, out);
    out.write(sse("error", error_json(error)));
    out.end();
  }

 private:
  ojson message_json() const {
    ojson m = ojson::object();
    m["id"] = meta_.id;
    m["type"] = "message";
    m["role"] = "assistant";
    m["model"] = meta_.model;
    m["content"] = ojson::array();
    m["stop_reason"] = nullptr;
    m["stop_sequence"] = nullptr;
    return m;
  }

  void respond(const openai::ApiError& error, gen::Sink& out) {
    http::SimpleResponse r = error_response(error);
    out.respond(r.status, std::move(r.headers), std::move(r.body));
  }

  void start_block(const gen::Block& b, gen::Sink& out) {
    ojson cb = ojson::object();
    switch (b.kind) {
      case gen::Block::Kind::kReasoning:
        cb["type"] = "thinking";
        cb["thinking"] = "";
        cb["signature"] = "";
        break;
      case gen::Block::Kind::kText:
        cb["type"] = "text";
        cb["text"] = "";
        break;
      case gen::Block::Kind::kToolCall:
        cb["type"] = "tool_use";
        cb["id"] = b.id;
        cb["name"] = b.name;
        cb["input"] = ojson::object();
        break;
    }
    ojson e = ojson::object();
    e["type"] = "content_block_start";
    e["index"] = open_;
    e["content_block"] = std::move(cb);
    out.write(sse("content_block_start", e));
  }

  // Ends the open block: a thinking block's signature, a call's whole input, then content_block_stop.
  void stop_block(gen::Sink& out) {
    const gen::Block& b = blocks_.blocks()[static_cast<size_t>(open_)];
    if (b.kind == gen::Block::Kind::kReasoning)
      delta({{"type", "signature_delta"}, {"signature", thinking_signature(b.text)}}, out);
    if (b.kind == gen::Block::Kind::kToolCall)
      delta({{"type", "input_json_delta"}, {"partial_json", openai::dump_json(tool_input(b.arguments))}}, out);
    out.write(sse("content_block_stop", ojson{{"type", "content_block_stop"}, {"index", open_}}));
    open_ = -1;
  }

  void delta(ojson d, gen::Sink& out) {
    ojson e = ojson::object();
    e["type"] = "content_block_delta";
    e["index"] = open_;
    e["delta"] = std::move(d);
    out.write(sse("content_block_delta", e));
  }

  MessageMeta meta_;
  bool stream_;
  gen::BlockList blocks_;
  int open_ = -1;  // stream: the block between its content_block_start and content_block_stop
};

}  // namespace

std::unique_ptr<gen::WireWriter> messages_wire(MessageMeta meta, bool stream) {
  return std::make_unique<MessagesWire>(std::move(meta), stream);
}

std::string_view error_type(int status, std::string_view code) {
  (void)code;
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 504: return "timeout_error";
    case 529: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

int error_status(const openai::ApiError& e) {
  if (e.status == 503 && (e.code == "runtime_busy" || e.code == "frontend_overloaded")) return 529;
  return e.status;
}

http::SimpleResponse error_response(const openai::ApiError& e) {
  http::SimpleResponse r;
  r.status = error_status(e);
  r.headers.push_back({"Content-Type", "application/json"});
  if (r.status == 503 || r.status == 529) r.headers.push_back({"Retry-After", "1"});
  r.body = openai::dump_json(error_json(e));
  return r;
}

http::SimpleResponse to_anthropic(http::SimpleResponse r) {
  if (r.status < 400) return r;
  auto body = ojson::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object() || !body.contains("error") || !body["error"].is_object() ||
      body.contains("type"))
    return r;
  const ojson& err = body["error"];
  openai::ApiError e;
  e.status = r.status;
  e.code = err.value("code", "");
  e.message = err.value("message", "");
  http::SimpleResponse out = error_response(e);
  // Keep the shared code's other headers (Allow, WWW-Authenticate, CORS ...).
  for (http::Header& h : r.headers) {
    if (h.name == "Content-Type" || h.name == "Retry-After" || h.name == "Content-Length") continue;
    out.headers.push_back(std::move(h));
  }
  return out;
}

std::string thinking_signature(std::string_view thinking) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  for (unsigned char c : thinking) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[24];
  std::snprintf(buf, sizeof buf, "splash-%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace splash::anthropic
