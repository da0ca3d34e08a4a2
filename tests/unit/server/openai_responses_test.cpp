// OpenAI Responses API: the request parser (items -> chat messages, refusals naming the field), the
// bounded response store, and the event writer fed by hand-made output parts.
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/openai/chat_output.h"
#include "server/openai/response_store.h"
#include "server/openai/responses_output.h"
#include "server/openai/responses_request.h"

namespace splash::openai {
namespace {

using ojson = nlohmann::ordered_json;

// --- parser ---------------------------------------------------------------------------------------

TEST(ResponsesRequest, StringInputAndDefaults) {
  auto r = parse_responses_request(R"({"model":"m","input":"hello"})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->common.model.value_or(""), "m");
  ASSERT_EQ(r->input.size(), 1u);
  EXPECT_EQ(r->input[0].role, "user");
  EXPECT_EQ(r->input[0].content.value_or(""), "hello");
  EXPECT_TRUE(r->store);
  EXPECT_TRUE(r->parallel_tool_calls);
  EXPECT_FALSE(r->max_output_tokens.has_value());
  EXPECT_FALSE(r->previous_response_id.has_value());
  EXPECT_FALSE(r->instructions.has_value());
  EXPECT_EQ(r->tool_choice_json, "auto");
  EXPECT_TRUE(r->tools_json.is_array() && r->tools_json.empty());
  EXPECT_FLOAT_EQ(r->common.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r->common.sampling.top_p, 0.95f);
}

TEST(ResponsesRequest, FieldsAreRead) {
  auto r = parse_responses_request(R"({"input":"x","instructions":"be brief","max_output_tokens":32,
    "temperature":0.5,"top_p":0.9,"store":false,"previous_response_id":"resp_1","parallel_tool_calls":false,
    "reasoning":{"effort":"low","summary":"auto"},"metadata":{"k":"v"},"text":{"format":{"type":"text"},"verbosity":"low"},
    "include":["reasoning.encrypted_content"],"prompt_cache_key":"abc","stream":true})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->instructions.value_or(""), "be brief");
  EXPECT_EQ(r->max_output_tokens.value_or(0), 32);
  EXPECT_FLOAT_EQ(r->common.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r->common.sampling.top_p, 0.9f);
  EXPECT_FALSE(r->store);
  EXPECT_EQ(r->previous_response_id.value_or(""), "resp_1");
  EXPECT_FALSE(r->parallel_tool_calls);
  EXPECT_EQ(r->reasoning_effort.value_or(""), "low");
  EXPECT_EQ(r->reasoning_summary.value_or(""), "auto");
  EXPECT_EQ(r->metadata["k"], "v");
  EXPECT_TRUE(r->common.stream);
}

TEST(ResponsesRequest, ItemsBecomeChatMessages) {
  auto r = parse_responses_request(R"({"input":[
    {"role":"developer","content":"rules"},
    {"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},
    {"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"think"}]},
    {"type":"message","role":"assistant","content":[{"type":"output_text","text":"calling"}]},
    {"type":"function_call","call_id":"call_1","name":"f","arguments":"{\"x\":1}"},
    {"type":"function_call","call_id":"call_2","name":"g","arguments":"{}"},
    {"type":"function_call_output","call_id":"call_1","output":"one"},
    {"type":"function_call_output","call_id":"call_2","output":[{"type":"input_text","text":"two"}]},
    {"role":"user","content":"next"}]})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto& m = r->input;
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_EQ(m[0].content.value_or(""), "rules");
  EXPECT_EQ(m[1].role, "user");
  EXPECT_EQ(m[1].content.value_or(""), "ab");
  EXPECT_EQ(m[2].role, "assistant");
  EXPECT_EQ(m[2].reasoning_content.value_or(""), "think");
  EXPECT_EQ(m[2].content.value_or(""), "calling");
  ASSERT_EQ(m[2].tool_calls.size(), 2u);
  EXPECT_EQ(m[2].tool_calls[0].id, "call_1");
  EXPECT_EQ(m[2].tool_calls[0].name, "f");
  EXPECT_EQ(m[2].tool_calls[0].arguments, "{\"x\":1}");  // the client's string, kept
  ASSERT_TRUE(m[2].tool_calls[0].arguments_object.has_value());
  EXPECT_EQ((*m[2].tool_calls[0].arguments_object)["x"], 1);
  EXPECT_EQ(m[2].tool_calls[1].name, "g");
  EXPECT_EQ(m[3].role, "tool");
  EXPECT_EQ(m[3].tool_call_id.value_or(""), "call_1");
  EXPECT_EQ(m[3].content.value_or(""), "one");
  EXPECT_EQ(m[4].content.value_or(""), "two");
  EXPECT_EQ(m[5].role, "user");
}

TEST(ResponsesRequest, FunctionCallWithoutMessageOpensAnAssistantTurn) {
  auto r = parse_responses_request(R"({"input":[{"role":"user","content":"q"},
    {"type":"reasoning","summary":[{"type":"summary_text","text":"s"}]},
    {"type":"function_call","call_id":"c","name":"f","arguments":"{}","namespace":"ns"}]})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->input.size(), 2u);
  EXPECT_EQ(r->input[1].role, "assistant");
  EXPECT_EQ(r->input[1].reasoning_content.value_or(""), "s");
  ASSERT_EQ(r->input[1].tool_calls.size(), 1u);
  EXPECT_EQ(r->input[1].tool_calls[0].name, "ns.f");
}

