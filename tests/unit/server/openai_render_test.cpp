// render_chat on the real Qwen3 chat template: every request of openai_render/cases.json must render
// exactly as @huggingface/jinja renders the same conversation (openai_render/expected.json, written
// by make_expected.mjs with its own request -> context mapping).
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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
  EXPECT_EQ(ctx["messages"][1]["tool_calls"][0]["function"]["arguments"].dump(), R"({"b":2,"a":1})");
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

}  // namespace
}  // namespace splash::openai
