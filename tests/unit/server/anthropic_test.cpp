// The Messages API without sockets or an engine: request parsing and conversion to the chat
// conversation, the wire writer's body and event stream driven by hand-made seam events, errors in
// Anthropic's shape, and the seam's event helpers. Expected values are written out here.
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "server/anthropic/messages_request.h"
#include "server/anthropic/messages_wire.h"
#include "server/gen/generation.h"

namespace splash::anthropic {
namespace {

using nlohmann::json;

// --- parsing --------------------------------------------------------------------------------------

std::string error_of(std::string_view body, bool count_tokens = false) {
  auto r = parse_messages_request(body, count_tokens);
  EXPECT_FALSE(r.ok()) << body;
  if (r.ok()) return "";
  EXPECT_EQ(r.error().status, 400);
  return r.error().message;
}

TEST(AnthropicRequest, RequiredFields) {
  EXPECT_EQ(error_of(R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":5})"), "'model' is required");
  EXPECT_EQ(error_of(R"({"model":"m","messages":[{"role":"user","content":"hi"}]})"), "'max_tokens' is required");
  EXPECT_EQ(error_of(R"({"model":"m","max_tokens":0,"messages":[{"role":"user","content":"hi"}]})"),
            "'max_tokens' must be >= 1, got 0");
  EXPECT_EQ(error_of(R"({"model":"m","max_tokens":5,"messages":[]})"), "'messages' must be a non-empty array");
  // count_tokens needs no max_tokens.
  EXPECT_TRUE(parse_messages_request(R"({"model":"m","messages":[{"role":"user","content":"hi"}]})", true).ok());
}

TEST(AnthropicRequest, RefusedFieldsAreNamed) {
  EXPECT_NE(error_of(R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":[
      {"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]}]})")
                .find("'messages[0].content[0].type' 'image' is not supported"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},
      {"role":"assistant","content":"The"}]})")
                .find("'messages[1]' is an assistant message"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],
      "tools":[{"type":"web_search_20250305","name":"web_search"}]})")
                .find("'tools[0].type'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],
      "output_config":{"format":{"type":"json_schema"}}})")
                .find("'output_config.format.schema' must be an object"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],
      "output_config":{"format":{"type":"regex","schema":{}}}})")
                .find("'output_config.format.type' must be \"json_schema\""),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],
      "tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"g"}})")
                .find("'tool_choice.name' 'g' is not one of the request's tools"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],
      "tools":[{"name":"f","input_schema":{"type":"object"}}],"stop_sequences":["x"]})")
                .find("'stop_sequences' cannot be combined"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],
      "tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"},
      "thinking":{"type":"enabled","budget_tokens":1024}})")
                .find("'tool_choice' any/tool cannot be combined with 'thinking'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"stop_sequences":["a","b","c","d","e"]})")
                .find("at most 4"),
            std::string::npos);
}

// Claude Code 2.1.x sends its environment notes as a system-role message after the user's.
TEST(AnthropicRequest, SystemRoleMessageIsASystemTurn) {
  auto r = parse_messages_request(R"({"model": "m", "max_tokens": 8, "messages": [
      {"role": "user", "content": [{"type": "text", "text": "hi"}]},
      {"role": "system", "content": [{"type": "text", "text": "# Environment", "cache_control": {"type": "ephemeral"}}]},
      {"role": "user", "content": "go"}]})",
                                  false);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto& m = r->chat.messages;
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[1].role, "system");
  EXPECT_EQ(m[1].content, "# Environment");
  EXPECT_EQ(error_of(R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},
      {"role":"system","content":[{"type":"tool_use","id":"t","name":"x","input":{}}]},{"role":"user","content":"go"}]})"),
            "'messages[1].content[0].type' 'tool_use' is not supported in a system message");
  EXPECT_EQ(error_of(R"({"model":"m","max_tokens":5,"messages":[{"role":"tool","content":"x"}]})"),
            "'messages[0].role' must be \"user\", \"assistant\" or \"system\", got \"tool\"");
}

