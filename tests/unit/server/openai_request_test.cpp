// Request validation of the OpenAI schema layer: every rule of spec 2.4 as a table of bodies and the
// error each must produce (status, code, and the field named in the message), plus the defaults.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server/openai/json_input.h"
#include "server/openai/request.h"

namespace splash::openai {
namespace {

constexpr const char* kMsgs = R"("messages":[{"role":"user","content":"hi"}])";

std::string chat(const std::string& extra) {
  return std::string("{") + kMsgs + (extra.empty() ? "" : "," + extra) + "}";
}

// 1e10 s used to wrap the nanosecond deadline into the past (504 in 0 ms); that long means none.
TEST(OpenAiRequest, HugeTimeoutMeansNoDeadline) {
  for (const char* t : {"1e9", "1e10", "1e300"}) {
    auto r = parse_chat_request(chat(std::string("\"timeout\":") + t));
    ASSERT_TRUE(r.ok()) << t << ": " << r.error().message;
    EXPECT_FALSE(r->common.timeout_s.has_value()) << t;
  }
  auto r = parse_chat_request(chat("\"timeout\":999999999"));
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->common.timeout_s.value_or(0), 999999999.0);
}

TEST(OpenAiRequest, ChatDefaults) {
  auto r = parse_chat_request(chat(""));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ChatRequest& c = *r;
  EXPECT_FALSE(c.common.model.has_value());
  EXPECT_FALSE(c.common.stream);
  EXPECT_FALSE(c.common.include_usage);
  EXPECT_FALSE(c.common.return_progress);
  EXPECT_FALSE(c.common.timeout_s.has_value());
  EXPECT_TRUE(c.common.stop.empty());
  EXPECT_FALSE(c.common.ignore_eos);
  EXPECT_EQ(c.common.priority, "normal");
  EXPECT_FLOAT_EQ(c.common.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(c.common.sampling.top_p, 0.95f);
  EXPECT_EQ(c.common.sampling.top_k, 20);
  EXPECT_FLOAT_EQ(c.common.sampling.min_p, 0.0f);
  EXPECT_FLOAT_EQ(c.common.sampling.presence_penalty, 0.0f);
  EXPECT_FLOAT_EQ(c.common.sampling.frequency_penalty, 0.0f);
  EXPECT_FLOAT_EQ(c.common.sampling.repetition_penalty, 1.0f);
  EXPECT_FALSE(c.common.sampling.seed.has_value());
  EXPECT_FALSE(c.max_tokens.has_value());
  EXPECT_TRUE(c.tools.empty());
  EXPECT_TRUE(c.parallel_tool_calls);
  EXPECT_FALSE(c.reasoning_effort.has_value());
  EXPECT_TRUE(c.chat_template_kwargs.is_object() && c.chat_template_kwargs.empty());
  ASSERT_EQ(c.messages.size(), 1u);
  EXPECT_EQ(c.messages[0].role, "user");
  EXPECT_EQ(c.messages[0].content.value_or("?"), "hi");

  SamplingParams p = to_sampling_params(c.common.sampling);
  EXPECT_FLOAT_EQ(p.temperature, 1.0f);
  EXPECT_FLOAT_EQ(p.top_p, 0.95f);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_TRUE(p.validate().ok());
}

TEST(OpenAiRequest, ChatFieldsAreRead) {
  auto r = parse_chat_request(chat(
      R"("model":"m","stream":true,"stream_options":{"include_usage":true},"return_progress":true,)"
      R"("timeout":2.5,"stop":["a","b"],"ignore_eos":true,"priority":"background","temperature":0.5,)"
      R"("top_p":0.5,"top_k":-1,"min_p":0.1,"presence_penalty":-2,"frequency_penalty":2,)"
      R"("repetition_penalty":1.1,"seed":18446744073709551615,"max_completion_tokens":7,"max_tokens":99,)"
      R"("reasoning_effort":"xhigh","chat_template_kwargs":{"enable_thinking":false,"x":[1]},)"
      R"("parallel_tool_calls":false,"n":1,"logprobs":false,"logit_bias":{},"top_logprobs":0,)"
      R"("response_format":{"type":"text"},"unknown_field":{"deep":[1,2]},"user":"u1")"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ChatRequest& c = *r;
  EXPECT_EQ(c.common.model.value_or(""), "m");
  EXPECT_TRUE(c.common.stream);
  EXPECT_TRUE(c.common.include_usage);
  EXPECT_TRUE(c.common.return_progress);
  EXPECT_DOUBLE_EQ(c.common.timeout_s.value_or(0), 2.5);
  EXPECT_EQ(c.common.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(c.common.ignore_eos);
  EXPECT_EQ(c.common.priority, "background");
  EXPECT_FLOAT_EQ(c.common.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(c.common.sampling.top_p, 0.5f);
  EXPECT_EQ(c.common.sampling.top_k, 0);  // -1 = off
  EXPECT_FLOAT_EQ(c.common.sampling.min_p, 0.1f);
  EXPECT_FLOAT_EQ(c.common.sampling.presence_penalty, -2.0f);
  EXPECT_FLOAT_EQ(c.common.sampling.frequency_penalty, 2.0f);
  EXPECT_FLOAT_EQ(c.common.sampling.repetition_penalty, 1.1f);
  EXPECT_EQ(c.common.sampling.seed.value_or(0), 18446744073709551615ull);
  EXPECT_EQ(c.max_tokens.value_or(0), 7);  // max_completion_tokens wins over max_tokens
  EXPECT_EQ(c.reasoning_effort.value_or(""), "xhigh");
  EXPECT_EQ(c.chat_template_kwargs.dump(), R"({"enable_thinking":false,"x":[1]})");
  EXPECT_FALSE(c.parallel_tool_calls);
  SamplingParams p = to_sampling_params(c.common.sampling);
  EXPECT_EQ(p.seed.value_or(0), 18446744073709551615ull);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
}

TEST(OpenAiRequest, SmallTemperatureIsRaisedZeroStaysGreedy) {
  auto small = parse_chat_request(chat(R"("temperature":0.001)"));
  ASSERT_TRUE(small.ok());
  EXPECT_FLOAT_EQ(small->common.sampling.temperature, 0.01f);
  auto zero = parse_chat_request(chat(R"("temperature":0)"));
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->common.sampling.temperature, 0.0f);
  EXPECT_TRUE(to_sampling_params(zero->common.sampling).is_greedy());
  auto two = parse_chat_request(chat(R"("temperature":2)"));
  ASSERT_TRUE(two.ok());
  EXPECT_FLOAT_EQ(two->common.sampling.temperature, 2.0f);
}

TEST(OpenAiRequest, NullMeansNotSent) {
  auto r = parse_chat_request(chat(
      R"("model":null,"temperature":null,"top_p":null,"stop":null,"max_tokens":null,"seed":null,)"
      R"("tools":null,"tool_choice":null,"stream_options":null,"response_format":null,"n":null,"logit_bias":null)"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FLOAT_EQ(r->common.sampling.temperature, 1.0f);
  EXPECT_FALSE(r->max_tokens.has_value());
}

TEST(OpenAiRequest, IntegralFloatsCountAsIntegers) {
  auto r = parse_chat_request(chat(R"("max_tokens":16.0,"top_k":5.0,"seed":3.0)"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->max_tokens.value_or(0), 16);
  EXPECT_EQ(r->common.sampling.top_k, 5);
  EXPECT_EQ(r->common.sampling.seed.value_or(0), 3u);
}

struct BadCase {
  const char* body;     // full body
  const char* message;  // expected substring of the error message
};

class ChatRejects : public ::testing::TestWithParam<BadCase> {};

TEST_P(ChatRejects, With400NamingTheField) {
  auto r = parse_chat_request(std::string(GetParam().body));
  ASSERT_FALSE(r.ok()) << GetParam().body;
  EXPECT_EQ(r.error().status, 400);
  EXPECT_EQ(r.error().type, "invalid_request_error");
  EXPECT_EQ(r.error().code, "invalid_request_error");
  EXPECT_NE(r.error().message.find(GetParam().message), std::string::npos)
      << "message: " << r.error().message << "\nbody: " << GetParam().body;
}

#define M R"("messages":[{"role":"user","content":"hi"}])"
INSTANTIATE_TEST_SUITE_P(
    Table, ChatRejects,
    ::testing::Values(
        // body shape
        BadCase{"", "invalid JSON in request body"}, BadCase{"{", "invalid JSON in request body"},
        BadCase{"[1]", "request body must be a JSON object"}, BadCase{"\"x\"", "must be a JSON object"},
        BadCase{"{" M ",}", "invalid JSON"}, BadCase{"{" M "} trailing", "invalid JSON"},
        BadCase{"{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", "invalid JSON"},
        // types, one per field
        BadCase{"{" M ",\"temperature\":\"1\"}", "'temperature' must be a number"},
        BadCase{"{" M ",\"top_p\":true}", "'top_p' must be a number"},
        BadCase{"{" M ",\"top_k\":1.5}", "'top_k' must be an integer"},
        BadCase{"{" M ",\"min_p\":[]}", "'min_p' must be a number"},
        BadCase{"{" M ",\"presence_penalty\":{}}", "'presence_penalty' must be a number"},
        BadCase{"{" M ",\"frequency_penalty\":\"0\"}", "'frequency_penalty' must be a number"},
        BadCase{"{" M ",\"repetition_penalty\":\"1\"}", "'repetition_penalty' must be a number"},
        BadCase{"{" M ",\"seed\":-1}", "'seed' must be a non-negative integer"},
        BadCase{"{" M ",\"seed\":\"1\"}", "'seed' must be a non-negative integer"},
        BadCase{"{" M ",\"stream\":1}", "'stream' must be a boolean"},
        BadCase{"{" M ",\"stream_options\":[]}", "'stream_options' must be an object"},
        BadCase{"{" M ",\"stream_options\":{\"include_usage\":\"yes\"}}", "'stream_options.include_usage' must be a boolean"},
        BadCase{"{" M ",\"return_progress\":\"true\"}", "'return_progress' must be a boolean"},
        BadCase{"{" M ",\"ignore_eos\":0}", "'ignore_eos' must be a boolean"},
        BadCase{"{" M ",\"model\":5}", "'model' must be a string"},
        BadCase{"{" M ",\"timeout\":\"5\"}", "'timeout' must be a number"},
        BadCase{"{" M ",\"max_tokens\":\"5\"}", "'max_tokens' must be an integer"},
        BadCase{"{" M ",\"max_completion_tokens\":1.5}", "'max_completion_tokens' must be an integer"},
        BadCase{"{" M ",\"parallel_tool_calls\":\"no\"}", "'parallel_tool_calls' must be a boolean"},
        BadCase{"{" M ",\"reasoning_effort\":1}", "'reasoning_effort' must be a string"},
        BadCase{"{" M ",\"chat_template_kwargs\":[]}", "'chat_template_kwargs' must be an object"},
        BadCase{"{" M ",\"preserve_thinking\":1}", "'preserve_thinking' must be a boolean"},
        // ranges
        BadCase{"{" M ",\"temperature\":2.01}", "'temperature' must be between 0 and 2"},
        BadCase{"{" M ",\"temperature\":-0.1}", "'temperature' must be between 0 and 2"},
        BadCase{"{" M ",\"top_p\":1.5}", "'top_p' must be between 0 and 1"},
        BadCase{"{" M ",\"top_p\":-0.5}", "'top_p' must be between 0 and 1"},
        BadCase{"{" M ",\"top_k\":-2}", "'top_k' must be >= -1"},
        BadCase{"{" M ",\"min_p\":1.1}", "'min_p' must be between 0 and 1"},
        BadCase{"{" M ",\"presence_penalty\":2.5}", "'presence_penalty' must be between -2 and 2"},
        BadCase{"{" M ",\"frequency_penalty\":-3}", "'frequency_penalty' must be between -2 and 2"},
        BadCase{"{" M ",\"repetition_penalty\":0}", "'repetition_penalty' must be > 0"},
        BadCase{"{" M ",\"repetition_penalty\":-1}", "'repetition_penalty' must be > 0"},
        BadCase{"{" M ",\"seed\":18446744073709551616}", "'seed' must be a non-negative integer"},
        BadCase{"{" M ",\"timeout\":0}", "'timeout' must be a number of seconds > 0"},
        BadCase{"{" M ",\"timeout\":-1}", "'timeout' must be a number of seconds > 0"},
        BadCase{"{" M ",\"max_tokens\":0}", "'max_tokens' must be greater than 0"},
        BadCase{"{" M ",\"max_tokens\":-5}", "'max_tokens' must be greater than 0"},
        BadCase{"{" M ",\"max_completion_tokens\":0}", "'max_completion_tokens' must be greater than 0"},
        BadCase{"{" M ",\"max_tokens\":1e300}", "'max_tokens' must be an integer"},
        BadCase{"{" M ",\"temperature\":1e999}", "invalid JSON"},
        BadCase{"{" M ",\"priority\":\"urgent\"}", "'priority' must be one of foreground, normal, background"},
        BadCase{"{" M ",\"reasoning_effort\":\"extreme\"}", "'reasoning_effort' must be one of none, minimal"},
        // stop
        BadCase{"{" M ",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", "'stop' may hold at most 4 strings"},
        BadCase{"{" M ",\"stop\":5}", "'stop' must be a string or an array of strings"},
        BadCase{"{" M ",\"stop\":[\"a\",1]}", "'stop[1]' must be a string"},
        // refused features (spec 2.4)
        BadCase{"{" M ",\"n\":2}", "'n' must be 1"}, BadCase{"{" M ",\"n\":0}", "'n' must be 1"},
        // logprobs
        BadCase{"{" M ",\"top_logprobs\":3}", "'top_logprobs' needs 'logprobs': true"},
        BadCase{"{" M ",\"logprobs\":false,\"top_logprobs\":3}", "'top_logprobs' needs 'logprobs': true"},
        BadCase{"{" M ",\"logprobs\":true,\"top_logprobs\":21}", "'top_logprobs' must be an integer from 0 to 20"},
        BadCase{"{" M ",\"logprobs\":true,\"top_logprobs\":-1}", "'top_logprobs' must be an integer from 0 to 20"},
        BadCase{"{" M ",\"logprobs\":1}", "'logprobs' must be a boolean"},
        BadCase{"{" M ",\"logit_bias\":{\"15\":5}}", "'logit_bias' is not supported"},
        BadCase{"{" M ",\"logit_bias\":[1]}", "'logit_bias' must be an object"},
        BadCase{"{" M ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{}}}", "'response_format.json_schema.schema' is required"},
        BadCase{"{" M ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":[1]}}}", "'response_format.json_schema.schema' must be an object"},
        BadCase{"{" M ",\"response_format\":{\"type\":\"json_schema\"}}", "'response_format.json_schema' must be an object"},
        BadCase{"{" M ",\"grammar\":\"root ::= \\\"a\\\"\",\"regex\":\"a\"}", "'regex' and 'grammar' cannot be combined"},
        BadCase{"{" M ",\"response_format\":{\"type\":\"json_object\"},\"regex\":\"a\"}", "'regex' and 'response_format' cannot be combined"},
        BadCase{"{" M ",\"regex\":\"\"}", "'regex' must not be empty"},
        BadCase{"{" M ",\"response_format\":{\"type\":\"yaml\"}}", "'response_format.type' must be one of text"},
        BadCase{"{" M ",\"response_format\":\"text\"}", "'response_format' must be an object"},
        BadCase{"{" M ",\"chat_template_kwargs\":{\"messages\":[]}}", "'chat_template_kwargs.messages' cannot be set"},
        // messages
        BadCase{"{}", "'messages' is required"}, BadCase{"{\"messages\":[]}", "'messages' must be a non-empty array"},
        BadCase{"{\"messages\":{}}", "'messages' must be a non-empty array"},
        BadCase{"{\"messages\":[1]}", "'messages[0]' must be an object"},
        BadCase{"{\"messages\":[{\"content\":\"x\"}]}", "'messages[0].role' is required"},
        BadCase{"{\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"robot\",\"content\":\"x\"}]}", "'messages[1].role' must be one of system, user, assistant, tool"},
        BadCase{"{\"messages\":[{\"role\":\"function\",\"content\":\"x\"}]}", "'messages[0].role' must be one of"},
        BadCase{"{\"messages\":[{\"role\":\"user\"}]}", "'messages[0].content' is required for role 'user'"},
        BadCase{"{\"messages\":[{\"role\":\"system\",\"content\":null}]}", "'messages[0].content' is required for role 'system'"},
        BadCase{"{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "'messages[0].content' must be a string or an array of content parts"},
        BadCase{"{\"messages\":[{\"role\":\"user\",\"content\":[\"x\"]}]}", "'messages[0].content[0]' must be an object"},
        BadCase{"{\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"x\"}]}]}", "'messages[0].content[0].type' is required"},
        BadCase{"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}", "'messages[0].content[0].text' is required"},
        BadCase{"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":1}]}]}", "'messages[0].content[0].text' must be a string"},
        BadCase{"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,AA\"}}]}]}", "images are not supported by this model"},
        BadCase{"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_image\"}]}]}", "images are not supported by this model"},
        BadCase{"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\"}]}]}", "'messages[0].content[0].type' 'input_audio' is not supported"},
        BadCase{"{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"name\":3}]}", "'messages[0].name' must be a string"},
        BadCase{"{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\",\"reasoning_content\":3}]}", "'messages[0].reasoning_content' must be a string"},
        BadCase{"{\"messages\":[{\"role\":\"tool\",\"content\":\"x\",\"tool_call_id\":3}]}", "'messages[0].tool_call_id' must be a string"},
        BadCase{"{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":{}}]}", "'messages[0].tool_calls' must be an array"},
        BadCase{"{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"function\"}]}]}", "'messages[0].tool_calls[0].function' must be an object"},
        BadCase{"{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{}}]}]}", "'messages[0].tool_calls[0].function.name' is required"},
        BadCase{"{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"x\",\"function\":{\"name\":\"f\"}}]}]}", "'messages[0].tool_calls[0].type' must be \"function\""},
        BadCase{"{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":5}}]}]}", "'messages[0].tool_calls[0].function.arguments' must be a string or an object"},
        // tools
        BadCase{"{" M ",\"tools\":{}}", "'tools' must be an array"},
        BadCase{"{" M ",\"tools\":[1]}", "'tools[0]' must be an object"},
        BadCase{"{" M ",\"tools\":[{\"function\":{\"name\":\"f\"}}]}", "'tools[0].type' is required"},
        BadCase{"{" M ",\"tools\":[{\"type\":\"web_search\"}]}", "'tools[0].type' 'web_search' is not supported"},
        BadCase{"{" M ",\"tools\":[{\"type\":\"function\"}]}", "'tools[0].function' must be an object"},
        BadCase{"{" M ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"\"}}]}", "'tools[0].function.name' must be a non-empty string"},
        BadCase{"{" M ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":[]}}]}", "'tools[0].function.parameters' must be a JSON schema object"},
        BadCase{"{" M ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}},{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}", "'tools[1].function.name' 'f' is declared twice"},
        BadCase{"{" M ",\"tool_choice\":\"required\"}", "'tool_choice' \"required\" needs 'tools'"},
        BadCase{"{" M ",\"tool_choice\":\"sometimes\"}", "'tool_choice' must be \"auto\", \"none\", \"required\" or a function object"},
        BadCase{"{" M ",\"tool_choice\":5}", "'tool_choice' must be a string or an object"},
        BadCase{"{" M ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"g\"}},\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}", "'tool_choice.function.name' 'g' is not one of 'tools'"},
        BadCase{"{" M ",\"stop\":\"x\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}", "'stop' cannot be combined with callable 'tools'"}));
