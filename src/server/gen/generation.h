// One request path for every generation API (issue 38): each API's parser builds a GenerationRequest
// (rendered prompt tokens, sampling, stop rules, limits, cache flags, deadline, how to read the
// output), generate() submits it to the engine, and a GenerationJob turns the engine's events into
// internal events (reasoning / text deltas, tool calls, prompt progress, finish with usage) that the
// API's WireWriter renders as SSE events or one body. Adding an API adds a parser and a WireWriter,
// never another generation path.
//
//   auto writer = std::make_unique<MyWireWriter>(...);
//   gen::GenerationRequest g;  g.prompt = ids;  g.max_tokens = 256;  g.output.split = true; ...
//   gen::generate(ctx, std::move(g), std::move(writer), http_writer);  // returns at once
//
// Refusals before the engine runs (context exceeded, queue full, ...) go to WireWriter::refuse; after
// submit the writer sees, in this order: open() (streams only), then any of progress() / prompt_scored()
// / events() / keepalive(), then exactly one of finish() or fail(). All calls for one request are serialized by
// the job's lock and run on the engine's callback thread or the keep-alive thread; writers must not
// block (the transport buffers).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/scheduler.h"
#include "sampling/logprobs.h"
#include "sampling/sampling_params.h"
#include "server/http/message.h"
#include "server/openai/api_error.h"
#include "server/openai/chat_output.h"
#include "server/openai/response.h"

namespace splash::app {
class EngineHost;  // server/app/engine_host.h
}  // namespace splash::app

namespace splash::gen {

using Clock = std::chrono::steady_clock;

// A streamed response that wants a keep-alive when it has been quiet for a while (spec 2.6: about
// every 2 s, so clients and proxies with read timeouts survive a long prefill).
class KeepAliveTarget {
 public:
  virtual ~KeepAliveTarget() = default;
  virtual void keepalive_if_idle(Clock::time_point now) = 0;
};

// --- the internal request ---------------------------------------------------------------------------

// How the model's text is read.
struct OutputRules {
  // false: plain text (completions): every piece is one kText event. true: reasoning, text and tool
  // calls are split out (ChatOutput: ReasoningSplitter, then ToolCallParser when tools are callable).
  bool split = false;
  openai::ChatOutputOptions chat;  // when split
};

struct GenerationRequest {
  std::vector<int32_t> prompt;        // rendered and tokenized
  bool prompt_fills_context = false;  // tokenizing stopped at the context: the prompt has at least that many
  std::optional<int64_t> max_tokens;  // nullopt: the rest of the context
  // A max_tokens over the rest of the context: false -> 400 context_length_exceeded (OpenAI);
  // true -> generate to the context limit (Messages, spec 2.4).
  bool clamp_max_tokens = false;
  SamplingParams sampling;
  std::vector<std::string> stop;      // stop strings; Finish::stop_index names the one that matched
  bool ignore_eos = false;
  bool cache_prompt = true;
  bool want_progress = false;         // progress() events while the prompt is processed
  std::string priority = "normal";    // foreground | normal | background (the engine has one queue today)
  std::optional<double> timeout_s;    // the request's own deadline, under openai::kNoDeadlineTimeout
  Clock::time_point arrival = Clock::now();
  bool stream = false;
  OutputRules output;
  // Log-probabilities of the generated tokens with this many alternatives each (0..kMaxTopLogprobs);
  // -1 = none (EngineRequest::logprobs: the model's raw distribution, no cost when off).
  int logprobs = -1;
  // The prompt's own log-probabilities (completions `echo`): WireWriter::prompt_scored gets them before
  // any output. Needed for max_tokens 0, which generates nothing; the prefix cache is not read.
  bool prompt_logprobs = false;
  std::shared_ptr<constrain::Matcher> constraint;  // structured output (EngineRequest::constraint)
};

// --- the internal events ----------------------------------------------------------------------------

struct Event {
  enum class Kind : uint8_t {
    kReasoning,          // text: a reasoning delta
    kText,               // text: an answer delta
    kToolCallStart,      // index, id, name (arguments follow in kToolCallArguments)
    kToolCallArguments,  // index, text: argument JSON text to append
    kToolCallDone,       // index: the call's arguments are complete (or cut by the end of output)
  };
  Kind kind = Kind::kText;
  std::string text;
  int index = 0;                       // tool calls: position of the call in this response
  std::string id;                      // kToolCallStart: "call_..." (OutputRules.chat.call_id_prefix)
  std::string name;                    // kToolCallStart
  // GenerationRequest::logprobs >= 0: the generated tokens whose text went out with this event or an
  // earlier one and were not listed yet, in order (the first event made from an engine piece carries
  // its tokens; tokens of text held back ride on a later event, the rest on Finish::logprobs). Any
  // kind: reasoning and tool-call tokens are listed too. Plain output sends a kText with empty text
  // rather than hold them. Empty when not asked for.
  std::vector<TokenLogprob> logprobs;
};

// How generation ended, with the figures every API's usage block is built from.
struct Finish {
  FinishReason end = FinishReason::kStop;  // kStop / kLength / kContext only
  std::optional<int> stop_index;      // a stop string ended it: index into GenerationRequest::stop
  bool made_tool_calls = false;
  int64_t reasoning_tokens = 0;       // generated tokens that went to reasoning (split output only)
  openai::GenerationStats stats;      // prompt, cached, completion tokens and timings
  const openai::ChatOutput* output = nullptr;  // split output: everything parsed (valid during finish())
  std::string_view text;              // plain output: all of it (valid during finish())
  std::vector<TokenLogprob> logprobs;  // tokens no event listed (Event::logprobs), e.g. of held-back text
};

// Where a writer puts bytes; tracks the time of the last write for keep-alives.
class Sink {
 public:
  explicit Sink(std::shared_ptr<http::ResponseWriter> w) : w_(std::move(w)) {}
  void respond(int status, std::vector<http::Header> headers, std::string body) {
    w_->respond(status, std::move(headers), std::move(body));
  }
  void start_stream(std::vector<http::Header> headers);
  void write(std::string_view data);  // raw bytes of an open stream (the writer frames SSE)
  void end() { w_->end(); }
  Clock::time_point last_write() const { return last_write_; }