TEST(AnthropicRequest, ConversationBecomesChatMessages) {
  auto r = parse_messages_request(R"({
    "model": "m", "max_tokens": 64, "unknown_field": 1, "metadata": {"user_id": "u"},
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "messages": [
      {"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Use the tool.", "signature": "x"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "Looking."},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
      {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "21 C"}]},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "no such city", "is_error": true},
        {"type": "text", "text": "Thanks."}]}],
    "tools": [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "auto", "disable_parallel_tool_use": true},
    "temperature": 0.5, "top_k": 5, "stream": true})",
                                  false);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto& m = r->chat.messages;
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_EQ(m[0].content, "Be brief.");
  EXPECT_EQ(m[1].role, "user");
  EXPECT_EQ(m[2].role, "assistant");
  EXPECT_EQ(m[2].reasoning_content, "Use the tool.");
  EXPECT_EQ(m[2].content, "Looking.");
  ASSERT_EQ(m[2].tool_calls.size(), 1u);
  EXPECT_EQ(m[2].tool_calls[0].id, "toolu_1");
  EXPECT_EQ(m[2].tool_calls[0].name, "get_weather");
  EXPECT_EQ(m[2].tool_calls[0].arguments.dump(), R"({"city":"Paris"})");
  EXPECT_EQ(m[3].role, "tool");
  EXPECT_EQ(m[3].tool_call_id, "toolu_1");
  EXPECT_EQ(m[3].content, "21 C");
  EXPECT_EQ(m[4].content, "Error: no such city");
  EXPECT_EQ(m[5].role, "user");
  EXPECT_EQ(m[5].content, "Thanks.");
  ASSERT_EQ(r->chat.tools.size(), 1u);
  EXPECT_EQ(r->chat.tools[0].definition.dump(),
            R"({"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object"}}})");
  EXPECT_FALSE(r->chat.parallel_tool_calls);
  EXPECT_EQ(r->chat.reasoning_effort, "none");  // thinking not asked for
  EXPECT_FLOAT_EQ(r->chat.common.sampling.temperature, 0.5f);
  EXPECT_EQ(r->chat.common.sampling.top_k, 5);
  EXPECT_TRUE(r->chat.common.stream);
  EXPECT_EQ(r->max_tokens, 64);
}

TEST(AnthropicRequest, ThinkingAndToolChoice) {
  auto on = parse_messages_request(R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],
      "thinking":{"type":"enabled","budget_tokens":2048}})",
                                   false);
  ASSERT_TRUE(on.ok());
  EXPECT_TRUE(on->thinking);
  EXPECT_EQ(on->chat.reasoning_effort, "high");
  auto adaptive = parse_messages_request(R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],
      "thinking":{"type":"adaptive"},"output_config":{"effort":"low"}})",
                                         false);
  ASSERT_TRUE(adaptive.ok());
  EXPECT_EQ(adaptive->chat.reasoning_effort, "low");
  auto none = parse_messages_request(R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],
      "tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"none"}})",
                                     false);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->chat.tools_callable());  // tools rendered, calls not parsed
  auto named = parse_messages_request(R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}],
      "tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f"}})",
                                      false);
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->tool_choice.mode, ToolChoice::Mode::kTool);
  EXPECT_EQ(named->tool_choice.name, "f");
}

// --- the wire writer ------------------------------------------------------------------------------

class FakeWriter : public http::ResponseWriter {
 public:
  void respond(int s, std::vector<http::Header> h, std::string b) override {
    status = s;
    headers = std::move(h);
    body = std::move(b);
  }
  bool start_stream(int s, std::vector<http::Header> h) override {
    status = s;
    headers = std::move(h);
    return true;
  }
  bool write(std::string_view d) override {
    body += d;
    return true;
  }
  void end() override { ended = true; }
  bool client_gone() const override { return false; }
  void on_disconnect(std::function<void()>) override {}
  std::string header(std::string_view name) const { return std::string(http::find_header(headers, name).value_or("")); }