#undef M

TEST(OpenAiRequest, NestingLimitIs128) {
  auto nest = [](int depth) {
    std::string inner = "1";
    for (int i = 0; i < depth; ++i) inner = "[" + inner + "]";
    return inner;
  };
  // The body object is level 1, so "x" can hold 127 more levels.
  auto ok = parse_chat_request(chat("\"x\":" + nest(127)));
  EXPECT_TRUE(ok.ok()) << ok.error().message;
  auto deep = parse_chat_request(chat("\"x\":" + nest(128)));
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.error().status, 400);
  EXPECT_NE(deep.error().message.find("nesting deeper than 128 levels"), std::string::npos) << deep.error().message;
  // Very deep input fails fast instead of recursing.
  auto huge = parse_json(std::string(1'000'000, '['));
  EXPECT_FALSE(huge.ok());
}

TEST(OpenAiRequest, DuplicateKeysLastWinsAndManyKeysAreLinear) {
  auto r = parse_chat_request(chat(R"("temperature":0.1,"temperature":0.7)"));
  ASSERT_TRUE(r.ok());
  EXPECT_FLOAT_EQ(r->common.sampling.temperature, 0.7f);
  // 50k distinct keys plus a repeated one (quadratic insertion would take ~10^9 key compares):
  // parses, keeps first-seen order, last value wins.
  std::string big = "{";
  for (int i = 0; i < 50000; ++i) big += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  big += "\"k5\":\"last\"}";
  auto j = parse_json(big);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->size(), 50000u);
  const auto& obj = j->get_ref<const nlohmann::ordered_json::object_t&>();
  EXPECT_EQ(obj.front().first, "k0");
  EXPECT_EQ(obj.back().first, "k49999");
  EXPECT_EQ((obj.begin() + 5)->second, "last");
}

