// render_chat on the real Qwen3 chat template: every request of openai_render/cases.json must render
// exactly as @huggingface/jinja renders the same conversation (openai_render/expected.json, written
// by make_expected.mjs with its own request -> context mapping).
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/openai/chat_output.h"
#include "server/openai/json_input.h"
#include "server/openai/render.h"

namespace splash::openai {
namespace {

using ojson = nlohmann::ordered_json;

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string source_dir() { return SPLASH_SOURCE_DIR; }

ChatTemplate qwen3() {
  auto t = ChatTemplate::parse(read_file(source_dir() + "/tests/template/templates/qwen3.jinja"));
  EXPECT_TRUE(t.ok()) << t.error_message();
  return std::move(t).value();
}

TEST(OpenAiRender, Qwen3MatchesHuggingFaceJinja) {
  std::string dir = source_dir() + "/tests/unit/server/openai_render/";
  auto cases = ojson::parse(read_file(dir + "cases.json"))["cases"];
  auto expected = ojson::parse(read_file(dir + "expected.json"));
  auto results = expected["results"];
  ASSERT_EQ(cases.size(), results.size());
  ASSERT_GE(cases.size(), 6u);
  ChatTemplate tmpl = qwen3();
  TemplateExtras extras;
  extras.eos_token = expected["eos_token"].get<std::string>();
  int matched = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    std::string name = cases[i]["name"].get<std::string>();
    ASSERT_EQ(name, results[i]["name"].get<std::string>());
    // Through the same path as a real request: raw body text -> parser -> renderer.
    auto req = parse_chat_request(dump_json(cases[i]["request"]));
    ASSERT_TRUE(req.ok()) << name << ": " << req.error().message;
    auto prompt = render_chat(tmpl, *req, extras);
    ASSERT_TRUE(prompt.ok()) << name << ": " << prompt.error_message();
    EXPECT_EQ(*prompt, results[i]["prompt"].get<std::string>()) << name;
    if (*prompt == results[i]["prompt"].get<std::string>()) ++matched;
  }
  EXPECT_EQ(matched, static_cast<int>(cases.size()));
}

TEST(OpenAiRender, ContextCarriesEffortKwargsAndToolCalls) {
  auto req = parse_chat_request(std::string(
      R"({"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"b\":2,\"a\":1}"}}]}],)"
      R"("reasoning_effort":"low","chat_template_kwargs":{"reasoning_effort":"max","custom":1},"preserve_thinking":true})"));
  ASSERT_TRUE(req.ok()) << req.error().message;
  TemplateExtras extras;
  extras.bos_token = "<s>";
  extras.eos_token = "</s>";
  ojson ctx = chat_template_context(*req, extras, req->reasoning_effort);
  EXPECT_EQ(ctx["messages"][1]["content"], "");
  // Arguments go in as the client sent them: the string, not an object re-serialized.
  EXPECT_EQ(ctx["messages"][1]["tool_calls"][0]["function"]["arguments"], R"({"b":2,"a":1})");
  ojson objects = chat_template_context(*req, extras, req->reasoning_effort, /*objects=*/true);
  EXPECT_EQ(objects["messages"][1]["tool_calls"][0]["function"]["arguments"].dump(), R"({"b":2,"a":1})");
  EXPECT_TRUE(objects["messages"][1]["tool_calls"][0]["function"]["arguments"].is_object());
  EXPECT_EQ(ctx["enable_thinking"], true);
  EXPECT_EQ(ctx["reasoning_effort"], "max");  // kwargs outrank the effort field
  EXPECT_EQ(ctx["custom"], 1);
  EXPECT_EQ(ctx["preserve_thinking"], true);
  EXPECT_EQ(ctx["bos_token"], "<s>");
  EXPECT_EQ(ctx["add_generation_prompt"], true);
  EXPECT_FALSE(ctx.contains("tools"));
  ojson none = chat_template_context(*req, extras, std::string("none"));
  EXPECT_EQ(none["enable_thinking"], false);
  ojson unknown = chat_template_context(*req, extras, std::nullopt);
  EXPECT_EQ(unknown["enable_thinking"], true);
}

TEST(OpenAiRender, DefaultEffortAndGenerationPrompt) {
  auto req = parse_chat_request(std::string(R"({"messages":[{"role":"user","content":"hi"}]})"));
  ASSERT_TRUE(req.ok());
  ChatTemplate tmpl = qwen3();
  TemplateExtras extras;
  extras.default_reasoning_effort = "none";  // the server's default turns thinking off
  auto off = render_chat(tmpl, *req, extras);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(*off, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  extras.add_generation_prompt = false;
  auto no_gen = render_chat(tmpl, *req, extras);
  ASSERT_TRUE(no_gen.ok());
  EXPECT_EQ(*no_gen, "<|im_start|>user\nhi<|im_end|>\n");
}

TEST(OpenAiRender, RejectedEffortFallsBack) {
  // A template that only knows low/medium/xhigh, as some reasoning models' templates do.
  auto tmpl = ChatTemplate::parse(
      "{%- if reasoning_effort is defined and reasoning_effort not in ['low', 'medium', 'xhigh'] -%}"
      "{{ raise_exception('unsupported effort ' + reasoning_effort) }}{%- endif -%}"
      "effort={{ reasoning_effort }};{{ messages[0].content }}");
  ASSERT_TRUE(tmpl.ok()) << tmpl.error_message();
  auto render_with = [&](const std::string& effort) {
    auto req = parse_chat_request(std::string(R"({"messages":[{"role":"user","content":"q"}],"reasoning_effort":")") + effort + "\"}");
    EXPECT_TRUE(req.ok());
    return render_chat(*tmpl, *req, TemplateExtras{});
  };
  EXPECT_EQ(render_with("high").value(), "effort=xhigh;q");
  EXPECT_EQ(render_with("max").value(), "effort=xhigh;q");
  EXPECT_EQ(render_with("minimal").value(), "effort=low;q");
  EXPECT_EQ(render_with("medium").value(), "effort=medium;q");
  auto none = render_with("none");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error_message().find("unsupported effort none"), std::string::npos) << none.error_message();
}