TEST(ResponsesRequest, ToolsFlatAndNamespaced) {
  auto r = parse_responses_request(R"({"input":"x","tools":[
    {"type":"function","name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":true},
    {"type":"namespace","name":"fs","description":"files","tools":[{"type":"function","name":"read"}]}],
    "tool_choice":"auto"})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->tools.size(), 2u);
  EXPECT_EQ(r->tools[0].name, "get_weather");
  EXPECT_EQ(r->tools[0].definition["type"], "function");
  EXPECT_EQ(r->tools[0].definition["function"]["name"], "get_weather");
  EXPECT_EQ(r->tools[0].definition["function"]["description"], "Weather");
  EXPECT_EQ(r->tools[0].definition["function"]["parameters"]["properties"]["city"]["type"], "string");
  EXPECT_EQ(r->tools[1].name, "fs.read");
  EXPECT_EQ(r->tools_json.size(), 2u);

  ChatRequest chat = to_chat_request(*r, {});
  EXPECT_TRUE(chat.tools_callable());
  ASSERT_EQ(chat.messages.size(), 1u);
}

TEST(ResponsesRequest, ToChatRequestOrdersInstructionsHistoryInput) {
  auto r = parse_responses_request(R"({"input":"now","instructions":"sys","max_output_tokens":5,"reasoning":{"effort":"none"}})");
  ASSERT_TRUE(r.ok());
  ChatMessage old_user;
  old_user.role = "user";
  old_user.content = "before";
  ChatMessage old_answer;
  old_answer.role = "assistant";
  old_answer.content = "answer";
  ChatRequest chat = to_chat_request(*r, {old_user, old_answer});
  ASSERT_EQ(chat.messages.size(), 4u);
  EXPECT_EQ(chat.messages[0].role, "system");
  EXPECT_EQ(chat.messages[0].content.value_or(""), "sys");
  EXPECT_EQ(chat.messages[1].content.value_or(""), "before");
  EXPECT_EQ(chat.messages[2].content.value_or(""), "answer");
  EXPECT_EQ(chat.messages[3].content.value_or(""), "now");
  EXPECT_EQ(chat.max_tokens.value_or(0), 5);
  EXPECT_EQ(chat.reasoning_effort.value_or(""), "none");
}

