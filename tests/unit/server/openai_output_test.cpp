// Output side: <think> splitting and tool-call parsing, fed whole, byte by byte, and cut at every
// possible pair of boundaries; the concatenated results must be identical however the text is cut.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/openai/chat_output.h"
#include "server/openai/render.h"
#include "server/openai/request.h"

namespace splash::openai {
namespace {

using ojson = nlohmann::ordered_json;

// --- reasoning ------------------------------------------------------------------------------------

struct Split {
  std::string reasoning, content;
  bool operator==(const Split&) const = default;
};

Split split_pieces(const std::vector<std::string>& pieces, bool start_in_reasoning) {
  ReasoningSplitter s(ReasoningSplitter::Options{start_in_reasoning});
  Split out;
  for (const auto& p : pieces) {
    auto d = s.feed(p);
    out.reasoning += d.reasoning;
    out.content += d.content;
  }
  auto d = s.finish();
  out.reasoning += d.reasoning;
  out.content += d.content;
  return out;
}

// `text` whole, byte by byte, and cut into three pieces at every pair of boundaries (every single
// boundary included, as j == i); for long texts the second cut stays within 24 bytes of the first,
// which still cuts every tag in two places at once, to keep the sanitizer build quick.
template <class F>
void for_each_cut(const std::string& text, F&& f) {
  f(std::vector<std::string>{text});
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  f(bytes);
  size_t window = text.size() <= 100 ? text.size() : 24;
  for (size_t i = 0; i <= text.size(); ++i) {
    for (size_t j = i; j <= text.size() && j - i <= window; ++j) {
      f(std::vector<std::string>{text.substr(0, i), text.substr(i, j - i), text.substr(j)});
    }
  }
}

struct SplitCase {
  const char* text;
  bool start_in_reasoning;
  const char* reasoning;
  const char* content;
};

class ReasoningSplit : public ::testing::TestWithParam<SplitCase> {};

TEST_P(ReasoningSplit, SameResultForEveryCut) {
  const SplitCase& c = GetParam();
  Split want{c.reasoning, c.content};
  int n = 0;
  for_each_cut(c.text, [&](const std::vector<std::string>& pieces) {
    Split got = split_pieces(pieces, c.start_in_reasoning);
    ASSERT_EQ(got, want) << "text: " << c.text << " cut into " << pieces.size() << " pieces, first '"
                         << pieces[0] << "'\n got reasoning '" << got.reasoning << "' content '" << got.content << "'";
    ++n;
  });
  EXPECT_GT(n, 2);
}

INSTANTIATE_TEST_SUITE_P(
    Table, ReasoningSplit,
    ::testing::Values(
        SplitCase{"<think>\nLet me see.\n</think>\n\nThe answer is 4.", false, "Let me see.", "The answer is 4."},
        SplitCase{"Plain answer, no thinking.", false, "", "Plain answer, no thinking."},
        SplitCase{"  <think>a</think>b", false, "a", "b"},
        SplitCase{"The tag <think> later is content", false, "", "The tag <think> later is content"},
        SplitCase{"<thinking is not a tag", false, "", "<thinking is not a tag"},
        SplitCase{"<thi", false, "", "<thi"},
        SplitCase{"<think>\nunfinished thought", false, "unfinished thought", ""},
        SplitCase{"<think>\n\n</think>\n\nDirect.", false, "", "Direct."},
        SplitCase{"<think>a</think>b</think>c", false, "a", "b</think>c"},
        SplitCase{"<think>x < y and </thinker> \n\n not closed </think>ok", false, "x < y and </thinker> \n\n not closed", "ok"},
        SplitCase{"reasoning from the prompt's tag\n</think>\n\nanswer", true, "reasoning from the prompt's tag", "answer"},
        SplitCase{"\n<think>\nrepeated tag\n</think>\nanswer", true, "repeated tag", "answer"},
        SplitCase{"only reasoning, cut by the limit </thi", true, "only reasoning, cut by the limit </thi", ""},
        SplitCase{"</think>\n\nno reasoning at all", true, "", "no reasoning at all"},
        SplitCase{"  \n ", false, "", "  \n "},
        SplitCase{"\xE4\xBD\xA0<think>\xE5\xA5\xBD</think>", false, "", "\xE4\xBD\xA0<think>\xE5\xA5\xBD</think>"},
        SplitCase{"<think>\xE4\xBD\xA0\xE5\xA5\xBD</think>\xF0\x9F\x8E\x89", false, "\xE4\xBD\xA0\xE5\xA5\xBD", "\xF0\x9F\x8E\x89"}));

TEST(ReasoningSplitter, NeverLeaksPartialTagsWhileStreaming) {
  ReasoningSplitter s;
  auto d1 = s.feed("<th");
  EXPECT_EQ(d1.content, "");
  EXPECT_EQ(d1.reasoning, "");
  auto d2 = s.feed("ink>\nabc</th");
  EXPECT_EQ(d2.reasoning, "abc");
  EXPECT_TRUE(s.in_reasoning());
  auto d3 = s.feed("ink>\n\nAn");
  EXPECT_EQ(d3.reasoning, "");
  EXPECT_EQ(d3.content, "An");
  EXPECT_FALSE(s.in_reasoning());
}

TEST(ReasoningSplitter, PromptOpensReasoning) {
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
  EXPECT_TRUE(prompt_opens_reasoning("<think>\nold\n</think>\nx<|im_start|>assistant\n<think>\n"));
}

// --- tool calls -----------------------------------------------------------------------------------

std::vector<Tool> weather_tools() {
  auto def = ojson::parse(R"({"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{
      "city":{"type":"string"},"days":{"type":"integer"},"metric":{"type":"boolean"},"ratio":{"type":"number"},
      "tags":{"type":"array"},"opts":{"type":"object"},"maybe":{"type":["string","integer"]},
      "nothing":{"type":"null"},"either":{"anyOf":[{"type":"number"},{"type":"string"}]}}}}})");
  return {Tool{"get_weather", def}};
}

