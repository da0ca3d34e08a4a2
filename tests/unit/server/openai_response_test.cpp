// Response bodies and stream chunks against golden JSON written by hand from the OpenAI API reference
// and spec 2.6 (field names, order, nulls).
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/openai/response.h"

namespace splash::openai {
namespace {

using ojson = nlohmann::ordered_json;

ResponseMeta meta(const char* id) { return ResponseMeta{id, 1700000000, "qwen3-0.6b"}; }

GenerationStats stats() {
  GenerationStats s;
  s.prompt_tokens = 120;
  s.cached_tokens = 100;
  s.completion_tokens = 11;
  s.prompt_ms = 40.0;
  s.predicted_ms = 200.0;
  return s;
}

constexpr const char* kUsage =
    R"("usage":{"prompt_tokens":120,"completion_tokens":11,"total_tokens":131,"prompt_tokens_details":{"cached_tokens":100})";
// prompt_n = 120 - 100 cached; 20 tokens in 40 ms = 500/s; 10 decode intervals in 200 ms = 50/s.
constexpr const char* kTimings =
    R"("timings":{"prompt_n":20,"cache_n":100,"prompt_ms":40.0,"prompt_per_second":500.0,"predicted_n":11,"predicted_ms":200.0,"predicted_per_second":50.0})";

ChatOutputOptions tool_options() {
  ChatOutputOptions o;
  o.parse_tool_calls = true;
  o.id_seed = 42;
  o.tools = {Tool{"get_weather", ojson::parse(R"({"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"days":{"type":"integer"}}}}})")}};
  return o;
}

TEST(OpenAiResponse, ChatCompletionBodyWithReasoning) {
  ChatOutput out(ChatOutputOptions{});
  (void)out.feed("<think>\nhm\n</think>\n\n", 4);
  (void)out.feed("Hello \"world\"", 7);
  (void)out.finish();
  std::string body = chat_completion_body(meta("chatcmpl-1"), out, FinishReason::kStop, stats());
  EXPECT_EQ(body, std::string(R"({"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"qwen3-0.6b",)"
                              R"("choices":[{"index":0,"message":{"role":"assistant","content":"Hello \"world\"","reasoning_content":"hm"},"finish_reason":"stop"}],)") +
                      kUsage + R"(,"completion_tokens_details":{"reasoning_tokens":4}},)" + kTimings + "}");
}

TEST(OpenAiResponse, ChatCompletionBodyWithToolCalls) {
  ChatOutput out(tool_options());
  IdGenerator ids(42);
  std::string call_id = ids.next("call_");  // the parser draws from the same seeded sequence
  (void)out.feed("<tool_call>\n<function=get_weather>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>", 11);
  (void)out.finish();
  std::string body = chat_completion_body(meta("chatcmpl-2"), out, FinishReason::kStop, stats());
  EXPECT_EQ(body, std::string(R"({"id":"chatcmpl-2","object":"chat.completion","created":1700000000,"model":"qwen3-0.6b",)"
                              R"("choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":")") +
                      call_id + R"(","type":"function","function":{"name":"get_weather","arguments":"{\"days\": 2}"}}]},"finish_reason":"tool_calls"}],)" +
                      kUsage + R"(,"completion_tokens_details":{"reasoning_tokens":0}},)" + kTimings + "}");
  // Cut by the limit: the partial call stays, and the reason is "length".
  ChatOutput cut(tool_options());
  (void)cut.feed("<tool_call>\n<function=get_weather>\n<parameter=days>\n2", 5);
  (void)cut.finish();
  auto j = ojson::parse(chat_completion_body(meta("x"), cut, FinishReason::kLength, stats()));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], R"({"days": 2})");
}

TEST(OpenAiResponse, TextCompletionBody) {
  std::string body = text_completion_body(meta("cmpl-1"), "Once upon a time", FinishReason::kLength, stats());
  EXPECT_EQ(body, std::string(R"({"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"qwen3-0.6b",)"
                              R"("choices":[{"index":0,"text":"Once upon a time","logprobs":null,"finish_reason":"length"}],)") +
                      kUsage + "}," + kTimings + "}");
}

TEST(OpenAiResponse, FinishReasonsAndErrors) {
  EXPECT_EQ(finish_reason(FinishReason::kStop, false), "stop");
  EXPECT_EQ(finish_reason(FinishReason::kStop, true), "tool_calls");
  EXPECT_EQ(finish_reason(FinishReason::kLength, true), "length");
  EXPECT_EQ(finish_reason(FinishReason::kContext, false), "length");
  EXPECT_FALSE(generation_error(FinishReason::kStop, "").has_value());
  EXPECT_FALSE(generation_error(FinishReason::kContext, "").has_value());
  auto timeout = generation_error(FinishReason::kTimeout, "");
  ASSERT_TRUE(timeout.has_value());
  EXPECT_EQ(timeout->status, 504);
  EXPECT_EQ(timeout->code, "request_timeout");
  EXPECT_EQ(timeout->type, "server_error");
  auto failed = generation_error(FinishReason::kError, "out of KV pages");
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->status, 500);
  EXPECT_EQ(failed->code, "engine_failed");
  EXPECT_EQ(failed->message, "out of KV pages");
  EXPECT_EQ(generation_error(FinishReason::kCancelled, "")->status, 503);
  auto late = generation_error(FinishReason::kError, "mask_timeout: the structured-output mask was not ready within 5000 ms");
  ASSERT_TRUE(late.has_value());
  EXPECT_EQ(late->status, 503);
  EXPECT_EQ(late->code, "mask_timeout");
  EXPECT_EQ(error_chunk(*failed), R"({"error":{"message":"out of KV pages","type":"server_error","code":"engine_failed"}})");
}