// Each refused body and a piece of the message that names the field.
TEST(ResponsesRequest, RefusalsNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({})", "'input' is required"},
      {R"({"input":[]})", "'input'"},
      {R"({"input":5})", "'input'"},
      {R"({"input":[{"type":"item_reference","id":"x"}]})", "'input[0].type'"},
      {R"({"input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]})", "'input[0].content[0].type'"},
      {R"({"input":[{"role":"user","content":[{"type":"input_file"}]}]})", "'input[0].content[0].type'"},
      {R"({"input":[{"role":"tool","content":"x"}]})", "'input[0].role'"},
      {R"({"input":[{"role":"user"}]})", "'input[0].content'"},
      {R"({"input":[{"type":"function_call","name":"f"}]})", "'input[0].call_id'"},
      {R"({"input":[{"type":"function_call_output","call_id":"c"}]})", "'input[0].output'"},
      {R"({"input":"x","tools":[{"type":"web_search"}]})", "'tools[0].type'"},
      {R"({"input":"x","tools":[{"type":"function"}]})", "'tools[0].name'"},
      {R"({"input":"x","tools":[{"type":"function","name":"f","parameters":3}]})", "'tools[0].parameters'"},
      {R"({"input":"x","tools":[{"type":"function","name":"f"},{"type":"function","name":"f"}]})", "declared twice"},
      {R"({"input":"x","tool_choice":"required"})", "'tool_choice'"},
      {R"({"input":"x","tool_choice":{"type":"file_search"}})", "'tool_choice.type'"},
      {R"({"input":"x","text":{"format":{"type":"json_schema","name":"n"}}})", "'text.format.schema' is required"},
      {R"({"input":"x","text":{"format":{"type":"json_schema","name":"n","schema":3}}})", "'text.format.schema' must be an object"},
      {R"({"input":"x","text":{"format":{"type":"json_object"}},"regex":"a"})", "cannot be combined"},
      {R"({"input":"x","text":{"format":{"type":"xml"}}})", "'text.format.type'"},
      {R"({"input":"x","conversation":"conv_1"})", "'conversation'"},
      {R"({"input":"x","background":true})", "'background'"},
      {R"({"input":"x","truncation":"auto"})", "'truncation'"},
      {R"({"input":"x","context_management":[{"type":"compaction"}]})", "'context_management'"},
      {R"({"input":"x","prompt":{"id":"p"}})", "'prompt'"},
      {R"({"input":"x","max_tool_calls":3})", "'max_tool_calls'"},
      {R"({"input":"x","top_logprobs":2})", "'top_logprobs'"},
      {R"({"input":"x","max_output_tokens":0})", "'max_output_tokens'"},
      {R"({"input":"x","temperature":3})", "'temperature'"},
      {R"({"input":"x","reasoning":{"effort":"huge"}})", "'reasoning.effort'"},
      {R"({"input":"x","store":"yes"})", "'store'"},
      {R"({"input":"x","previous_response_id":5})", "'previous_response_id'"},
      {R"({"input":"x","metadata":{"k":1}})", "'metadata.k'"},
      {R"({"input":"x","instructions":["a"]})", "'instructions'"},
      {R"({"input":"x","stop":"s","tools":[{"type":"function","name":"f"}]})", "'stop'"},
  };
  for (const auto& [body, needle] : cases) {
    auto r = parse_responses_request(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.error().status, 400) << body;
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << body << " -> " << r.error().message;
  }
  // Allowed values of the same fields.
  for (const char* body : {R"({"input":"x","truncation":"disabled","background":false,"top_logprobs":0})",
                           R"({"input":"x","unknown_field":{"a":1},"service_tier":"auto","user":"u"})"}) {
    auto r = parse_responses_request(body);
    EXPECT_TRUE(r.ok()) << body << ": " << r.error().message;
  }
}

// Every cut of a rich body (each prefix, each byte dropped) parses or answers a 400: no exception.
TEST(ResponsesRequest, DamagedBodiesNeverThrow) {
  const std::string body = R"({"model":"m","instructions":"i","input":[{"role":"user","content":[{"type":"input_text","text":"a"}]},
    {"type":"reasoning","summary":[{"type":"summary_text","text":"s"}],"content":[{"type":"reasoning_text","text":"r"}]},
    {"type":"function_call","call_id":"c","name":"f","arguments":"{\"x\":1}","namespace":"n"},
    {"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"o"}]}],
    "tools":[{"type":"function","name":"f","parameters":{"type":"object"}},{"type":"namespace","name":"n","tools":[{"type":"function","name":"f"}]}],
    "tool_choice":"auto","reasoning":{"effort":"low","summary":"auto"},"text":{"format":{"type":"text"}},"metadata":{"a":"b"},
    "max_output_tokens":5,"store":false,"previous_response_id":"resp_x"})";
  ASSERT_TRUE(parse_responses_request(body).ok()) << parse_responses_request(body).error().message;
  for (std::size_t i = 0; i < body.size(); ++i) {
    std::string cut = body.substr(0, i);
    std::string dropped = body.substr(0, i) + body.substr(i + 1);
    for (const std::string& b : {cut, dropped}) {
      auto r = parse_responses_request(b);
      if (!r.ok()) {
        EXPECT_EQ(r.error().status, 400) << b;
      }
    }
  }
}