struct ParsedOutput {
  std::string reasoning, content;
  std::vector<ToolCall> calls;          // ChatOutput's final list
  std::vector<std::string> streamed;    // arguments as reassembled from the deltas, per call
  std::vector<std::string> streamed_names;
};

ParsedOutput run_output(const std::vector<std::string>& pieces, bool start_in_reasoning = false, bool parallel = true) {
  ChatOutputOptions o;
  o.start_in_reasoning = start_in_reasoning;
  o.parse_tool_calls = true;
  o.tools = weather_tools();
  o.parallel_tool_calls = parallel;
  o.id_seed = 7;
  ChatOutput out(o);
  ParsedOutput r;
  auto take = [&](const std::vector<OutputPart>& parts) {
    for (const auto& p : parts) {
      if (p.kind == OutputPart::Kind::kReasoning) r.reasoning += p.text;
      if (p.kind == OutputPart::Kind::kContent) r.content += p.text;
      if (p.kind == OutputPart::Kind::kToolCall) {
        if (!p.call.id.empty()) {
          EXPECT_EQ(p.call.index, static_cast<int>(r.streamed.size()));
          r.streamed.emplace_back();
          r.streamed_names.push_back(p.call.name);
        }
        ASSERT_LT(p.call.index, static_cast<int>(r.streamed.size()));
        r.streamed[p.call.index] += p.call.arguments;
      }
    }
  };
  for (const auto& p : pieces) take(out.feed(p, 1));
  take(out.finish());
  r.calls = out.tool_calls();
  EXPECT_EQ(r.content, out.content());
  EXPECT_EQ(r.reasoning, out.reasoning());
  return r;
}

struct CallCase {
  const char* text;
  const char* content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  bool complete;                                           // of the last call
};