  int status = 0;
  std::vector<http::Header> headers;
  std::string body;
  bool ended = false;
};

gen::Event ev(gen::Event::Kind kind, std::string text = "", int index = 0, std::string id = "", std::string name = "") {
  gen::Event e;
  e.kind = kind;
  e.text = std::move(text);
  e.index = index;
  e.id = std::move(id);
  e.name = std::move(name);
  return e;
}

// Reasoning, text, then a call whose arguments arrive in two pieces.
std::vector<gen::Event> sample_events() {
  using K = gen::Event::Kind;
  return {ev(K::kReasoning, "Think"), ev(K::kReasoning, "ing."), ev(K::kText, "Hello"), ev(K::kText, " there"),
          ev(K::kToolCallStart, "", 0, "toolu_A", "get_weather"), ev(K::kToolCallArguments, R"({"city": )", 0),
          ev(K::kToolCallArguments, R"("Paris"})", 0), ev(K::kToolCallDone, "", 0)};
}

gen::Finish finish_with(FinishReason end, bool calls, std::optional<int> stop_index = std::nullopt) {
  gen::Finish f;
  f.end = end;
  f.made_tool_calls = calls;
  f.stop_index = stop_index;
  f.stats.prompt_tokens = 100;
  f.stats.cached_tokens = 96;
  f.stats.completion_tokens = 7;
  return f;
}

// "event: X\ndata: {...}\n\n" records -> [(X, data)].
std::vector<std::pair<std::string, json>> parse_sse(const std::string& body) {
  std::vector<std::pair<std::string, json>> out;
  size_t at = 0;
  while (at < body.size()) {
    size_t end = body.find("\n\n", at);
    if (end == std::string::npos) break;
    std::string rec = body.substr(at, end - at);
    at = end + 2;
    size_t nl = rec.find('\n');
    EXPECT_EQ(rec.rfind("event: ", 0), 0u) << rec;
    EXPECT_EQ(rec.compare(nl + 1, 6, "data: "), 0) << rec;
    out.emplace_back(rec.substr(7, nl - 7), json::parse(rec.substr(nl + 7)));
  }
  return out;
}

TEST(AnthropicWire, Body) {
  auto w = std::make_shared<FakeWriter>();
  gen::Sink sink(w);
  MessageMeta meta{"msg_1", "tiny", 100, {"END"}, false};
  auto wire = messages_wire(meta, /*stream=*/false);
  auto events = sample_events();
  wire->events(events, sink);
  wire->finish(finish_with(FinishReason::kStop, true), sink);
  EXPECT_EQ(w->status, 200);
  json b = json::parse(w->body);
  EXPECT_EQ(b["id"], "msg_1");
  EXPECT_EQ(b["type"], "message");
  EXPECT_EQ(b["role"], "assistant");
  EXPECT_EQ(b["model"], "tiny");
  ASSERT_EQ(b["content"].size(), 3u);
  EXPECT_EQ(b["content"][0]["type"], "thinking");
  EXPECT_EQ(b["content"][0]["thinking"], "Thinking.");
  EXPECT_EQ(b["content"][0]["signature"], thinking_signature("Thinking."));
  EXPECT_EQ(b["content"][1], json({{"type", "text"}, {"text", "Hello there"}}));
  EXPECT_EQ(b["content"][2],
            json({{"type", "tool_use"}, {"id", "toolu_A"}, {"name", "get_weather"}, {"input", {{"city", "Paris"}}}}));
  EXPECT_EQ(b["stop_reason"], "tool_use");
  EXPECT_TRUE(b["stop_sequence"].is_null());
  // Anthropic's input_tokens leaves out what was read from the cache.
  EXPECT_EQ(b["usage"], json({{"input_tokens", 4}, {"cache_creation_input_tokens", 0}, {"cache_read_input_tokens", 96},
                              {"output_tokens", 7}}));
}

