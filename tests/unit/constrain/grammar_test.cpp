// Grammars, the pushdown matcher, regex, GBNF and integer ranges, checked on whole strings.
#include <gtest/gtest.h>

#include <random>

#include "constrain/gbnf.h"
#include "constrain/json_schema.h"
#include "constrain/pda.h"
#include "constrain/regex.h"

namespace splash::constrain {
namespace {

// Does the grammar match exactly `s`?
bool matches(const Grammar& g, std::string_view s) {
  Pda pda(g);
  FrameArena arena;
  Config c = pda.start(arena);
  return pda.advance(c, s, arena) && c.can_end;
}

// Is `s` a prefix of some string of the grammar?
bool viable(const Grammar& g, std::string_view s) {
  Pda pda(g);
  FrameArena arena;
  Config c = pda.start(arena);
  return pda.advance(c, s, arena);
}

std::shared_ptr<const Grammar> gbnf(std::string_view text) {
  auto g = compile_gbnf(text);
  EXPECT_TRUE(g.ok()) << g.error_message();
  return g.ok() ? *g : nullptr;
}

TEST(Grammar, LiteralsAlternativesAndBoundedRepeats) {
  GrammarBuilder b;
  const int32_t r = b.declare_rule("root");
  b.define_rule(r, b.seq({b.alt({b.literal("ab"), b.literal("abc")}), b.repeat(b.literal("x"), 2, 3)}));
  auto g = b.build(r);
  ASSERT_TRUE(g.ok()) << g.error_message();
  for (auto s : {"abxx", "abxxx", "abcxx", "abcxxx"}) EXPECT_TRUE(matches(*g, s)) << s;
  for (auto s : {"ab", "abx", "abxxxx", "abcx", "abd", ""}) EXPECT_FALSE(matches(*g, s)) << s;
  EXPECT_TRUE(viable(*g, "abc"));
  EXPECT_FALSE(viable(*g, "abd"));
}

TEST(Grammar, RecursionThroughCalls) {
  auto g = gbnf(R"g(root ::= "(" root ")" | "")g");
  for (auto s : {"", "()", "(())", "((()))"}) EXPECT_TRUE(matches(*g, s)) << s;
  for (auto s : {"(", "())", ")("}) EXPECT_FALSE(matches(*g, s)) << s;
}

TEST(Grammar, RefusesLeftRecursionAndEmptyLanguages) {
  auto left = compile_gbnf("root ::= root \"a\" | \"a\"");
  ASSERT_FALSE(left.ok());
  EXPECT_NE(left.error().message.find("left-recursive"), std::string::npos) << left.error().message;
  auto hidden = compile_gbnf("root ::= x \"a\"\nx ::= y\ny ::= \"\" | root");
  EXPECT_FALSE(hidden.ok());
  auto none = compile_gbnf("root ::= x\nx ::= \"a\" x");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("no string"), std::string::npos) << none.error().message;
  auto undefined = compile_gbnf("root ::= missing");
  ASSERT_FALSE(undefined.ok());
  EXPECT_NE(undefined.error().message.find("missing"), std::string::npos);
}

TEST(Grammar, LongRepetitionsOfOneCharacterCount) {
  // One counting state instead of a state per position; the counts are exact, from both ends.
  GrammarBuilder b;
  const int32_t r = b.declare_rule("root");
  b.define_rule(r, b.seq({b.literal("<"), b.counted(b.bytes(ByteSet::range('a', 'c')), 9, 12), b.literal(">"),
                          b.counted(b.bytes(ByteSet::of('x')), 10, -1)}));
  auto g = b.build(r);
  ASSERT_TRUE(g.ok()) << g.error_message();
  EXPECT_EQ(g->counters.size(), 2u);
  EXPECT_LT(g->states.size(), 16u);
  const std::string xs(10, 'x');
  for (int n = 0; n <= 14; ++n) {
    std::string s = "<";
    s.append(static_cast<size_t>(n), 'b');
    s += ">";
    EXPECT_EQ(matches(*g, s + xs), n >= 9 && n <= 12) << s;
    EXPECT_EQ(viable(*g, s), n >= 9 && n <= 12) << s;
  }
  EXPECT_FALSE(matches(*g, std::string("<aaaaaaaaa>").append(9, 'x')));
  EXPECT_TRUE(matches(*g, std::string("<aaaaaaaaa>").append(300, 'x')));
  // An item that is not one character (two bytes, or one that may read on) is unrolled instead.
  GrammarBuilder u;
  const int32_t q = u.declare_rule("root");
  u.define_rule(q, u.counted(u.alt({u.literal("a"), u.literal("ab")}), 9, 10));
  auto unrolled = u.build(q);
  ASSERT_TRUE(unrolled.ok()) << unrolled.error_message();
  EXPECT_TRUE(unrolled->counters.empty());
  EXPECT_TRUE(matches(*unrolled, "ababababaaaaa"));
  EXPECT_FALSE(matches(*unrolled, "aaaaaaaa"));
  // A JSON string's maxLength counts characters: escapes and UTF-8 sequences are one each.
  auto str = compile_json_schema(nlohmann::ordered_json::parse(R"({"type":"string","minLength":9,"maxLength":10})"));
  ASSERT_TRUE(str.ok()) << str.error_message();
  EXPECT_FALSE((*str)->counters.empty());
  const std::string head = "\"\\n\\u00e9\xc3\xa9" "\xe2\x82\xac" "\\\"";  // 5 characters
  EXPECT_TRUE(matches(**str, head + "abcd\""));
  EXPECT_TRUE(matches(**str, head + "abcde\""));
  EXPECT_FALSE(matches(**str, head + "abcdef\""));
  EXPECT_FALSE(matches(**str, head + "abc\""));
}

TEST(Grammar, TooLargeIsAnError) {
  GrammarBuilder b;
  const int32_t r = b.declare_rule("root");
  b.define_rule(r, b.repeat(b.repeat(b.literal("abc"), 0, 1000), 0, 1000));
  auto g = b.build(r);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().message.find("too large"), std::string::npos) << g.error().message;
}