// --- store ----------------------------------------------------------------------------------------

StoredResponse entry(const std::string& id, std::size_t text_bytes = 10) {
  StoredResponse e;
  e.id = id;
  e.response = {{"id", id}};
  ChatMessage m;
  m.role = "user";
  m.content = std::string(text_bytes, 'x');
  e.conversation.push_back(std::move(m));
  return e;
}

TEST(ResponseStore, PutGetErase) {
  ResponseStore store;
  EXPECT_TRUE(store.put(entry("a")));
  auto got = store.get("a");
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->response["id"], "a");
  EXPECT_EQ(got->conversation[0].content.value_or("").size(), 10u);
  EXPECT_EQ(store.get("b"), nullptr);
  EXPECT_TRUE(store.erase("a"));
  EXPECT_FALSE(store.erase("a"));
  EXPECT_EQ(store.get("a"), nullptr);
  // The reader's copy outlives the erase.
  EXPECT_EQ(got->id, "a");
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.bytes(), 0u);
}

TEST(ResponseStore, EvictsLeastRecentlyUsedByCount) {
  ResponseStore store(/*max_entries=*/2, /*max_bytes=*/1 << 20);
  store.put(entry("a"));
  store.put(entry("b"));
  ASSERT_NE(store.get("a"), nullptr);  // a is now more recent than b
  store.put(entry("c"));
  EXPECT_NE(store.get("a"), nullptr);
  EXPECT_EQ(store.get("b"), nullptr);
  EXPECT_NE(store.get("c"), nullptr);
  EXPECT_EQ(store.size(), 2u);
}

TEST(ResponseStore, EvictsByBytesAndRefusesOversizedEntries) {
  const std::size_t one = stored_response_bytes(entry("a", 1000));
  ResponseStore store(/*max_entries=*/100, /*max_bytes=*/one * 3);
  for (const char* id : {"a", "b", "c", "d"}) EXPECT_TRUE(store.put(entry(id, 1000)));
  EXPECT_EQ(store.size(), 3u);
  EXPECT_EQ(store.get("a"), nullptr);
  EXPECT_LE(store.bytes(), one * 3);
  EXPECT_FALSE(store.put(entry("huge", one * 4)));
  EXPECT_EQ(store.get("huge"), nullptr);
  EXPECT_EQ(store.size(), 3u);  // nothing evicted for an entry that cannot fit
  // Replacing an id does not count it twice.
  EXPECT_TRUE(store.put(entry("d", 1000)));
  EXPECT_EQ(store.size(), 3u);
  EXPECT_EQ(store.bytes(), one * 3);
}

// --- event writer ---------------------------------------------------------------------------------

ResponseSettings settings() {
  ResponseSettings s;
  s.id = "resp_test";
  s.created_at = 1700000000;
  s.model = "tiny";
  s.id_seed = 1;
  s.namespaces = {"fs"};
  return s;
}

OutputPart text_part(OutputPart::Kind kind, std::string text) {
  OutputPart p;
  p.kind = kind;
  p.text = std::move(text);
  return p;
}

OutputPart call_part(int index, std::string id, std::string name, std::string args) {
  OutputPart p;
  p.kind = OutputPart::Kind::kToolCall;
  p.call.index = index;
  p.call.id = std::move(id);
  p.call.name = std::move(name);
  p.call.arguments = std::move(args);
  return p;
}

std::vector<ojson> payloads(const std::vector<ResponseEvent>& events) {
  std::vector<ojson> out;
  for (const ResponseEvent& e : events) {
    ojson j = ojson::parse(e.data);
    EXPECT_EQ(j["type"], e.type);
    out.push_back(std::move(j));
  }
  return out;
}

std::vector<std::string> types(const std::vector<ojson>& events) {
  std::vector<std::string> out;
  for (const ojson& e : events) out.push_back(e["type"].get<std::string>());
  return out;
}