class ToolCalls : public ::testing::TestWithParam<CallCase> {};

TEST_P(ToolCalls, SameResultForEveryCut) {
  const CallCase& c = GetParam();
  for_each_cut(c.text, [&](const std::vector<std::string>& pieces) {
    ParsedOutput got = run_output(pieces);
    std::string where = std::string("text: ") + c.text + "\nfirst piece: '" + pieces[0] + "' of " + std::to_string(pieces.size());
    ASSERT_EQ(got.content, c.content) << where;
    ASSERT_EQ(got.calls.size(), c.calls.size()) << where;
    for (size_t i = 0; i < c.calls.size(); ++i) {
      ASSERT_EQ(got.calls[i].name, c.calls[i].first) << where;
      ASSERT_EQ(got.calls[i].arguments, c.calls[i].second) << where;
      ASSERT_EQ(got.streamed[i], c.calls[i].second) << where;  // deltas add up to the final arguments
      ASSERT_EQ(got.streamed_names[i], c.calls[i].first) << where;
      ASSERT_EQ(got.calls[i].id.rfind("call_", 0), 0u);
      ASSERT_EQ(got.calls[i].id.size(), 29u);
    }
    if (!c.calls.empty()) {
      ASSERT_EQ(got.calls.back().complete, c.complete) << where;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    Table, ToolCalls,
    ::testing::Values(
        // Qwen3 JSON form: the arguments are the model's own bytes (the client sends them back and
        // the template prints them verbatim, so the next prompt repeats this output exactly)
        CallCase{"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>", "",
                 {{"get_weather", R"({"city": "Paris", "days": 2})"}}, true},
        CallCase{"Let me check.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"search\", \"arguments\": \"{\\\"q\\\": 1}\"}\n</tool_call>\n",
                 "Let me check.", {{"get_weather", R"({"city": "Rome"})"}, {"search", R"({"q": 1})"}}, true},
        CallCase{"<tool_call>\n{\"arguments\": {\"a\": [1, {\"b\": \"}]\\\"\"}],\n \"c\":null}, \"name\": \"f\"}\n</tool_call>", "",
                 {{"f", "{\"a\": [1, {\"b\": \"}]\\\"\"}],\n \"c\":null}"}}, true},
        CallCase{"<tool_call>\n{\"name\": \"f\"}\n</tool_call>", "", {{"f", "{}"}}, true},
        // JSON form cut by the token limit: the name and the raw arguments so far
        CallCase{"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par", "", {{"get_weather", R"({"city": "Par)"}}, false},
        // Not well formed: everything stays content
        CallCase{"<tool_call>\nnot a call\n</tool_call> after", "<tool_call>\nnot a call\n</tool_call> after", {}, true},
        CallCase{"<tool_call>\n{\"nam", "<tool_call>\n{\"nam", {}, true},
        CallCase{"<tool_call>\n{\"arguments\": {}}\n</tool_call>", "<tool_call>\n{\"arguments\": {}}\n</tool_call>", {}, true},
        CallCase{"x <tool_cal y", "x <tool_cal y", {}, true},
        // Qwen3.5 XML form, with parameter types
        CallCase{"<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>", "",
                 {{"get_weather", R"({"city": "Paris", "days": 3})"}}, true},
        CallCase{"<tool_call>\n<function=get_weather>\n<parameter=metric>\nTrue\n</parameter>\n<parameter=ratio>\n0.5\n</parameter>\n<parameter=tags>\n[\"a\", 1]\n</parameter>\n"
                 "<parameter=opts>\n{\"k\": {\"n\": null}}\n</parameter>\n<parameter=nothing>\nNone\n</parameter>\n</function>\n</tool_call>", "",
                 {{"get_weather", R"({"metric": true, "ratio": 0.5, "tags": ["a",1], "opts": {"k":{"n":null}}, "nothing": null})"}}, true},
        // Types that do not parse keep the text; unions keep text unless another type parses; undeclared stay strings
        CallCase{"<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n<parameter=maybe>\n42\n</parameter>\n<parameter=either>\nabc\n</parameter>\n"
                 "<parameter=undeclared>\n7\n</parameter>\n<parameter=city>\n12\n</parameter>\n</function>\n</tool_call>", "",
                 {{"get_weather", R"({"days": "three", "maybe": 42, "either": "abc", "undeclared": "7", "city": "12"})"}}, true},
        // Multi-line string values keep their inner newlines; unknown tools keep strings
        CallCase{"Sure.\n<tool_call>\n<function=write_file>\n<parameter=text>\nline 1\n\nline 3\n</parameter>\n</function>\n</tool_call>\n\n<tool_call>\n<function=get_weather>\n</function>\n</tool_call>",
                 "Sure.", {{"write_file", R"({"text": "line 1\n\nline 3"})"}, {"get_weather", "{}"}}, true},
        // XML cut inside a value: the completed parameters plus the open one's text so far
        CallCase{"<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n1", "",
                 {{"get_weather", R"({"city": "Paris", "days": 1})"}}, false},
        CallCase{"<tool_call>\n<function=get_weather>\n<parameter=city>\nNew Yo\n</param", "",
                 {{"get_weather", R"({"city": "New Yo"})"}}, false},
        CallCase{"<tool_call>\n<function=get_weather>\n<parameter=ci", "", {{"get_weather", "{}"}}, false},
        // XML cut before the name is complete: content
        CallCase{"<tool_call>\n<function=get_wea", "<tool_call>\n<function=get_wea", {}, true},
        // Missing </parameter> before </function>
        CallCase{"<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</function>\n</tool_call>", "",
                 {{"get_weather", R"({"city": "Oslo"})"}}, true},
        // Text after a call stays content
        CallCase{"<tool_call>\n<function=f>\n</function>\n</tool_call>\nDone!", "Done!", {{"f", "{}"}}, true}));

TEST(ToolCallParser, ReasoningThenCallsAndTokenCounts) {
  std::string text = "<think>\nNeed weather.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nLima\n</parameter>\n</function>\n</tool_call>";
  for_each_cut(text, [&](const std::vector<std::string>& pieces) {
    ParsedOutput got = run_output(pieces);
    ASSERT_EQ(got.reasoning, "Need weather.");
    ASSERT_EQ(got.content, "");
    ASSERT_EQ(got.calls.size(), 1u);
    ASSERT_EQ(got.calls[0].arguments, R"({"city": "Lima"})");
  });
  // One token per piece: "<think>\n", "A", "</think>" count as reasoning, "\n\nB" does not.
  ChatOutputOptions o;
  ChatOutput out(o);
  (void)out.feed("<think>\n", 1);
  (void)out.feed("A", 1);
  (void)out.feed("</think>", 1);
  (void)out.feed("\n\nB", 1);
  (void)out.finish();
  EXPECT_EQ(out.reasoning_tokens(), 3);
  EXPECT_EQ(out.content(), "B");
  EXPECT_EQ(out.reasoning(), "A");
}

TEST(ToolCallParser, XmlStreamsOneParameterAtATime) {
  ChatOutputOptions o;
  o.parse_tool_calls = true;
  o.tools = weather_tools();
  o.id_seed = 1;
  ChatOutput out(o);
  EXPECT_TRUE(out.feed("<tool_call>\n<function=get_").empty());
  auto named = out.feed("weather>\n<parameter=city>\nPa");
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].kind, OutputPart::Kind::kToolCall);
  EXPECT_EQ(named[0].call.name, "get_weather");
  EXPECT_EQ(named[0].call.arguments, "");
  EXPECT_EQ(named[0].call.id.size(), 29u);
  auto first = out.feed("ris\n</parameter>\n");
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].call.arguments, R"({"city": "Paris")");
  EXPECT_TRUE(first[0].call.id.empty());
  auto rest = out.feed("<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].call.arguments, R"(, "days": 2)");
  EXPECT_EQ(rest[1].call.arguments, "}");
  EXPECT_TRUE(out.finish().empty());
  ASSERT_EQ(out.tool_calls().size(), 1u);
  EXPECT_TRUE(out.tool_calls()[0].complete);
}

TEST(ToolCallParser, ParallelFalseKeepsOnlyTheFirstCall) {
  std::string text = "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>tail";
  ParsedOutput got = run_output({text}, false, /*parallel=*/false);
  ASSERT_EQ(got.calls.size(), 1u);
  EXPECT_EQ(got.calls[0].name, "a");
  EXPECT_EQ(got.content, "");
}

TEST(ToolCallParser, DisabledLeavesTagsInContent) {
  ChatOutputOptions o;  // parse_tool_calls false: no tools offered
  ChatOutput out(o);
  std::string text = "<tool_call>\n{\"name\": \"a\"}\n</tool_call>";
  auto parts = out.feed(text);
  (void)out.finish();
  EXPECT_EQ(out.content(), text);
  EXPECT_TRUE(out.tool_calls().empty());
}

TEST(ToolCallParser, ConvertParameterByDeclaredType) {
  auto conv = [](const char* text, const char* schema) {
    ojson s = ojson::parse(schema);
    return convert_parameter(text, &s).dump();
  };
  EXPECT_EQ(conv("7", R"({"type":"integer"})"), "7");
  EXPECT_EQ(conv(" 2.0 ", R"({"type":"integer"})"), "2.0");
  EXPECT_EQ(conv("2.5", R"({"type":"integer"})"), "\"2.5\"");
  EXPECT_EQ(conv("1e300", R"({"type":"integer"})"), "\"1e300\"");
  EXPECT_EQ(conv("1e300", R"({"type":"number"})"), "1e+300");
  EXPECT_EQ(conv("False", R"({"type":"boolean"})"), "false");
  EXPECT_EQ(conv("yes", R"({"type":"boolean"})"), "\"yes\"");
  EXPECT_EQ(conv("None", R"({"type":["null","string"]})"), "null");
  EXPECT_EQ(conv("text", R"({"type":["null","string"]})"), "\"text\"");
  EXPECT_EQ(conv("[1,", R"({"type":"array"})"), "\"[1,\"");
  EXPECT_EQ(conv("{\"a\":1}", R"({"oneOf":[{"type":"array"},{"type":"object"}]})"), "{\"a\":1}");
  EXPECT_EQ(conv("5", R"({"description":"no type"})"), "\"5\"");
  EXPECT_EQ(convert_parameter("5", nullptr).dump(), "\"5\"");
}

TEST(ToolCallParser, IdsAreSeededAndDistinct) {
  IdGenerator a(5), b(5), c;
  std::string x = a.next("call_"), y = b.next("call_");
  EXPECT_EQ(x, y);
  EXPECT_NE(a.next("call_"), x);
  std::string r = c.next("chatcmpl-");
  EXPECT_EQ(r.size(), 9u + 24u);
  for (char ch : r.substr(9)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch))) << r;
}

TEST(ToolCallParser, ForRequestTakesTheRequestsSettings) {
  auto req = parse_chat_request(std::string(
      R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"parallel_tool_calls":false})"));
  ASSERT_TRUE(req.ok());
  auto o = ChatOutputOptions::for_request(*req, "<|im_start|>assistant\n<think>\n");
  EXPECT_TRUE(o.start_in_reasoning);
  EXPECT_TRUE(o.parse_tool_calls);
  EXPECT_FALSE(o.parallel_tool_calls);
  ASSERT_EQ(o.tools.size(), 1u);
  auto o2 = ChatOutputOptions::for_request(*req, "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_FALSE(o2.start_in_reasoning);
}

}  // namespace
}  // namespace splash::openai