TEST(OpenAiRequest, MessagesAreNormalized) {
  auto r = parse_chat_request(std::string(R"({"messages":[
    {"role":"developer","content":"sys"},
    {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
    {"role":"assistant","content":null,"reasoning_content":"why","tool_calls":[
      {"id":"c1","type":"function","function":{"name":"f","arguments":"{\"b\":1,\"a\":[2]}"}},
      {"function":{"name":"g","arguments":"not json"}},
      {"function":{"name":"h","arguments":{"z":1}}},
      {"function":{"name":"k"}}]},
    {"role":"tool","tool_call_id":"c1","content":"out"}]})"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const auto& m = r->messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_EQ(m[1].content.value_or(""), "a\nb");
  EXPECT_FALSE(m[2].content.has_value());
  EXPECT_EQ(m[2].reasoning_content.value_or(""), "why");
  ASSERT_EQ(m[2].tool_calls.size(), 4u);
  EXPECT_EQ(m[2].tool_calls[0].id, "c1");
  EXPECT_EQ(m[2].tool_calls[0].arguments, R"({"b":1,"a":[2]})");  // the string as sent
  ASSERT_TRUE(m[2].tool_calls[0].arguments_object.has_value());     // and parsed, key order kept
  EXPECT_EQ(m[2].tool_calls[0].arguments_object->dump(), R"({"b":1,"a":[2]})");
  EXPECT_EQ(m[2].tool_calls[1].arguments, "not json");  // kept as the string, nothing parsed
  EXPECT_FALSE(m[2].tool_calls[1].arguments_object.has_value());
  EXPECT_EQ(m[2].tool_calls[2].arguments.dump(), R"({"z":1})");
  EXPECT_EQ(m[2].tool_calls[3].arguments.dump(), "{}");
  EXPECT_EQ(m[3].tool_call_id.value_or(""), "c1");
}