TEST(ResponseEvents, ReasoningTextAndCallsInOrderWithSequenceNumbers) {
  ResponseEvents w(settings());
  std::vector<ResponseEvent> all = w.start();
  auto add = [&](std::vector<ResponseEvent> more) { all.insert(all.end(), more.begin(), more.end()); };
  add(w.feed({text_part(OutputPart::Kind::kReasoning, "let me ")}));
  add(w.feed({text_part(OutputPart::Kind::kReasoning, "think")}));
  add(w.feed({text_part(OutputPart::Kind::kContent, "Hello")}));
  add(w.feed({text_part(OutputPart::Kind::kContent, " world"), call_part(0, "call_A", "get_weather", "{\"city\":")}));
  add(w.feed({call_part(0, "", "", "\"Paris\"}"), call_part(1, "call_B", "fs.read", "{}")}));
  GenerationStats stats;
  stats.prompt_tokens = 100;
  stats.cached_tokens = 96;
  stats.completion_tokens = 20;
  add(w.finish(FinishReason::kStop, stats, 3));

  std::vector<ojson> ev = payloads(all);
  const std::vector<std::string> expected = {
      "response.created", "response.in_progress",
      "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
      "response.reasoning_text.delta", "response.reasoning_text.done", "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added", "response.content_part.added", "response.output_text.delta",
      "response.output_text.delta", "response.output_text.done", "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta",
      "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
      "response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed"};
  EXPECT_EQ(types(ev), expected);
  for (std::size_t i = 0; i < ev.size(); ++i) EXPECT_EQ(ev[i]["sequence_number"], static_cast<int64_t>(i));

  EXPECT_EQ(ev[0]["response"]["status"], "in_progress");
  EXPECT_EQ(ev[0]["response"]["id"], "resp_test");
  EXPECT_TRUE(ev[0]["response"]["output"].empty());
  // Reasoning item.
  EXPECT_EQ(ev[2]["output_index"], 0);
  EXPECT_EQ(ev[2]["item"]["type"], "reasoning");
  EXPECT_EQ(ev[3]["part"]["type"], "reasoning_text");
  EXPECT_EQ(ev[6]["text"], "let me think");
  EXPECT_EQ(ev[8]["item"]["content"][0]["text"], "let me think");
  EXPECT_EQ(ev[8]["item"]["status"], "completed");
  EXPECT_EQ(ev[8]["item"]["summary"], ojson::array());
  EXPECT_EQ(ev[8]["item"]["id"].get<std::string>().rfind("rs_", 0), 0u);
  // Message item.
  const std::string msg_id = ev[9]["item"]["id"];
  EXPECT_EQ(msg_id.rfind("msg_", 0), 0u);
  EXPECT_EQ(ev[9]["item"]["role"], "assistant");
  EXPECT_EQ(ev[9]["item"]["content"], ojson::array());
  EXPECT_EQ(ev[10]["part"]["type"], "output_text");
  EXPECT_EQ(ev[11]["item_id"], msg_id);
  EXPECT_EQ(ev[11]["delta"], "Hello");
  EXPECT_EQ(ev[11]["output_index"], 1);
  EXPECT_EQ(ev[11]["content_index"], 0);
  EXPECT_EQ(ev[13]["text"], "Hello world");
  EXPECT_EQ(ev[15]["item"]["content"][0]["text"], "Hello world");
  // First call: arguments streamed then whole in .done and in output_item.done.
  EXPECT_EQ(ev[16]["item"]["type"], "function_call");
  EXPECT_EQ(ev[16]["item"]["call_id"], "call_A");
  EXPECT_EQ(ev[16]["item"]["name"], "get_weather");
  EXPECT_EQ(ev[16]["item"]["arguments"], "");
  EXPECT_EQ(ev[16]["item"]["status"], "in_progress");
  EXPECT_EQ(ev[19]["arguments"], "{\"city\":\"Paris\"}");
  EXPECT_EQ(ev[19]["name"], "get_weather");
  const ojson& done_call = ev[20]["item"];
  EXPECT_EQ(done_call["arguments"], "{\"city\":\"Paris\"}");
  EXPECT_EQ(done_call["status"], "completed");
  EXPECT_EQ(done_call["id"].get<std::string>().rfind("fc_", 0), 0u);
  // Namespaced call.
  EXPECT_EQ(ev[24]["item"]["name"], "read");
  EXPECT_EQ(ev[24]["item"]["namespace"], "fs");
  EXPECT_EQ(ev[24]["item"]["call_id"], "call_B");
  // completed: the whole response with usage.
  const ojson& resp = ev.back()["response"];
  EXPECT_EQ(resp["status"], "completed");
  ASSERT_EQ(resp["output"].size(), 4u);
  EXPECT_EQ(resp["usage"]["input_tokens"], 100);
  EXPECT_EQ(resp["usage"]["input_tokens_details"]["cached_tokens"], 96);
  EXPECT_EQ(resp["usage"]["output_tokens"], 20);
  EXPECT_EQ(resp["usage"]["output_tokens_details"]["reasoning_tokens"], 3);
  EXPECT_EQ(resp["usage"]["total_tokens"], 120);
  EXPECT_TRUE(resp["incomplete_details"].is_null());
  EXPECT_EQ(w.body()["output_text"], "Hello world");

  ChatMessage turn = w.assistant_turn();
  EXPECT_EQ(turn.role, "assistant");
  EXPECT_EQ(turn.reasoning_content.value_or(""), "let me think");
  EXPECT_EQ(turn.content.value_or(""), "Hello world");
  ASSERT_EQ(turn.tool_calls.size(), 2u);
  EXPECT_EQ(turn.tool_calls[0].id, "call_A");
  EXPECT_EQ(turn.tool_calls[0].arguments, "{\"city\":\"Paris\"}");
  EXPECT_EQ(turn.tool_calls[1].name, "fs.read");
  // Nothing more after the end.
  EXPECT_TRUE(w.feed({text_part(OutputPart::Kind::kContent, "late")}).empty());
  EXPECT_TRUE(w.finish(FinishReason::kStop, stats, 0).empty());
}