TEST(Gbnf, LlamaCppStyleGrammar) {
  auto g = gbnf(R"(# a list of arithmetic answers
root   ::= answer ("\n" answer)*
answer ::= "x = " num
num    ::= "-"? [0-9]+ ("." [0-9]{1,2})?   # up to two decimals
)");
  for (auto s : {"x = 1", "x = -12.5\nx = 3.25"}) EXPECT_TRUE(matches(*g, s)) << s;
  for (auto s : {"x = ", "x = 1.234", "x = 1\n", "y = 2"}) EXPECT_FALSE(matches(*g, s)) << s;
  auto multi = gbnf("root ::= (\n  \"a\" |\n  \"b\"\n) [^a-z]");
  EXPECT_TRUE(matches(*multi, "aX"));
  EXPECT_TRUE(matches(*multi, "b\xc3\xa9"));  // a negated ASCII class takes a whole UTF-8 character
  EXPECT_FALSE(matches(*multi, "ab"));
  EXPECT_FALSE(compile_gbnf("root ::= <[123]>").ok());
  EXPECT_FALSE(compile_gbnf("other ::= \"a\"").ok());
  auto bad = compile_gbnf("root ::= \"a\"\nx ::= \"b");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("line 2"), std::string::npos) << bad.error().message;
}

TEST(Regex, SubsetMatchesLikeEcmaScript) {
  auto g = compile_regex_grammar(R"(^[A-Z][a-z]+(-[A-Z][a-z]+)?\d{2,3}$)");
  ASSERT_TRUE(g.ok()) << g.error_message();
  for (auto s : {"Anna12", "Anna-Maria123"}) EXPECT_TRUE(matches(**g, s)) << s;
  for (auto s : {"anna12", "Anna1", "Anna1234", "Anna-maria12"}) EXPECT_FALSE(matches(**g, s)) << s;
  auto dot = compile_regex_grammar("a.c");
  EXPECT_TRUE(matches(**dot, "a\xe2\x82\xac" "c"));  // '.' is one character, here three bytes
  EXPECT_FALSE(matches(**dot, "a\nc"));
  EXPECT_FALSE(matches(**dot, "a\xe2\x82" "c"));
  for (auto bad : {"(a", "a)", "\\1", "(?=a)", "a{2,1}", "a++", "[b-a]", "\\bword"}) {
    EXPECT_FALSE(compile_regex_grammar(bad).ok()) << bad;
  }
}

TEST(Regex, JsonStringTargetEscapes) {
  GrammarBuilder b;
  auto re = compile_regex(R"(^a"b\\c$)", RegexTarget::kJsonString, b);
  ASSERT_TRUE(re.ok()) << re.error_message();
  const int32_t r = b.declare_rule("root");
  b.define_rule(r, re->expr);
  auto g = b.build(r);
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(matches(*g, R"(a\"b\\c)"));
  EXPECT_FALSE(matches(*g, R"(a"b\c)"));
}

TEST(IntegerRange, EveryValueInAWindow) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> pick(-2500, 2500);
  for (int trial = 0; trial < 40; ++trial) {
    std::optional<int64_t> lo = pick(rng), hi = pick(rng);
    if (trial % 5 == 0) lo.reset();
    if (trial % 7 == 0) hi.reset();
    if (lo && hi && *lo > *hi) std::swap(*lo, *hi);
    GrammarBuilder b;
    const int32_t r = b.declare_rule("int");
    b.define_rule(r, integer_range(lo, hi, b));
    auto g = b.build(r);
    ASSERT_TRUE(g.ok()) << g.error_message();
    for (int64_t v = -3000; v <= 3000; ++v) {
      const bool in = (!lo || v >= *lo) && (!hi || v <= *hi);
      ASSERT_EQ(matches(*g, std::to_string(v)), in) << v << " in [" << (lo ? *lo : -999999) << ", "
                                                    << (hi ? *hi : 999999) << "]";
    }
    EXPECT_FALSE(matches(*g, "007"));
    EXPECT_FALSE(matches(*g, "-0"));
  }
}

}  // namespace
}  // namespace splash::constrain
