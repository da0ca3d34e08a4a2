// JSON Schema compilation: documents that validate are accepted, ones that do not are refused, and
// keywords that cannot be enforced are errors naming them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "constrain/json_schema.h"
#include "constrain/pda.h"

namespace splash::constrain {
namespace {

using json = nlohmann::ordered_json;

bool matches(const Grammar& g, std::string_view s) {
  Pda pda(g);
  FrameArena arena;
  Config c = pda.start(arena);
  return pda.advance(c, s, arena) && c.can_end;
}

std::shared_ptr<const Grammar> compile(const char* schema, JsonSchemaOptions o = {}) {
  auto g = compile_json_schema(json::parse(schema), o);
  EXPECT_TRUE(g.ok()) << g.error_message();
  return g.ok() ? *g : nullptr;
}

TEST(JsonSchema, ObjectWithRequiredAndOptionalProperties) {
  auto g = compile(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},
                      "c":{"type":"boolean"}},"required":["b"],"additionalProperties":false})");
  for (auto s : {R"({"b":"x"})", R"({"a":1,"b":""})", R"({"b":"x","c":true})", R"({"a":-5,"b":"q","c":false})"}) {
    EXPECT_TRUE(matches(*g, s)) << s;
  }
  for (auto s : {R"({})", R"({"a":1})", R"({"b":1})", R"({"b":"x",})", R"({"c":true,"b":"x"})", R"({"b":"x","d":1})",
                 R"({"b":"x"} )"}) {
    EXPECT_FALSE(matches(*g, s)) << s;
  }
}

TEST(JsonSchema, AllOptionalPropertiesMayAllBeLeftOut) {
  auto g = compile(R"({"type":"object","properties":{"a":{"type":"null"},"b":{"enum":["x",2,null]}}})");
  for (auto s : {"{}", R"({"a":null})", R"({"b":"x"})", R"({"b":2})", R"({"a":null,"b":null})"}) {
    EXPECT_TRUE(matches(*g, s)) << s;
  }
  for (auto s : {R"({,"b":2})", R"({"b":3})", R"({"a":null,})"}) EXPECT_FALSE(matches(*g, s)) << s;
}

TEST(JsonSchema, Whitespace) {
  const char* schema = R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}},"required":["a"]})";
  auto compact = compile(schema);
  EXPECT_TRUE(matches(*compact, R"({"a":[1,2]})"));
  EXPECT_FALSE(matches(*compact, R"({"a": [1, 2]})"));
  auto spaced = compile(schema, {JsonWhitespace::kSpaced});
  EXPECT_TRUE(matches(*spaced, R"({"a": [1, 2]})"));
  EXPECT_FALSE(matches(*spaced, R"({"a":[1,2]})"));
  auto flexible = compile(schema, {JsonWhitespace::kFlexible});
  EXPECT_TRUE(matches(*flexible, "{\n  \"a\" : [ 1 ,2 ]\n}"));
  EXPECT_TRUE(matches(*flexible, R"({"a":[1,2]})"));
}

TEST(JsonSchema, ArraysWithBoundsAndPrefixItems) {
  auto g = compile(R"({"type":"array","items":{"type":"string"},"minItems":1,"maxItems":3})");
  for (auto s : {R"(["a"])", R"(["a","b","c"])"}) EXPECT_TRUE(matches(*g, s)) << s;
  for (auto s : {"[]", R"(["a","b","c","d"])", "[1]"}) EXPECT_FALSE(matches(*g, s)) << s;
  auto tuple = compile(R"({"type":"array","prefixItems":[{"type":"integer"},{"type":"boolean"}],"items":false})");
  for (auto s : {"[]", "[1]", "[1,true]"}) EXPECT_TRUE(matches(*tuple, s)) << s;
  for (auto s : {"[true]", "[1,true,2]"}) EXPECT_FALSE(matches(*tuple, s)) << s;
}