TEST(OpenAiRequest, ToolsKeepTheirDefinitionAndOrder) {
  auto r = parse_chat_request(chat(
      R"("tools":[{"type":"function","function":{"name":"zeta","parameters":{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}},"strict":true}},{"type":"function","function":{"name":"alpha"}}],"tool_choice":"auto")"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->tools.size(), 2u);
  EXPECT_EQ(r->tools[0].name, "zeta");
  EXPECT_EQ(r->tools[1].name, "alpha");
  EXPECT_EQ(r->tools[0].definition.dump(),
            R"({"type":"function","function":{"name":"zeta","parameters":{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}},"strict":true}})");
  EXPECT_TRUE(r->tools_callable());
  auto none = parse_chat_request(chat(R"("tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none","stop":"x")"));
  ASSERT_TRUE(none.ok()) << none.error().message;  // stop is fine when calls are barred
  EXPECT_FALSE(none->tools_callable());
}

TEST(OpenAiRequest, StructuredOutputFieldsBecomeOneConstraint) {
  auto schema = parse_chat_request(chat(
      R"("response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,"schema":{"type":"object","properties":{"z":{"type":"integer"},"a":{"type":"string"}}}}})"));
  ASSERT_TRUE(schema.ok()) << schema.error().message;
  ASSERT_TRUE(schema->common.constraint);
  EXPECT_EQ(schema->common.constraint->kind, OutputConstraint::Kind::kJsonSchema);
  // Key order is kept: properties are generated in the order the schema declares them.
  EXPECT_EQ(schema->common.constraint->text, R"({"type":"object","properties":{"z":{"type":"integer"},"a":{"type":"string"}}})");
  EXPECT_EQ(schema->common.constraint->field, "response_format.json_schema.schema");
  auto object = parse_chat_request(chat(R"("response_format":{"type":"json_object"})"));
  ASSERT_TRUE(object.ok());
  EXPECT_EQ(object->common.constraint->text, R"({"type":"object"})");
  auto text = parse_chat_request(chat(R"("response_format":{"type":"text"})"));
  ASSERT_TRUE(text.ok());
  EXPECT_FALSE(text->common.constraint);
  auto grammar = parse_completion_request(R"({"prompt":"x","grammar":"root ::= \"a\""})");
  ASSERT_TRUE(grammar.ok()) << grammar.error().message;
  EXPECT_EQ(grammar->common.constraint->kind, OutputConstraint::Kind::kGbnf);
  EXPECT_EQ(grammar->common.constraint->text, R"(root ::= "a")");
  auto regex = parse_completion_request(R"({"prompt":"x","regex":"[0-9]+"})");
  ASSERT_TRUE(regex.ok());
  EXPECT_EQ(regex->common.constraint->kind, OutputConstraint::Kind::kRegex);
}