TEST(OpenAiResponse, TimingsWithoutTimeDoNotDivideByZero) {
  GenerationStats s;
  s.prompt_tokens = 3;
  s.completion_tokens = 1;
  EXPECT_EQ(timings_json(s).dump(),
            R"({"prompt_n":3,"cache_n":0,"prompt_ms":0.0,"prompt_per_second":0.0,"predicted_n":1,"predicted_ms":0.0,"predicted_per_second":0.0})");
}

constexpr const char* kHead = R"({"id":"chatcmpl-9","object":"chat.completion.chunk","created":1700000000,"model":"qwen3-0.6b","choices":[{"index":0,)";

std::string delta(const std::string& d, const std::string& finish = "null") {
  return std::string(kHead) + R"("delta":)" + d + R"(,"finish_reason":)" + finish + "}]}";
}

TEST(OpenAiResponse, ChatStreamChunks) {
  ChatStream s(meta("chatcmpl-9"), ChatOutputOptions{}, StreamOptions{true, true});
  EXPECT_EQ(s.start(), delta(R"({"role":"assistant","content":""})"));
  auto progress = s.progress(PromptProgress{120, 100, 110, 12.5});
  ASSERT_TRUE(progress.has_value());
  EXPECT_EQ(*progress, std::string(kHead) + R"("delta":{},"finish_reason":null}],"prompt_progress":{"total":120,"cache":100,"processed":110,"time_ms":12.5}})");
  EXPECT_EQ(s.keepalive(), delta("{}"));
  EXPECT_EQ(s.text("<think>\nwhy", 2), std::vector<std::string>{delta(R"({"reasoning_content":"why"})")});
  EXPECT_EQ(s.text("</think>\n\nHi", 2), std::vector<std::string>{delta(R"({"content":"Hi"})")});
  EXPECT_TRUE(s.text("", 0).empty());
  auto end = s.finish(FinishReason::kStop, stats());
  ASSERT_EQ(end.size(), 2u);
  EXPECT_EQ(end[0], std::string(kHead) + R"("delta":{},"finish_reason":"stop"}],)" + kTimings + "}");
  EXPECT_EQ(end[1], std::string(R"({"id":"chatcmpl-9","object":"chat.completion.chunk","created":1700000000,"model":"qwen3-0.6b","choices":[],)") +
                        kUsage + R"(,"completion_tokens_details":{"reasoning_tokens":4}}})");
}

TEST(OpenAiResponse, ChatStreamToolCallDeltasAndNoExtras) {
  ChatStream s(meta("chatcmpl-9"), tool_options(), StreamOptions{false, false});
  IdGenerator ids(42);
  std::string call_id = ids.next("call_");
  EXPECT_FALSE(s.progress(PromptProgress{1, 0, 1, 1}).has_value());
  auto a = s.text("<tool_call>\n<function=get_weather>\n<parameter=days>\n3\n</parameter>\n", 9);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0], delta(std::string(R"({"tool_calls":[{"index":0,"id":")") + call_id +
                        R"(","type":"function","function":{"name":"get_weather","arguments":""}}]})"));
  EXPECT_EQ(a[1], delta(R"({"tool_calls":[{"index":0,"function":{"arguments":"{\"days\": 3"}}]})"));
  auto b = s.text("</function>\n</tool_call>", 2);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0], delta(R"({"tool_calls":[{"index":0,"function":{"arguments":"}"}}]})"));
  auto end = s.finish(FinishReason::kStop, stats());
  ASSERT_EQ(end.size(), 1u);  // no usage chunk without include_usage
  EXPECT_EQ(end[0], std::string(kHead) + R"("delta":{},"finish_reason":"tool_calls"}],)" + kTimings + "}");
}

TEST(OpenAiResponse, CompletionStreamChunks) {
  CompletionStream s(meta("cmpl-3"), StreamOptions{true, true});
  std::string head = R"({"id":"cmpl-3","object":"text_completion","created":1700000000,"model":"qwen3-0.6b","choices":[{"index":0,)";
  EXPECT_EQ(*s.progress(PromptProgress{5, 0, 5, 3.0}),
            head + R"("text":"","logprobs":null,"finish_reason":null}],"prompt_progress":{"total":5,"cache":0,"processed":5,"time_ms":3.0}})");
  EXPECT_EQ(*s.text(" there"), head + R"("text":" there","logprobs":null,"finish_reason":null}]})");
  EXPECT_FALSE(s.text("").has_value());
  auto end = s.finish(FinishReason::kContext, stats());
  ASSERT_EQ(end.size(), 2u);
  EXPECT_EQ(end[0], head + R"("text":"","logprobs":null,"finish_reason":"length"}],)" + kTimings + "}");
  EXPECT_EQ(end[1], std::string(R"({"id":"cmpl-3","object":"text_completion","created":1700000000,"model":"qwen3-0.6b","choices":[],)") + kUsage + "}}");
}

}  // namespace
}  // namespace splash::openai