TEST(AnthropicWire, StopReasons) {
  auto reason = [](const gen::Finish& f) {
    auto w = std::make_shared<FakeWriter>();
    gen::Sink sink(w);
    auto wire = messages_wire(MessageMeta{"msg_1", "tiny", 100, {"A", "END"}, false}, false);
    wire->finish(f, sink);
    json b = json::parse(w->body);
    std::string out = b["stop_reason"].get<std::string>();
    out.append("|").append(b["stop_sequence"].is_null() ? std::string("null") : b["stop_sequence"].get<std::string>());
    return out;
  };
  EXPECT_EQ(reason(finish_with(FinishReason::kStop, false)), "end_turn|null");
  EXPECT_EQ(reason(finish_with(FinishReason::kLength, true)), "max_tokens|null");
  EXPECT_EQ(reason(finish_with(FinishReason::kContext, false)), "model_context_window_exceeded|null");
  EXPECT_EQ(reason(finish_with(FinishReason::kStop, false, 1)), "stop_sequence|END");
}

TEST(AnthropicWire, StreamEventOrder) {
  auto w = std::make_shared<FakeWriter>();
  gen::Sink sink(w);
  auto wire = messages_wire(MessageMeta{"msg_2", "tiny", 100, {}, true}, /*stream=*/true);
  wire->open(sink);
  wire->progress(openai::PromptProgress{100, 64, 96, 5.0}, sink);
  auto events = sample_events();
  wire->events(std::span<const gen::Event>(events).subspan(0, 3), sink);  // split anywhere: same stream
  wire->keepalive(sink);
  wire->events(std::span<const gen::Event>(events).subspan(3), sink);
  wire->finish(finish_with(FinishReason::kStop, true), sink);
  EXPECT_TRUE(w->ended);
  EXPECT_EQ(w->header("Content-Type"), "text/event-stream");
  auto s = parse_sse(w->body);
  std::vector<std::string> names;
  for (auto& [name, data] : s) {
    EXPECT_EQ(data["type"], name);
    std::string n = name;
    if (data.contains("delta") && data["delta"].contains("type")) n.append(":").append(data["delta"]["type"].get<std::string>());
    names.push_back(std::move(n));
  }
  const std::vector<std::string> expected = {
      "message_start", "ping",
      "content_block_start", "content_block_delta:thinking_delta", "content_block_delta:thinking_delta",
      "content_block_delta:signature_delta", "content_block_stop",
      "content_block_start", "content_block_delta:text_delta", "ping", "content_block_delta:text_delta", "content_block_stop",
      "content_block_start", "content_block_delta:input_json_delta", "content_block_stop",
      "message_delta", "message_stop"};
  ASSERT_EQ(names.size(), expected.size()) << w->body;
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(names[i], expected[i]) << i;
  EXPECT_EQ(s[0].second["message"]["usage"]["input_tokens"], 100);
  EXPECT_EQ(s[1].second["prompt_progress"], json({{"total", 100}, {"cache", 64}, {"processed", 96}, {"time_ms", 5.0}}));
  EXPECT_EQ(s[2].second["index"], 0);
  EXPECT_EQ(s[2].second["content_block"], json({{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}));
  EXPECT_EQ(s[5].second["delta"]["signature"], thinking_signature("Thinking."));
  EXPECT_EQ(s[7].second["index"], 1);
  EXPECT_EQ(s[12].second["content_block"],
            json({{"type", "tool_use"}, {"id", "toolu_A"}, {"name", "get_weather"}, {"input", json::object()}}));
  EXPECT_EQ(json::parse(s[13].second["delta"]["partial_json"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_EQ(s[14].second["index"], 2);
  EXPECT_EQ(s[15].second["delta"]["stop_reason"], "tool_use");
  EXPECT_EQ(s[15].second["usage"]["cache_read_input_tokens"], 96);
  EXPECT_EQ(s[15].second["usage"]["input_tokens"], 4);
}

TEST(AnthropicWire, CutCallBecomesEmptyInputAndErrorsEndTheStream) {
  using K = gen::Event::Kind;
  auto w = std::make_shared<FakeWriter>();
  gen::Sink sink(w);
  auto wire = messages_wire(MessageMeta{"msg_3", "tiny", 10, {}, false}, true);
  wire->open(sink);
  std::vector<gen::Event> events = {ev(K::kToolCallStart, "", 0, "toolu_B", "f"), ev(K::kToolCallArguments, R"({"a": "unfinis)", 0),
                                    ev(K::kToolCallDone, "", 0)};
  wire->events(events, sink);
  wire->fail(openai::api_error(504, "request_timeout", "the request ran past its timeout"), sink);
  EXPECT_TRUE(w->ended);
  auto s = parse_sse(w->body);
  ASSERT_EQ(s.size(), 5u) << w->body;
  EXPECT_EQ(s[2].second["delta"]["partial_json"], "{}");
  EXPECT_EQ(s[4].first, "error");
  EXPECT_EQ(s[4].second, json({{"type", "error"}, {"error", {{"type", "timeout_error"}, {"message", "the request ran past its timeout"}}}}));
}

TEST(AnthropicWire, ErrorShapes) {
  http::SimpleResponse busy = error_response(openai::api_error(503, "runtime_busy", "queue full"));
  EXPECT_EQ(busy.status, 529);
  EXPECT_EQ(http::find_header(busy.headers, "Retry-After").value_or(""), "1");
  EXPECT_EQ(json::parse(busy.body), json({{"type", "error"}, {"error", {{"type", "overloaded_error"}, {"message", "queue full"}}}}));
  EXPECT_EQ(error_type(400, ""), "invalid_request_error");
  EXPECT_EQ(error_type(401, ""), "authentication_error");
  EXPECT_EQ(error_type(404, ""), "not_found_error");
  EXPECT_EQ(error_type(413, ""), "request_too_large");
  EXPECT_EQ(error_type(500, ""), "api_error");
  // Shared code's OpenAI-shaped refusals are converted, other headers kept; Anthropic bodies pass.
  http::SimpleResponse r = http::error_response(401, "authentication_error", "invalid API key");
  r.headers.push_back({"WWW-Authenticate", "Bearer"});
  http::SimpleResponse a = to_anthropic(r);
  EXPECT_EQ(a.status, 401);
  EXPECT_EQ(json::parse(a.body), json({{"type", "error"}, {"error", {{"type", "authentication_error"}, {"message", "invalid API key"}}}}));
  EXPECT_EQ(http::find_header(a.headers, "WWW-Authenticate").value_or(""), "Bearer");
  EXPECT_EQ(to_anthropic(busy).body, busy.body);
}

// --- seam helpers ---------------------------------------------------------------------------------

TEST(GenerationSeam, BlockListAndParts) {
  gen::BlockList blocks;
  for (const gen::Event& e : sample_events()) blocks.add(e);
  ASSERT_EQ(blocks.blocks().size(), 3u);
  EXPECT_EQ(blocks.blocks()[0].text, "Thinking.");
  EXPECT_EQ(blocks.blocks()[1].text, "Hello there");
  EXPECT_EQ(blocks.blocks()[2].arguments, R"({"city": "Paris"})");
  EXPECT_TRUE(blocks.blocks()[2].done);
  auto events = sample_events();
  auto parts = gen::to_parts(events);
  ASSERT_EQ(parts.size(), 7u);  // kToolCallDone has no part
  EXPECT_EQ(parts[4].call.id, "toolu_A");
  EXPECT_EQ(parts[4].call.name, "get_weather");
  EXPECT_TRUE(parts[5].call.id.empty());
  EXPECT_EQ(parts[5].call.arguments, R"({"city": )");
}

}  // namespace
}  // namespace splash::anthropic