TEST(OpenAiRequest, ForcedToolChoices) {
  auto required = parse_chat_request(chat(R"("tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required")"));
  ASSERT_TRUE(required.ok()) << required.error().message;
  EXPECT_EQ(required->tool_choice.mode, ToolChoice::Mode::kRequired);
  EXPECT_TRUE(required->tools_callable());
  auto named = parse_chat_request(chat(
      R"("tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"g"}}],"tool_choice":{"type":"function","function":{"name":"g"}})"));
  ASSERT_TRUE(named.ok()) << named.error().message;
  EXPECT_EQ(named->tool_choice.mode, ToolChoice::Mode::kFunction);
  EXPECT_EQ(named->tool_choice.function, "g");
}

TEST(OpenAiRequest, EmptyStopStringsAreDropped) {
  auto r = parse_chat_request(chat(R"("stop":["","x",""])"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->common.stop, std::vector<std::string>{"x"});
  auto s = parse_chat_request(chat(R"("stop":"")"));
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->common.stop.empty());
}

// --- /v1/completions ------------------------------------------------------------------------------

TEST(OpenAiRequest, CompletionDefaultsAndPromptForms) {
  auto r = parse_completion_request(std::string(R"({"prompt":"Once upon"})"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->max_tokens, 16);
  EXPECT_EQ(std::get<std::string>(r->prompt), "Once upon");
  EXPECT_EQ(r->common.sampling.top_k, 20);

  auto ids = parse_completion_request(std::string(R"({"prompt":[1,2,3],"max_tokens":5,"temperature":0})"));
  ASSERT_TRUE(ids.ok()) << ids.error().message;
  EXPECT_EQ(std::get<std::vector<int32_t>>(ids->prompt), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(ids->max_tokens, 5);
  auto one_string = parse_completion_request(std::string(R"({"prompt":["x"]})"));
  ASSERT_TRUE(one_string.ok());
  EXPECT_EQ(std::get<std::string>(one_string->prompt), "x");
  auto one_ids = parse_completion_request(std::string(R"({"prompt":[[7,8]]})"));
  ASSERT_TRUE(one_ids.ok());
  EXPECT_EQ(std::get<std::vector<int32_t>>(one_ids->prompt), (std::vector<int32_t>{7, 8}));
}

class CompletionRejects : public ::testing::TestWithParam<BadCase> {};

TEST_P(CompletionRejects, With400NamingTheField) {
  auto r = parse_completion_request(std::string(GetParam().body));
  ASSERT_FALSE(r.ok()) << GetParam().body;
  EXPECT_EQ(r.error().status, 400);
  EXPECT_NE(r.error().message.find(GetParam().message), std::string::npos)
      << "message: " << r.error().message << "\nbody: " << GetParam().body;
}

INSTANTIATE_TEST_SUITE_P(
    Table, CompletionRejects,
    ::testing::Values(BadCase{"{}", "'prompt' is required"}, BadCase{"{\"prompt\":5}", "'prompt' must be a string or an array of token ids"},
                      BadCase{"{\"prompt\":[]}", "'prompt' must not be empty"},
                      BadCase{"{\"prompt\":[1,-2]}", "'prompt[1]' must be a token id"},
                      BadCase{"{\"prompt\":[1,2.5]}", "'prompt[1]' must be a token id"},
                      BadCase{"{\"prompt\":[1,4294967296]}", "'prompt[1]' must be a token id"},
                      BadCase{"{\"prompt\":[\"a\",\"b\"]}", "'prompt' holds several prompts"},
                      BadCase{"{\"prompt\":[[1],[2]]}", "'prompt' holds several prompts"},
                      BadCase{"{\"prompt\":[[]]}", "'prompt[0]' must not be empty"},
                      BadCase{"{\"prompt\":[[1,\"x\"]]}", "'prompt[0][1]' must be a token id"},
                      BadCase{"{\"prompt\":\"x\",\"max_tokens\":0}", "'max_tokens' must be greater than 0"},
                      BadCase{"{\"prompt\":\"x\",\"max_tokens\":\"3\"}", "'max_tokens' must be an integer"},
                      BadCase{"{\"prompt\":\"x\",\"n\":3}", "'n' must be 1"},
                      BadCase{"{\"prompt\":\"x\",\"max_tokens\":-1,\"echo\":true}", "'max_tokens' must be greater than 0"},
                      BadCase{"{\"prompt\":\"x\",\"logprobs\":6}", "'logprobs' must be an integer from 0 to 5"},
                      BadCase{"{\"prompt\":\"x\",\"logprobs\":-1}", "'logprobs' must be an integer from 0 to 5"},
                      BadCase{"{\"prompt\":\"x\",\"logprobs\":true}", "'logprobs' must be an integer"},
                      BadCase{"{\"prompt\":\"x\",\"echo\":1}", "'echo' must be a boolean"},
                      BadCase{"{\"prompt\":\"x\",\"best_of\":2}", "'best_of' must be 1"},
                      BadCase{"{\"prompt\":\"x\",\"suffix\":\"end\"}", "'suffix' is not supported"},
                      BadCase{"{\"prompt\":\"x\",\"logit_bias\":{\"1\":1}}", "'logit_bias' is not supported"},
                      BadCase{"{\"prompt\":\"x\",\"temperature\":3}", "'temperature' must be between 0 and 2"},
                      BadCase{"{\"prompt\":\"x\",\"stop\":[1]}", "'stop[0]' must be a string"},
                      BadCase{"[]", "request body must be a JSON object"}));

TEST(OpenAiRequest, LogprobsFields) {
  auto chat_on = parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":20})");
  ASSERT_TRUE(chat_on.ok()) << chat_on.error().message;
  EXPECT_EQ(chat_on->common.logprobs, 20);
  auto chat_plain = parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}],"logprobs":true})");
  ASSERT_TRUE(chat_plain.ok());
  EXPECT_EQ(chat_plain->common.logprobs, 0);
  auto chat_off = parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}],"logprobs":false,"top_logprobs":0})");
  ASSERT_TRUE(chat_off.ok());
  EXPECT_FALSE(chat_off->common.logprobs.has_value());

  auto score = parse_completion_request(R"({"prompt":"x","echo":true,"max_tokens":0,"logprobs":1})");
  ASSERT_TRUE(score.ok()) << score.error().message;
  EXPECT_TRUE(score->echo);
  EXPECT_EQ(score->max_tokens, 0);
  EXPECT_EQ(score->common.logprobs, 1);
  auto zero = parse_completion_request(R"({"prompt":"x","logprobs":0})");
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->common.logprobs, 0);  // the chosen tokens' logprobs, no alternatives
  auto none = parse_completion_request(R"({"prompt":"x"})");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->common.logprobs.has_value());
  EXPECT_FALSE(none->echo);
}

