// The logprobs objects against golden JSON written from OpenAI's API reference (chat:
// choices[].logprobs.content[] {token, logprob, bytes, top_logprobs}; completions: tokens,
// token_logprobs, top_logprobs as dicts, text_offset), in bodies and stream chunks.
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/openai/json_input.h"
#include "server/openai/logprobs.h"
#include "server/openai/response.h"
#include "server/openai/wire.h"

namespace splash::openai {
namespace {

using ojson = nlohmann::ordered_json;

// A toy vocabulary: id -> text; id 9 is half of a two-byte character.
std::string piece(int32_t id) {
  static const std::vector<std::string> vocab = {"<s>", "Once", " upon", " a", " time", ",", " there", "é", "\n",
                                                 std::string("\xC3")};
  return vocab.at(static_cast<size_t>(id));
}

std::vector<TokenLogprob> two_tokens() {
  return {TokenLogprob{1, -0.5f, {{1, -0.5f}, {4, -1.25f}}},
          TokenLogprob{2, -std::numeric_limits<float>::infinity(), {{3, -0.25f}, {2, -std::numeric_limits<float>::infinity()}}}};
}

TEST(ChatLogprobs, EntriesHaveOpenAIShape) {
  ojson j = chat_logprobs(chat_logprob_entries(two_tokens(), piece));
  EXPECT_EQ(dump_json(j),
            R"({"content":[{"token":"Once","logprob":-0.5,"bytes":[79,110,99,101],"top_logprobs":[)"
            R"({"token":"Once","logprob":-0.5,"bytes":[79,110,99,101]},{"token":" time","logprob":-1.25,"bytes":[32,116,105,109,101]}]},)"
            R"({"token":" upon","logprob":-9999.0,"bytes":[32,117,112,111,110],"top_logprobs":[)"
            R"({"token":" a","logprob":-0.25,"bytes":[32,97]},{"token":" upon","logprob":-9999.0,"bytes":[32,117,112,111,110]}]}],)"
            R"("refusal":null})");
}

TEST(ChatLogprobs, PartialCharacterKeepsExactBytes) {
  std::vector<TokenLogprob> t = {TokenLogprob{9, -1.0f, {}}};
  ojson j = chat_logprob_entries(t, piece);
  EXPECT_EQ(dump_json(j), "[{\"token\":\"\xEF\xBF\xBD\",\"logprob\":-1.0,\"bytes\":[195],\"top_logprobs\":[]}]");
}

TEST(CompletionLogprobs, EchoFirstTokenIsNullAndOffsetsCount) {
  CompletionLogprobs lp(piece);
  lp.add_unscored(0);
  lp.add(two_tokens());
  EXPECT_EQ(dump_json(lp.take()),
            R"({"tokens":["<s>","Once"," upon"],"token_logprobs":[null,-0.5,-9999.0],)"
            R"("top_logprobs":[null,{"Once":-0.5," time":-1.25},{" a":-0.25," upon":-9999.0}],"text_offset":[0,3,7]})");
  // A later share (a stream chunk) keeps counting offsets.
  std::vector<TokenLogprob> more = {TokenLogprob{5, -0.125f, {}}};
  lp.add(more);
  EXPECT_EQ(dump_json(lp.take()), R"({"tokens":[","],"token_logprobs":[-0.125],"top_logprobs":[{}],"text_offset":[12]})");
  EXPECT_TRUE(lp.empty());
}

ResponseMeta meta(const char* id) { return ResponseMeta{id, 1700000000, "m"}; }

TEST(CompletionLogprobs, BodyAndChunkCarryTheObject) {
  CompletionLogprobs lp(piece);
  lp.add(two_tokens());
  const ojson obj = lp.take();
  ojson body = ojson::parse(text_completion_body(meta("cmpl-1"), "Once upon", FinishReason::kLength, {}, obj));
  EXPECT_EQ(body["choices"][0]["logprobs"], obj);
  ojson plain = ojson::parse(text_completion_body(meta("cmpl-1"), "x", FinishReason::kLength, {}));
  EXPECT_TRUE(plain["choices"][0]["logprobs"].is_null());
  CompletionStream s(meta("cmpl-2"), StreamOptions{});
  EXPECT_FALSE(s.text("").has_value());
  auto c = s.text("", obj);  // tokens whose text is held back still go out
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(ojson::parse(*c)["choices"][0]["logprobs"], obj);
}

TEST(ChatLogprobs, BodyCarriesThemAndStreamsAttachToTheNextChunk) {
  ChatOutputOptions o;
  ChatOutput out(o);
  out.feed("Once upon", 2);
  out.finish();
  ojson lp = chat_logprobs(chat_logprob_entries(two_tokens(), piece));
  ojson body = ojson::parse(chat_completion_body(meta("chatcmpl-1"), out, FinishReason::kStop, {}, lp));
  EXPECT_EQ(body["choices"][0]["logprobs"], lp);
  ojson plain = ojson::parse(chat_completion_body(meta("chatcmpl-1"), out, FinishReason::kStop, {}));
  EXPECT_FALSE(plain["choices"][0].contains("logprobs"));

  // Streaming: a piece held back (a possible "<think>" start) keeps its entries for the next chunk.
  ChatStream s(meta("chatcmpl-2"), o, StreamOptions{});
  const ojson entries = chat_logprob_entries(two_tokens(), piece);
  auto held = s.text("<", 1, ojson::array({entries[0]}));
  std::vector<std::string> sent = s.text("x done", 1, ojson::array({entries[1]}));
  if (!held.empty()) {
    // The splitter let "<" through at once: it carries the first entry.
    EXPECT_EQ(ojson::parse(held[0])["choices"][0]["logprobs"]["content"], ojson::array({entries[0]}));
    ASSERT_FALSE(sent.empty());
    EXPECT_EQ(ojson::parse(sent[0])["choices"][0]["logprobs"]["content"], ojson::array({entries[1]}));
  } else {
    ASSERT_FALSE(sent.empty());
    EXPECT_EQ(ojson::parse(sent[0])["choices"][0]["logprobs"]["content"], entries);
  }
  for (size_t i = 1; i < sent.size(); ++i) EXPECT_FALSE(ojson::parse(sent[i])["choices"][0].contains("logprobs"));
  // OpenAI's key order in a chunk's choice.
  ojson first = ojson::parse(sent[0])["choices"][0];
  std::vector<std::string> keys;
  for (auto it = first.begin(); it != first.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"index", "delta", "logprobs", "finish_reason"}));
  // Entries still pending at the end ride on the finish chunk.
  s.text("", 0, ojson::array({entries[0]}));
  auto end = s.finish(FinishReason::kStop, {});
  bool found = false;
  for (const std::string& c : end) {
    ojson j = ojson::parse(c);
    if (!j["choices"].empty() && j["choices"][0].contains("logprobs")) {
      EXPECT_EQ(j["choices"][0]["logprobs"]["content"], ojson::array({entries[0]}));
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

TEST(CompletionLogprobs, OffsetsCountCharactersNotBytes) {
  CompletionLogprobs lp(piece);
  std::vector<TokenLogprob> t = {TokenLogprob{7, -1.0f, {}}, TokenLogprob{9, -1.0f, {}}, TokenLogprob{5, -1.0f, {}}};
  lp.add(t);  // "é" (2 bytes, 1 character), "\xC3" (a lead byte: starts a character), ","
  EXPECT_EQ(lp.take()["text_offset"], ojson::parse("[0,1,2]"));
}

TEST(ChatLogprobs, NegativeInfinityIsTheFloor) {
  EXPECT_EQ(logprob_value(-std::numeric_limits<float>::infinity()), kLogprobFloor);
  EXPECT_EQ(logprob_value(-0.5f), -0.5);
}

// --- the wire writers: logprobs from the generation seam's events --------------------------------

class CapturingWriter : public http::ResponseWriter {
 public:
  void respond(int s, std::vector<http::Header>, std::string b) override {
    status = s;
    body = std::move(b);
  }
  bool start_stream(int s, std::vector<http::Header>) override {
    status = s;
    return true;
  }
  bool write(std::string_view d) override {
    body += d;
    return true;
  }
  void end() override {}
  bool client_gone() const override { return false; }
  void on_disconnect(std::function<void()>) override {}

  // The stream's data payloads, [DONE] left out.
  std::vector<ojson> chunks() const {
    std::vector<ojson> out;
    size_t at = 0;
    while ((at = body.find("data: ", at)) != std::string::npos) {
      const size_t end = body.find("\n\n", at);
      std::string data = body.substr(at + 6, end - at - 6);
      at = end;
      if (data != "[DONE]") out.push_back(ojson::parse(data));
    }
    return out;
  }

  int status = 0;
  std::string body;
};

gen::Event text_event(gen::Event::Kind kind, std::string text, std::vector<TokenLogprob> logprobs = {}) {
  gen::Event e;
  e.kind = kind;
  e.text = std::move(text);
  e.logprobs = std::move(logprobs);
  return e;
}

std::vector<TokenLogprob> one_token(int32_t id, float logprob) { return {TokenLogprob{id, logprob, {{id, logprob}}}}; }

gen::Finish finished(std::string_view text, std::vector<TokenLogprob> leftover = {}) {
  gen::Finish f;
  f.end = FinishReason::kLength;
  f.text = text;
  f.logprobs = std::move(leftover);
  return f;
}

TEST(CompletionWireLogprobs, EchoScoredPromptThenGeneratedTokens) {
  auto w = std::make_shared<CapturingWriter>();
  gen::Sink sink(w);
  auto wire = completion_wire(meta("cmpl-3"), StreamOptions{}, /*stream=*/false, piece,
                              CompletionEcho{"<s>Once upon", {0, 1, 2}});
  wire->prompt_scored(two_tokens(), sink);
  std::vector<gen::Event> ev = {text_event(gen::Event::Kind::kText, " a", one_token(3, -0.75f))};
  wire->events(ev, sink);
  wire->finish(finished(" a"), sink);
  ASSERT_EQ(w->status, 200);
  ojson choice = ojson::parse(w->body)["choices"][0];
  EXPECT_EQ(choice["text"], "<s>Once upon a");
  EXPECT_EQ(dump_json(choice["logprobs"]),
            R"({"tokens":["<s>","Once"," upon"," a"],"token_logprobs":[null,-0.5,-9999.0,-0.75],)"
            R"("top_logprobs":[null,{"Once":-0.5," time":-1.25},{" a":-0.25," upon":-9999.0},{" a":-0.75}],)"
            R"("text_offset":[0,3,7,12]})");
}

TEST(CompletionWireLogprobs, StreamedEchoIsTheFirstChunk) {
  // Without logprobs the echo needs no scores: it goes out as the stream opens.
  auto w = std::make_shared<CapturingWriter>();
  gen::Sink sink(w);
  auto wire = completion_wire(meta("cmpl-4"), StreamOptions{}, /*stream=*/true, {}, CompletionEcho{"Once", {1}});
  wire->open(sink);
  std::vector<gen::Event> ev = {text_event(gen::Event::Kind::kText, " upon")};
  wire->events(ev, sink);
  wire->finish(finished(" upon"), sink);
  auto c = w->chunks();
  ASSERT_GE(c.size(), 3u);
  EXPECT_EQ(c[0]["choices"][0]["text"], "Once");
  EXPECT_TRUE(c[0]["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(c[1]["choices"][0]["text"], " upon");

  // With logprobs it waits for the scores, which come after the stream opened.
  auto w2 = std::make_shared<CapturingWriter>();
  gen::Sink sink2(w2);
  auto scored =
      completion_wire(meta("cmpl-5"), StreamOptions{}, true, piece, CompletionEcho{"<s>Once upon", {0, 1, 2}});
  scored->open(sink2);
  EXPECT_TRUE(w2->chunks().empty());
  scored->prompt_scored(two_tokens(), sink2);
  // A piece whose text is held back still sends its token's logprobs (empty text).
  std::vector<gen::Event> held = {text_event(gen::Event::Kind::kText, "", one_token(5, -0.125f))};
  scored->events(held, sink2);
  scored->finish(finished(""), sink2);
  auto c2 = w2->chunks();
  ASSERT_GE(c2.size(), 3u);
  EXPECT_EQ(c2[0]["choices"][0]["text"], "<s>Once upon");
  EXPECT_EQ(c2[0]["choices"][0]["logprobs"]["token_logprobs"], ojson::parse("[null,-0.5,-9999.0]"));
  EXPECT_EQ(c2[1]["choices"][0]["text"], "");
  EXPECT_EQ(c2[1]["choices"][0]["logprobs"]["tokens"], ojson::parse(R"([","])"));
  EXPECT_EQ(c2[1]["choices"][0]["logprobs"]["text_offset"], ojson::parse("[12]"));
}

TEST(ChatWireLogprobs, EveryEventKindAndTheLeftoversAreListed) {
  using K = gen::Event::Kind;
  // Reasoning tokens are listed like content tokens; Finish::logprobs (held-back text) come last.
  std::vector<gen::Event> ev = {text_event(K::kReasoning, "Once", one_token(1, -0.5f)),
                                text_event(K::kText, " upon", one_token(2, -1.0f))};
  const std::vector<TokenLogprob> leftover = one_token(3, -2.0f);
  const ojson all = chat_logprob_entries(
      std::vector<TokenLogprob>{one_token(1, -0.5f)[0], one_token(2, -1.0f)[0], one_token(3, -2.0f)[0]}, piece);

  auto w = std::make_shared<CapturingWriter>();
  gen::Sink sink(w);
  ChatOutput out{ChatOutputOptions{}};
  out.finish();
  auto body_wire = chat_wire(meta("chatcmpl-3"), ChatOutputOptions{}, StreamOptions{}, /*stream=*/false, piece);
  body_wire->events(ev, sink);
  gen::Finish f = finished("", leftover);
  f.output = &out;
  body_wire->finish(f, sink);
  ojson body = ojson::parse(w->body);
  EXPECT_EQ(body["choices"][0]["logprobs"], chat_logprobs(all));

  auto ws = std::make_shared<CapturingWriter>();
  gen::Sink stream_sink(ws);
  auto stream_wire = chat_wire(meta("chatcmpl-4"), ChatOutputOptions{}, StreamOptions{}, /*stream=*/true, piece);
  stream_wire->open(stream_sink);
  stream_wire->events(std::span<const gen::Event>(ev).subspan(0, 1), stream_sink);
  stream_wire->events(std::span<const gen::Event>(ev).subspan(1), stream_sink);
  stream_wire->finish(f, stream_sink);
  ojson streamed = ojson::array();
  for (const ojson& c : ws->chunks()) {
    if (c["choices"].empty() || !c["choices"][0].contains("logprobs")) continue;
    for (const ojson& e : c["choices"][0]["logprobs"]["content"]) streamed.push_back(e);
  }
  EXPECT_EQ(streamed, all);

  // Without `piece` no chunk and no body carries the key.
  auto wn = std::make_shared<CapturingWriter>();
  gen::Sink none_sink(wn);
  auto none = chat_wire(meta("chatcmpl-5"), ChatOutputOptions{}, StreamOptions{}, false);
  none->events(ev, none_sink);
  none->finish(f, none_sink);
  EXPECT_FALSE(ojson::parse(wn->body)["choices"][0].contains("logprobs"));
}

}  // namespace
}  // namespace splash::openai
