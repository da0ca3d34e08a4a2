// Unit tests of the Jinja engine itself: load-time rejection of unsupported constructs (with
// line numbers), runtime errors as Results, and behaviour not covered by the reference cases.
#include <chrono>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "template/chat_template.h"
#include "template/jinja.h"

namespace splash {
namespace {

using ::testing::HasSubstr;
using ojson = nlohmann::ordered_json;

std::string render_ok(const std::string& src, const ojson& ctx = ojson::object()) {
  auto t = JinjaTemplate::parse(src);
  EXPECT_TRUE(t.ok()) << t.error_message();
  if (!t.ok()) return "<parse error>";
  auto out = t->render(ctx);
  EXPECT_TRUE(out.ok()) << out.error_message();
  return out.ok() ? *out : "<render error>";
}

std::string parse_error(const std::string& src) {
  auto t = JinjaTemplate::parse(src);
  EXPECT_FALSE(t.ok()) << "parsed: " << src;
  return t.ok() ? std::string() : t.error_message();
}

std::string render_error(const std::string& src, const ojson& ctx = ojson::object()) {
  auto t = JinjaTemplate::parse(src);
  EXPECT_TRUE(t.ok()) << t.error_message();
  if (!t.ok()) return {};
  auto out = t->render(ctx);
  EXPECT_FALSE(out.ok()) << "rendered: " << (out.ok() ? *out : "");
  return out.ok() ? std::string() : out.error_message();
}

TEST(JinjaParse, UnsupportedStatementsFailAtLoadNamingConstructAndLine) {
  EXPECT_THAT(parse_error("hello\n{% include 'x.jinja' %}"), HasSubstr("line 2: unsupported statement 'include'"));
  EXPECT_THAT(parse_error("{% extends 'base' %}"), HasSubstr("line 1: unsupported statement 'extends'"));
  EXPECT_THAT(parse_error("a\nb\n{% import 'm' as m %}"), HasSubstr("line 3: unsupported statement 'import'"));
  EXPECT_THAT(parse_error("{% block body %}x{% endblock %}"), HasSubstr("unsupported statement 'block'"));
  EXPECT_THAT(parse_error("{% frobnicate %}"), HasSubstr("unknown statement 'frobnicate'"));
}

TEST(JinjaParse, UnknownFilterOrTestFailsAtLoad) {
  EXPECT_THAT(parse_error("x\n\n{{ messages | wordwrap }}"), HasSubstr("line 3: unknown filter 'wordwrap'"));
  EXPECT_THAT(parse_error("{% if x is divisibleby %}{% endif %}"), HasSubstr("unknown test 'divisibleby'"));
  EXPECT_THAT(parse_error("{% filter nosuch %}x{% endfilter %}"), HasSubstr("unknown filter 'nosuch'"));
  // The filter is unknown even though the branch would never run.
  EXPECT_THAT(parse_error("{% if false %}{{ x | bogus(1) }}{% endif %}"), HasSubstr("unknown filter 'bogus'"));
}

TEST(JinjaParse, SyntaxErrorsNameTheLine) {
  EXPECT_THAT(parse_error("ok\n{% if x %}never closed"), HasSubstr("line 2: 'if' block is never closed"));
  EXPECT_THAT(parse_error("{{ 'unterminated }}"), HasSubstr("unterminated string"));
  EXPECT_THAT(parse_error("{# no end"), HasSubstr("unterminated comment"));
  EXPECT_THAT(parse_error("{{ x"), HasSubstr("line 1"));
  EXPECT_THAT(parse_error("{{ (((( }}"), HasSubstr("line 1"));
  EXPECT_THAT(parse_error("{{ x $ y }}"), HasSubstr("unexpected character '$'"));
}

TEST(JinjaParse, DeepNestingIsAnErrorNotAStackOverflow) {
  std::string deep(5000, '(');
  EXPECT_THAT(parse_error("{{ " + deep + "1" + std::string(5000, ')') + " }}"), HasSubstr("nested too deeply"));
  std::string nots;
  for (int i = 0; i < 5000; ++i) nots += "not ";
  EXPECT_THAT(parse_error("{{ " + nots + "x }}"), HasSubstr("nested too deeply"));
}

TEST(JinjaRender, RaiseExceptionAndTypeErrorsAreResults) {
  EXPECT_THAT(render_error("a\n{{ raise_exception('roles must alternate') }}"),
              HasSubstr("line 2: template raised an exception: roles must alternate"));
  EXPECT_THAT(render_error("{{ 1 + none }}"), HasSubstr("none"));
  EXPECT_THAT(render_error("{{ x.startswith('a') }}", {{"x", 5}}), HasSubstr("cannot call 'startswith'"));
  EXPECT_THAT(render_error("{% for x in 5 %}{% endfor %}"), HasSubstr("expected an iterable"));
  EXPECT_THAT(render_error("{% macro r(n) %}{{ r(n) }}{% endmacro %}{{ r(1) }}"), HasSubstr("nested too deeply"));
}

TEST(JinjaRender, ContextMustBeObjectAndNotShadowBuiltins) {
  auto t = JinjaTemplate::parse("{{ x }}");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->render(ojson::array()).ok());
  auto r = t->render(ojson{{"true", 1}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error_message(), HasSubstr("'true'"));
}

TEST(JinjaRender, StrftimeNowUsesInjectedClock) {
  auto t = JinjaTemplate::parse("{{ strftime_now('%Y-%m-%d %H:%M %b %B %% %S') }}");
  ASSERT_TRUE(t.ok());
  std::tm tm{};
  tm.tm_year = 2025 - 1900;
  tm.tm_mon = 2;  // March
  tm.tm_mday = 7;
  tm.tm_hour = 9;
  tm.tm_min = 5;
  tm.tm_isdst = -1;
  JinjaRenderOptions opt;
  opt.now = std::chrono::system_clock::from_time_t(std::mktime(&tm));
  auto out = t->render(ojson::object(), opt);
  ASSERT_TRUE(out.ok()) << out.error_message();
  // %S is not among the reference's directives and stays as written.
  EXPECT_EQ(*out, "2025-03-07 09:05 Mar March % %S");
}

TEST(JinjaRender, WhitespaceControlAndDefaults) {
  // trim_blocks: newline after a block tag goes; lstrip_blocks: indentation before it goes.
  EXPECT_EQ(render_ok("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
  // Expression tags are not block tags: their newline stays.
  EXPECT_EQ(render_ok("{{ 'x' }}\ny"), "x\ny");
  EXPECT_EQ(render_ok("a   {{- 'b' -}}   c"), "abc");
  EXPECT_EQ(render_ok("a {#- c -#} b"), "ab");
  EXPECT_EQ(render_ok("last line\n"), "last line");  // one trailing newline is dropped
}

TEST(JinjaRender, ValuesPrintLikeTheReference) {
  EXPECT_EQ(render_ok("{{ true }} {{ 2.0 }} {{ 3 }} {{ none }}|{{ x }}|{{ l }}", {{"x", 1.0}, {"l", {1.5, "a"}}}),
            "true 2.0 3 |1|[1.5, \"a\"]");
  // Key order of the caller's JSON is kept (ordered_json), as JSON.parse keeps it.
  EXPECT_EQ(render_ok("{{ d | tojson }}", ojson::parse(R"({"d": {"zeta": 1, "alpha": 2}})")),
            "{\"zeta\": 1, \"alpha\": 2}");
}

TEST(ChatTemplate, RendersQwenStyleConversationFromPlainJson) {
  auto t = ChatTemplate::parse(
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}");
  ASSERT_TRUE(t.ok()) << t.error_message();
  nlohmann::json ctx = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"add_generation_prompt", true}};
  auto out = t->render(ctx);
  ASSERT_TRUE(out.ok()) << out.error_message();
  EXPECT_EQ(*out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  nlohmann::json bad = {{"messages", "not a list"}};
  EXPECT_FALSE(t->render(bad).ok());
}

TEST(ChatTemplate, ExtraStringMethodsBeyondTheReference) {
  // find/count are Python str methods the reference lacks; they follow Python here.
  EXPECT_EQ(render_ok("{{ s.find('lo') }} {{ s.find('zz') }} {{ s.count('l') }}", {{"s", "hello"}}), "3 -1 2");
}

}  // namespace
}  // namespace splash