TEST(ResponseEvents, TokenLimitMakesTheResponseIncomplete) {
  ResponseEvents w(settings());
  (void)w.start();
  (void)w.feed({text_part(OutputPart::Kind::kContent, "cut")});
  GenerationStats stats;
  stats.completion_tokens = 1;
  std::vector<ojson> ev = payloads(w.finish(FinishReason::kLength, stats, 0));
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[2]["item"]["status"], "incomplete");
  EXPECT_EQ(ev[3]["type"], "response.incomplete");
  EXPECT_EQ(ev[3]["response"]["status"], "incomplete");
  EXPECT_EQ(ev[3]["response"]["incomplete_details"]["reason"], "max_output_tokens");
  // created, in_progress, item added, part added, delta (0-4), then text.done, part.done, item.done.
  EXPECT_EQ(ev[3]["sequence_number"], 8);
}

TEST(ResponseEvents, FailureAndProgress) {
  ResponseSettings s = settings();
  s.return_progress = true;
  ResponseEvents w(s);
  (void)w.start();
  auto p = w.progress(PromptProgress{10, 2, 6, 1.5});
  ASSERT_TRUE(p.has_value());
  ojson pj = ojson::parse(p->data);
  EXPECT_EQ(pj["type"], "response.in_progress");
  EXPECT_EQ(pj["prompt_progress"]["processed"], 6);
  EXPECT_EQ(pj["sequence_number"], 2);
  std::vector<ojson> ev = payloads(w.fail(api_error(504, "request_timeout", "too slow"), GenerationStats{}, 0));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0]["type"], "response.failed");
  EXPECT_EQ(ev[0]["response"]["status"], "failed");
  EXPECT_EQ(ev[0]["response"]["error"]["code"], "request_timeout");
  EXPECT_EQ(ev[0]["response"]["error"]["message"], "too slow");

  ResponseEvents quiet(settings());  // no return_progress: no progress events
  (void)quiet.start();
  EXPECT_FALSE(quiet.progress(PromptProgress{10, 2, 6, 1.5}).has_value());
}