TEST(OpenAiRequest, ErrorBodyShape) {
  EXPECT_EQ(error_body(invalid_request("'temperature' must be a number")),
            R"({"error":{"message":"'temperature' must be a number","type":"invalid_request_error","code":"invalid_request_error"}})");
  ApiError e = api_error(503, "server_shutdown", "bye");
  EXPECT_EQ(e.type, "server_error");
  EXPECT_EQ(error_body(e), R"({"error":{"message":"bye","type":"server_error","code":"server_shutdown"}})");
  EXPECT_EQ(api_error(404, "model_not_found", "no model 'x'").type, "invalid_request_error");
  // Client bytes that are not UTF-8 never make serialization throw.
  EXPECT_EQ(error_body(invalid_request("bad \xff")),
            "{\"error\":{\"message\":\"bad \xEF\xBF\xBD\",\"type\":\"invalid_request_error\",\"code\":\"invalid_request_error\"}}");
}

// The one code -> HTTP mapping: the statuses, codes and message suffixes the server answered with when
// it matched the engine's message prefixes.
TEST(OpenAiRequest, ErrorCodesMapToStatusAndCode) {
  struct Case {
    ErrorCode code;
    int status;
    const char* api_code;
    const char* message;
  };
  const Case cases[] = {
      {ErrorCode::kQueueFull, 503, "runtime_busy", "queue full: 2 requests are running or waiting (queue size 2); retry shortly"},
      {ErrorCode::kCapacityExhausted, 400, "capacity_exhausted",
       "queue full: 2 requests are running or waiting (queue size 2) (raise --max-memory or lower --max-context)"},
      {ErrorCode::kShuttingDown, 503, "server_shutdown", "queue full: 2 requests are running or waiting (queue size 2)"},
      {ErrorCode::kUnavailable, 503, "runtime_unavailable", "queue full: 2 requests are running or waiting (queue size 2)"},
      {ErrorCode::kTimeout, 504, "request_timeout", "queue full: 2 requests are running or waiting (queue size 2)"},
      {ErrorCode::kEngineFailed, 500, "engine_failed", "queue full: 2 requests are running or waiting (queue size 2)"},
      {ErrorCode::kInvalidArgument, 400, "invalid_request_error", "queue full: 2 requests are running or waiting (queue size 2)"},
      {ErrorCode::kUnknown, 400, "invalid_request_error", "queue full: 2 requests are running or waiting (queue size 2)"},
  };
  // The same words under every code: the code alone decides the status.
  for (const Case& c : cases) {
    ApiError e = api_error(make_error(c.code, "queue full: 2 requests are running or waiting (queue size 2)"));
    EXPECT_EQ(e.status, c.status) << c.api_code;
    EXPECT_EQ(e.code, c.api_code);
    EXPECT_EQ(e.type, c.status >= 500 ? "server_error" : "invalid_request_error") << c.api_code;
    EXPECT_EQ(e.message, c.message);
  }
  EXPECT_EQ(error_body(api_error(make_error(ErrorCode::kCapacityExhausted, "capacity_exhausted: the request needs up to "
                                                                           "4096 KV positions"))),
            R"j({"error":{"message":"capacity_exhausted: the request needs up to 4096 KV positions (raise --max-memory )j"
            R"j(or lower --max-context)","type":"invalid_request_error","code":"capacity_exhausted"}})j");
  // make_error without a code stays unclassified, whatever its words.
  EXPECT_EQ(make_error("queue full: ", 3).code, ErrorCode::kUnknown);
  EXPECT_EQ(api_error(make_error("shutting down: the engine is stopping")).status, 400);
}

}  // namespace
}  // namespace splash::openai