TEST(OpenAiRender, TemplateThatIteratesArgumentsGetsThemParsed) {
  // Qwen3.5-style XML tool calls walk the arguments with |items, which a string cannot give: such
  // a template is rendered with the strings parsed; arguments that are no JSON object stay strings.
  auto tmpl = ChatTemplate::parse(
      "{%- for m in messages %}{%- for c in m.tool_calls or [] %}<function={{ c.function.name }}>"
      "{%- for k, v in c.function.arguments|items %}<parameter={{ k }}>{{ v }}</parameter>{%- endfor %}"
      "</function>{%- endfor %}{%- endfor %}");
  ASSERT_TRUE(tmpl.ok()) << tmpl.error_message();
  auto req = parse_chat_request(std::string(
      R"({"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[)"
      R"({"id":"a","type":"function","function":{"name":"f","arguments":"{\"city\":\"Oslo\",\"days\":2}"}}]}]})"));
  ASSERT_TRUE(req.ok()) << req.error().message;
  auto prompt = render_chat(*tmpl, *req, TemplateExtras{});
  ASSERT_TRUE(prompt.ok()) << prompt.error_message();
  EXPECT_EQ(*prompt, "<function=f><parameter=city>Oslo</parameter><parameter=days>2</parameter></function>");
  // A string that is no JSON object cannot be iterated either way: the template's own error.
  auto bad = parse_chat_request(std::string(
      R"({"messages":[{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"f","arguments":"oops"}}]}]})"));
  ASSERT_TRUE(bad.ok()) << bad.error().message;
  EXPECT_FALSE(render_chat(*tmpl, *bad, TemplateExtras{}).ok());
}

// An agent's loop on the Qwen3 template: the arguments the server returns are the model's own bytes,
// the client sends them back as a string, and every later prompt holds that tool call exactly as the
// model wrote it and repeats the earlier turns byte for byte (so the prefix cache keeps hitting).
TEST(OpenAiRender, ToolLoopReRendersTheModelsToolCallExactly) {
  ChatTemplate tmpl = qwen3();
  TemplateExtras extras;
  const std::string tools =
      R"("tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])";
  const std::string generated = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\",  \"when\":[1,2]}}\n</tool_call>";
  // The server's side of turn 1: the parser turns the generated text into the response's call.
  ChatOutputOptions o;
  o.parse_tool_calls = true;
  ChatOutput out(o);
  out.feed(generated, 1);
  out.finish();
  ASSERT_EQ(out.tool_calls().size(), 1u);
  const std::string args = out.tool_calls()[0].arguments;
  EXPECT_EQ(args, R"({"city": "Oslo",  "when":[1,2]})");
  // The client's turn 2 sends the call back as OpenAI's wire format has it: arguments as a string.
  ojson call_msg = {{"role", "assistant"},
                    {"content", nullptr},
                    {"tool_calls", ojson::array({{{"id", "call_1"},
                                                  {"type", "function"},
                                                  {"function", {{"name", "get_weather"}, {"arguments", args}}}}})}};
  ojson turn2 = ojson::parse("{" + tools + R"(,"messages":[{"role":"user","content":"Weather in Oslo?"}]})");
  turn2["messages"].push_back(call_msg);
  turn2["messages"].push_back({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "-3 C"}});
  auto req2 = parse_chat_request(dump_json(turn2));
  ASSERT_TRUE(req2.ok()) << req2.error().message;
  auto p2 = render_chat(tmpl, *req2, extras);
  ASSERT_TRUE(p2.ok()) << p2.error_message();
  EXPECT_NE(p2->find("<|im_start|>assistant\n" + generated + "<|im_end|>"), std::string::npos) << *p2;
  // Turn 3 adds the answer and a new question: turn 2's prompt up to its generation prompt repeats.
  ojson turn3 = turn2;
  turn3["messages"].push_back({{"role", "assistant"}, {"content", "It is -3 C."}});
  turn3["messages"].push_back({{"role", "user"}, {"content", "And tomorrow?"}});
  auto req3 = parse_chat_request(dump_json(turn3));
  ASSERT_TRUE(req3.ok()) << req3.error().message;
  auto p3 = render_chat(tmpl, *req3, extras);
  ASSERT_TRUE(p3.ok()) << p3.error_message();
  const std::string gen_prompt = "<|im_start|>assistant\n";
  ASSERT_EQ(p2->substr(p2->size() - gen_prompt.size()), gen_prompt);
  EXPECT_EQ(p3->substr(0, p2->size() - gen_prompt.size()), p2->substr(0, p2->size() - gen_prompt.size()));
}

}  // namespace
}  // namespace splash::openai