 private:
  std::shared_ptr<http::ResponseWriter> w_;
  Clock::time_point last_write_ = Clock::now();
};

// One API's rendering of a request's output.
class WireWriter {
 public:
  virtual ~WireWriter() = default;
  // Before the engine runs: an error response instead of any output (status, code and message of
  // spec 2.7: context_length_exceeded, runtime_busy, capacity_exhausted ...).
  virtual void refuse(const openai::ApiError& error, Sink& out) = 0;
  // Streams: start the stream and write the opening events. Not called for one-body responses.
  virtual void open(Sink& out) = 0;
  // Streams with want_progress: after each prefill chunk.
  virtual void progress(const openai::PromptProgress& p, Sink& out) = 0;
  // GenerationRequest::prompt_logprobs: the prompt's scores, for prompt[1..] (the first token has no
  // context), once, before any events. Only the writers of APIs that ask for them override it.
  virtual void prompt_scored(std::span<const TokenLogprob> /*scored*/, Sink& /*out*/) {}
  // Output deltas in order; several per engine piece. Streams render them now; bodies may collect
  // them (or read Finish::output at the end).
  virtual void events(std::span<const Event> events, Sink& out) = 0;
  // Streams: nothing was written for about 2 s.
  virtual void keepalive(Sink& out) = 0;
  // The answer is complete: the last stream events and the end of the stream, or the body.
  virtual void finish(const Finish& finish, Sink& out) = 0;
  // The request failed after submit (timeout, engine failure, shutdown): an error event and the end
  // of the stream, or an error body.
  virtual void fail(const openai::ApiError& error, Sink& out) = 0;
};

// What generate() needs from the server.
struct GenerationContext {
  app::EngineHost* engines = nullptr;             // nullptr: 503 runtime_unavailable
  int64_t context = 0;                            // served context in tokens
  std::optional<std::chrono::milliseconds> server_timeout;  // --request-timeout
  std::function<void(std::weak_ptr<KeepAliveTarget>)> watch;  // registers streams for keep-alives
};

// Tokenizes at most what the context can hold (a prompt of `context` tokens or more is refused), so a
// huge prompt costs what the context costs, not what the text costs. Special-token text is parsed.
void encode_prompt(const Tokenizer& tok, std::string_view text, bool add_special, int64_t context,
                   GenerationRequest& request);

// Checks the prompt and max_tokens against the context, submits, and streams or answers through
// `writer`; cancels the engine request when the client disconnects. Returns once submitted.
void generate(const GenerationContext& ctx, GenerationRequest request, std::unique_ptr<WireWriter> writer,
              std::shared_ptr<http::ResponseWriter> http_writer);

// --- building blocks for writers --------------------------------------------------------------------

// The events as ChatOutput parts (OpenAI chat's delta shape); kToolCallDone has no part.
std::vector<openai::OutputPart> to_parts(std::span<const Event> events);

// The output as an ordered list of blocks (what a complete body lists and what a stream opened and
// closed): consecutive deltas of one kind form one block; each tool call is its own block.
struct Block {
  enum class Kind : uint8_t { kReasoning, kText, kToolCall };
  Kind kind = Kind::kText;
  std::string text;       // reasoning / text
  int index = 0;          // tool call: Event::index
  std::string id, name;   // tool call
  std::string arguments;  // tool call: JSON text (partial when cut)
  bool done = false;      // tool call: kToolCallDone seen
};
class BlockList {
 public:
  void add(const Event& e);
  const std::vector<Block>& blocks() const { return blocks_; }

 private:
  std::vector<Block> blocks_;
};

}  // namespace splash::gen