// The writer driven by ChatOutput over real model text, as the route does it.
TEST(ResponseEvents, FromChatOutputWithQwenToolCall) {
  ChatOutputOptions opts;
  opts.parse_tool_calls = true;
  opts.id_seed = 3;
  ChatOutput out(opts);
  ResponseEvents w(settings());
  std::vector<ResponseEvent> all = w.start();
  for (const char* piece : {"<think>\nhm\n</think>\n\n", "<tool_call>\n{\"name\": \"f\", ", "\"arguments\": {\"a\": 1}}\n</tool_call>"}) {
    auto more = w.feed(out.feed(piece, 1));
    all.insert(all.end(), more.begin(), more.end());
  }
  auto more = w.feed(out.finish());
  all.insert(all.end(), more.begin(), more.end());
  more = w.finish(FinishReason::kStop, GenerationStats{}, out.reasoning_tokens());
  all.insert(all.end(), more.begin(), more.end());
  const std::vector<ojson> ev = payloads(all);
  const ojson& resp = ev.back()["response"];
  ASSERT_EQ(resp["output"].size(), 2u) << resp.dump();
  EXPECT_EQ(resp["output"][0]["type"], "reasoning");
  EXPECT_EQ(resp["output"][0]["content"][0]["text"], "hm");
  EXPECT_EQ(resp["output"][1]["type"], "function_call");
  EXPECT_EQ(resp["output"][1]["name"], "f");
  EXPECT_EQ(ojson::parse(resp["output"][1]["arguments"].get<std::string>())["a"], 1);
  EXPECT_EQ(resp["output"][1]["call_id"].get<std::string>().rfind("call_", 0), 0u);
}

// Random part sequences: sequence numbers run 0, 1, 2 ...; items open and close in order; the
// final output lists every item once, with the streamed text.
TEST(ResponseEvents, RandomPartSequencesKeepTheInvariants) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    ResponseEvents w(settings());
    std::vector<ResponseEvent> all = w.start();
    int calls = 0;
    const int n = static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) {
      std::vector<OutputPart> parts;
      switch (rng() % 4) {
        case 0: parts.push_back(text_part(OutputPart::Kind::kReasoning, "r" + std::to_string(i))); break;
        case 1: parts.push_back(text_part(OutputPart::Kind::kContent, "c" + std::to_string(i))); break;
        case 2: parts.push_back(call_part(calls, "call_" + std::to_string(calls), "f", "{")); ++calls; break;
        default:
          if (calls > 0) parts.push_back(call_part(calls - 1, "", "", "}"));
          break;
      }
      auto more = w.feed(parts);
      all.insert(all.end(), more.begin(), more.end());
    }
    const FinishReason end = rng() % 2 ? FinishReason::kStop : FinishReason::kLength;
    auto more = w.finish(end, GenerationStats{}, 0);
    all.insert(all.end(), more.begin(), more.end());
    std::vector<ojson> ev = payloads(all);
    int open = -1, next = 0;
    std::vector<ojson> done_items;
    for (std::size_t i = 0; i < ev.size(); ++i) {
      ASSERT_EQ(ev[i]["sequence_number"], static_cast<int64_t>(i));
      const std::string type = ev[i]["type"];
      if (type == "response.output_item.added") {
        ASSERT_EQ(open, -1);
        ASSERT_EQ(ev[i]["output_index"], next);
        open = next++;
      } else if (type == "response.output_item.done") {
        ASSERT_EQ(ev[i]["output_index"], open);
        done_items.push_back(ev[i]["item"]);
        open = -1;
      } else if (type.find(".delta") != std::string::npos || type.find("content_part") != std::string::npos) {
        ASSERT_EQ(ev[i]["output_index"], open) << type;
      }
    }
    ASSERT_EQ(open, -1);
    const ojson& resp = ev.back()["response"];
    EXPECT_EQ(ev.back()["type"], end == FinishReason::kStop ? "response.completed" : "response.incomplete");
    EXPECT_EQ(resp["output"], ojson(done_items));
  }
}

TEST(ResponseEvents, SseFrameNamesTheEvent) {
  EXPECT_EQ(sse_frame(ResponseEvent{"response.created", R"({"type":"response.created"})"}),
            "event: response.created\ndata: {\"type\":\"response.created\"}\n\n");
}

}  // namespace
}  // namespace splash::openai