TEST(JsonSchema, StringsLengthsPatternsFormats) {
  auto len = compile(R"({"type":"string","minLength":2,"maxLength":3})");
  for (auto s : {R"("ab")", R"("a\"b")", "\"\xc3\xa9\xc3\xa9\""}) EXPECT_TRUE(matches(*len, s)) << s;
  for (auto s : {R"("a")", R"("abcd")", "\"a\nb\""}) EXPECT_FALSE(matches(*len, s)) << s;
  auto pat = compile(R"({"type":"string","pattern":"^[a-z]+_[0-9]$"})");
  EXPECT_TRUE(matches(*pat, R"("abc_1")"));
  EXPECT_FALSE(matches(*pat, R"("abc_12")"));
  auto search = compile(R"({"type":"string","pattern":"[0-9]{3}"})");  // unanchored: found anywhere
  EXPECT_TRUE(matches(*search, R"("ab123cd")"));
  EXPECT_FALSE(matches(*search, R"("ab12cd")"));
  auto date = compile(R"({"type":"string","format":"date-time"})");
  EXPECT_TRUE(matches(*date, R"("2026-12-06T16:45:00Z")"));
  EXPECT_TRUE(matches(*date, R"("2026-12-06T16:45:00.25+01:00")"));
  EXPECT_FALSE(matches(*date, R"("2026-13-06T16:45:00Z")"));
  auto uuid = compile(R"({"type":"string","format":"uuid"})");
  EXPECT_TRUE(matches(*uuid, R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(matches(*uuid, R"("123e4567")"));
}

TEST(JsonSchema, NumbersAndIntegers) {
  auto n = compile(R"({"type":"number"})");
  for (auto s : {"0", "-1.5", "3e10", "2.5E-3"}) EXPECT_TRUE(matches(*n, s)) << s;
  for (auto s : {"01", ".5", "1.", "+1", "1e"}) EXPECT_FALSE(matches(*n, s)) << s;
  auto i = compile(R"({"type":"integer","minimum":-3,"exclusiveMaximum":10})");
  for (auto s : {"-3", "0", "9"}) EXPECT_TRUE(matches(*i, s)) << s;
  for (auto s : {"-4", "10", "1.0"}) EXPECT_FALSE(matches(*i, s)) << s;
  auto positive = compile(R"({"type":"number","exclusiveMinimum":0})");
  for (auto s : {"1", "0.5", "0.001", "12.0"}) EXPECT_TRUE(matches(*positive, s)) << s;
  for (auto s : {"0", "0.0", "-1", "0.000"}) EXPECT_FALSE(matches(*positive, s)) << s;
}

TEST(JsonSchema, UnionsRefsAndRecursion) {
  auto g = compile(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
                      "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"],
                      "additionalProperties":false}},"$ref":"#/$defs/node"})");
  EXPECT_TRUE(matches(*g, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]})"));
  EXPECT_FALSE(matches(*g, R"({"v":1,"kids":[{"w":2}]})"));
  auto u = compile(R"({"type":["string","null"]})");
  EXPECT_TRUE(matches(*u, "null"));
  EXPECT_TRUE(matches(*u, R"("x")"));
  EXPECT_FALSE(matches(*u, "1"));
  auto any_of = compile(R"({"anyOf":[{"type":"integer"},{"const":"auto"}]})");
  EXPECT_TRUE(matches(*any_of, "12"));
  EXPECT_TRUE(matches(*any_of, R"("auto")"));
  EXPECT_FALSE(matches(*any_of, R"("manual")"));
  auto all_of = compile(R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
                           {"properties":{"b":{"type":"string"}},"required":["b"]}]})");
  EXPECT_TRUE(matches(*all_of, R"({"a":1,"b":"x"})"));
  EXPECT_FALSE(matches(*all_of, R"({"a":1})"));
}

TEST(JsonSchema, AnyJsonForTrueAndJsonObject) {
  auto obj = compile(R"({"type":"object"})");
  EXPECT_TRUE(matches(*obj, R"({"a":[1,{"b":null}],"c":"d"})"));
  EXPECT_FALSE(matches(*obj, "[1]"));
  auto any = compile("true");
  for (auto s : {"1", "\"s\"", "[]", "{}", "null"}) EXPECT_TRUE(matches(*any, s)) << s;
}

TEST(JsonSchema, UnsupportedKeywordsAreErrorsNamingThem) {
  for (auto [schema, word] : std::vector<std::pair<const char*, const char*>>{
           {R"({"type":"object","patternProperties":{"^a":{}}})", "patternProperties"},
           {R"({"not":{"type":"string"}})", "not"},
           {R"({"type":"array","uniqueItems":true})", "uniqueItems"},
           {R"({"type":"string","format":"hostname"})", "hostname"},
           {R"({"type":"number","maximum":5})", "maximum"},
           {R"({"$ref":"https://example.com/s.json"})", "not local"},
           {R"({"$ref":"#/$defs/missing"})", "points at nothing"},
           {R"j({"type":"string","pattern":"(?=a)"})j", "lookaround"},
           {R"({"type":"strnig"})", "strnig"}}) {
    auto g = compile_json_schema(json::parse(schema));
    ASSERT_FALSE(g.ok()) << schema;
    EXPECT_NE(g.error().message.find(word), std::string::npos) << g.error().message;
  }
}

}  // namespace
}  // namespace splash::constrain
