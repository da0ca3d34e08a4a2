// Token masks: the cached masks equal the slow per-token reference on random positions, sampling
// under the mask always yields a valid document, and rollback restores earlier masks.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "constrain/constraint.h"
#include "constrain/gbnf.h"
#include "constrain/json_schema.h"
#include "constrain/matcher.h"

namespace splash::constrain {
namespace {

using json = nlohmann::ordered_json;

// A vocabulary like a BPE one: every single byte, then frequent JSON-ish multi-byte pieces and
// random strings over a JSON-heavy alphabet; two special tokens, the last one the stop token.
std::shared_ptr<const Vocabulary> make_vocab(uint64_t seed, int n_random) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  for (auto t : {"{\"", "\":", "\",", "\"}", "\"]", "},", "}]", "]}", "true", "false", "null", "\": ", ", \"",
                 "name", "\"name", "12", "2026", "-0", "0.", "\\n", "\\\"", "ab", "abc", " {", "\n  ", "\xc3\xa9"}) {
    tokens.push_back(t);
  }
  std::mt19937_64 rng(seed);
  const std::string alphabet = "{}[]\":,0123456789-.eEabcxyz _\\ntruefalsn";
  std::uniform_int_distribution<int> len(2, 7), ch(0, static_cast<int>(alphabet.size()) - 1);
  for (int i = 0; i < n_random; ++i) {
    std::string s;
    const int n = len(rng);
    for (int k = 0; k < n; ++k) s += alphabet[ch(rng)];
    tokens.push_back(s);
  }
  tokens.push_back("");  // a special token the grammar never produces
  tokens.push_back("");  // the stop token
  const auto stop = static_cast<int32_t>(tokens.size() - 1);
  return std::make_shared<Vocabulary>(std::move(tokens), std::vector<int32_t>{stop});
}

std::vector<int32_t> allowed(const std::vector<uint64_t>& mask) {
  std::vector<int32_t> out;
  for (size_t w = 0; w < mask.size(); ++w) {
    for (int b = 0; b < 64; ++b) {
      if ((mask[w] >> b) & 1) out.push_back(static_cast<int32_t>(w * 64 + b));
    }
  }
  return out;
}

const char* kSchemas[] = {
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,
        "maximum":150},"tags":{"type":"array","items":{"enum":["a","b","xyz"]},"maxItems":3}},"required":["name"],
        "additionalProperties":false})",
    R"({"$defs":{"t":{"type":"object","properties":{"v":{"type":"number"},"k":{"type":"array","items":{"$ref":"#/$defs/t"},
        "maxItems":2}},"required":["v","k"],"additionalProperties":false}},"$ref":"#/$defs/t"})",
    R"({"type":"object"})",
    R"({"type":"array","items":{"type":["boolean","null","string"]},"minItems":2,"maxItems":4})",
};

TEST(Matcher, CachedMasksEqualTheReference) {
  auto vocab = make_vocab(1, 3000);
  auto cache = std::make_shared<MaskCache>(vocab);
  std::mt19937_64 rng(11);
  for (const char* schema : kSchemas) {
    auto g = compile_json_schema(json::parse(schema), {JsonWhitespace::kSpaced});
    ASSERT_TRUE(g.ok()) << g.error_message();
    for (int run = 0; run < 6; ++run) {
      Matcher m(*g, cache);
      std::vector<uint64_t> fast(vocab->mask_words()), slow(vocab->mask_words());
      for (int step = 0; step < 60 && !m.ended(); ++step) {
        m.fill_mask(fast.data());
        m.fill_mask_reference(slow.data());
        ASSERT_EQ(allowed(fast), allowed(slow)) << schema << " step " << step;
        const auto options = allowed(fast);
        ASSERT_FALSE(options.empty()) << "no token allowed at step " << step;
        std::uniform_int_distribution<size_t> pick(0, options.size() - 1);
        ASSERT_TRUE(m.accept(options[pick(rng)]));
      }
    }
  }
  EXPECT_GT(cache->entries(), 10u);
}

// Counting rules (long string lengths, regex {m,n}) derive masks from a token table per count:
// compare them with the reference at every count, with tokens of many characters (escapes, UTF-8)
// and tokens that leave the repetition part-way.
TEST(Matcher, CountedRepetitionMasksEqualTheReference) {
  auto vocab = make_vocab(2, 3000);
  auto cache = std::make_shared<MaskCache>(vocab);
  std::mt19937_64 rng(12);
  const char* schemas[] = {
      R"({"type":"object","properties":{"a":{"type":"string","minLength":9,"maxLength":14},
          "b":{"type":"string","pattern":"^[a-c]{10,12}x[0-9]{9,}$"}},"required":["a","b"],"additionalProperties":false})",
      R"({"type":"array","items":{"type":"string","minLength":10},"minItems":1,"maxItems":3})",
  };
  int counted_grammars = 0;
  for (const char* schema : schemas) {
    auto g = compile_json_schema(json::parse(schema), {JsonWhitespace::kSpaced});
    ASSERT_TRUE(g.ok()) << g.error_message();
    counted_grammars += (*g)->counters.empty() ? 0 : 1;
    for (int run = 0; run < 8; ++run) {
      Matcher m(*g, cache);
      std::vector<uint64_t> fast(vocab->mask_words()), slow(vocab->mask_words());
      for (int step = 0; step < 80 && !m.ended(); ++step) {
        m.fill_mask(fast.data());
        m.fill_mask_reference(slow.data());
        ASSERT_EQ(allowed(fast), allowed(slow)) << schema << " run " << run << " step " << step;
        auto options = allowed(fast);
        ASSERT_FALSE(options.empty()) << "no token allowed at step " << step;
        // Favour single bytes now and then, so runs stop at every count, not only past long tokens.
        std::uniform_int_distribution<size_t> pick(0, options.size() - 1);
        int32_t t = options[pick(rng)];
        if (step % 3 == 0) {
          for (int32_t o : options) {
            if (vocab->bytes(o).size() == 1 && rng() % 4 == 0) {
              t = o;
              break;
            }
          }
        }
        ASSERT_TRUE(m.accept(t));
      }
    }
  }
  EXPECT_EQ(counted_grammars, 2);
}

// Strict tools under tool_choice auto: text is free (it may end at once), and from the call opener
// on only a call of an offered tool with valid arguments can follow.
TEST(Matcher, StrictToolsUnderAutoConstrainFromTheOpenerOn) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, static_cast<char>(b)));
  for (auto t : {"<tool_call>", "</tool_call>", "Hello", " world", "<tool", "_call>", "\n{\"", "name", "\": \"", "get",
                 "_weather", "arguments", "city", "Oslo", "Rome", "Paris", "\"}}", "\"}"}) {
    tokens.push_back(t);
  }
  tokens.push_back("");  // the stop token
  const auto stop = static_cast<int32_t>(tokens.size() - 1);
  auto id = [&](std::string_view piece) {
    return static_cast<int32_t>(std::find(tokens.begin(), tokens.end(), piece) - tokens.begin());
  };
  const int32_t opener = id("<tool_call>");
  auto vocab = std::make_shared<Vocabulary>(tokens, std::vector<int32_t>{stop});
  ConstraintCompiler compiler([&] { return Vocabulary(tokens, {stop}); });
  ConstraintSpec spec;
  spec.kind = ConstraintSpec::Kind::kToolCalls;
  spec.parallel_calls = false;
  spec.calls_after_text = true;
  spec.text = R"([{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"enum":["Oslo","Rome"]}},
                  "required":["city"],"additionalProperties":false}}])";
  auto m = compiler.matcher(spec);
  ASSERT_TRUE(m.ok()) << m.error_message();
  Matcher& matcher = **m;
  EXPECT_TRUE(matcher.can_end());
  // Free text, byte by byte and in pieces that spell the opener across tokens.
  for (const char* piece : {"Hello", " world", "<tool"}) ASSERT_TRUE(matcher.accept(id(piece))) << piece;
  EXPECT_TRUE(matcher.can_end());
  std::vector<uint64_t> fast(vocab->mask_words()), slow(vocab->mask_words());
  matcher.fill_mask(fast.data());
  matcher.fill_mask_reference(slow.data());
  EXPECT_EQ(allowed(fast), allowed(slow));
  ASSERT_TRUE(matcher.accept(id("_call>")));  // the opener is complete
  EXPECT_FALSE(matcher.can_end());
  // From here only the call: its name, then arguments valid for the schema.
  std::mt19937_64 rng(5);
  std::string call = "<tool_call>";
  for (int step = 0; step < 200 && !matcher.ended(); ++step) {
    matcher.fill_mask(fast.data());
    matcher.fill_mask_reference(slow.data());
    ASSERT_EQ(allowed(fast), allowed(slow)) << call;
    const auto options = allowed(fast);
    ASSERT_FALSE(options.empty()) << call;
    EXPECT_FALSE(matcher.allows(opener) && call.find("arguments") != std::string::npos) << call;
    const int32_t t = options[std::uniform_int_distribution<size_t>(0, options.size() - 1)(rng)];
    ASSERT_TRUE(matcher.accept(t));
    call += vocab->bytes(t);
  }
  ASSERT_TRUE(matcher.ended()) << call;
  const size_t open = call.find('{'), close = call.rfind("\n</tool_call>");
  ASSERT_NE(close, std::string::npos) << call;
  const auto body = json::parse(call.substr(open, close - open));
  EXPECT_EQ(body["name"], "get_weather");
  const std::string city = body["arguments"]["city"];
  EXPECT_TRUE(city == "Oslo" || city == "Rome") << call;
  // Text that never opens a call may end; after the opener, a wrong name or argument may not come.
  auto text = compiler.matcher(spec);
  EXPECT_TRUE((*text)->accept(id("Paris")));
  EXPECT_TRUE((*text)->accept(stop));
  auto wrong = compiler.matcher(spec);
  ASSERT_TRUE((*wrong)->accept(opener));
  EXPECT_FALSE((*wrong)->allows(id("Paris")));
  for (const char* piece : {"\n{\"", "name", "\": \"", "get", "_weather"}) ASSERT_TRUE((*wrong)->accept(id(piece))) << piece;
  for (char c : std::string_view("\", \"arguments\": {\"city\": \"")) ASSERT_TRUE((*wrong)->accept(static_cast<uint8_t>(c)));
  EXPECT_FALSE((*wrong)->allows(id("Paris")));
  EXPECT_TRUE((*wrong)->allows(id("Oslo")));
}

// Random sampling under the mask (what a random-weight model does) until the stop token.
std::string sample(Matcher& m, const Vocabulary& vocab, std::mt19937_64& rng, int max_tokens) {
  std::vector<uint64_t> mask(vocab.mask_words());
  std::string out;
  for (int step = 0; step < max_tokens; ++step) {
    m.fill_mask(mask.data());
    auto options = allowed(mask);
    const int32_t stop = vocab.stop_tokens()[0];
    // Past a budget, prefer the stop token and short tokens so documents finish.
    if (step > max_tokens / 2 && std::find(options.begin(), options.end(), stop) != options.end()) return out;
    std::uniform_int_distribution<size_t> pick(0, options.size() - 1);
    const int32_t t = options[pick(rng)];
    EXPECT_TRUE(m.accept(t));
    if (t == stop) return out;
    out += vocab.bytes(t);
  }
  return out;
}

TEST(Matcher, SampledDocumentsParseAndMeetTheSchema) {
  auto vocab = make_vocab(2, 2000);
  auto cache = std::make_shared<MaskCache>(vocab);
  auto g = compile_json_schema(json::parse(kSchemas[0]));
  ASSERT_TRUE(g.ok());
  std::mt19937_64 rng(5);
  int finished = 0;
  for (int i = 0; i < 300; ++i) {
    Matcher m(*g, cache);
    const std::string doc = sample(m, *vocab, rng, 400);
    if (!m.ended()) continue;
    ++finished;
    json v = json::parse(doc, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << doc;
    ASSERT_TRUE(v.is_object()) << doc;
    ASSERT_TRUE(v.contains("name") && v["name"].is_string()) << doc;
    for (auto it = v.begin(); it != v.end(); ++it) {
      ASSERT_TRUE(it.key() == "name" || it.key() == "age" || it.key() == "tags") << doc;
    }
    if (v.contains("age")) {
      ASSERT_TRUE(v["age"].is_number_integer() && v["age"] >= 0 && v["age"] <= 150) << doc;
    }
    if (v.contains("tags")) {
      ASSERT_LE(v["tags"].size(), 3u) << doc;
    }
  }
  EXPECT_GT(finished, 100);
}

TEST(Matcher, RollbackRestoresMasksAndForkIsIndependent) {
  auto vocab = make_vocab(3, 500);
  auto cache = std::make_shared<MaskCache>(vocab);
  auto g = compile_gbnf(R"(root ::= "ab" [0-9]+ "c")");
  ASSERT_TRUE(g.ok());
  Matcher m(*g, cache);
  std::vector<uint64_t> before(vocab->mask_words()), after(vocab->mask_words());
  m.fill_mask(before.data());
  ASSERT_TRUE(m.accept('a'));
  Matcher f = m.fork();
  ASSERT_TRUE(m.accept('b'));
  ASSERT_TRUE(m.accept('7'));
  EXPECT_FALSE(m.accept('x'));
  EXPECT_FALSE(m.can_end());
  ASSERT_TRUE(m.accept('c'));
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.must_end());
  m.rollback(4);
  m.fill_mask(after.data());
  EXPECT_EQ(allowed(before), allowed(after));
  EXPECT_TRUE(f.accept('b'));  // the fork still stands after "a"
  const int32_t stop = vocab->stop_tokens()[0];
  EXPECT_FALSE(f.allows(stop));
}

TEST(Matcher, StopTokenOnlyWhereTheGrammarMayEnd) {
  auto vocab = make_vocab(4, 200);
  auto cache = std::make_shared<MaskCache>(vocab);
  auto g = compile_gbnf(R"(root ::= "12" "3"?)");
  ASSERT_TRUE(g.ok());
  Matcher m(*g, cache);
  const int32_t stop = vocab->stop_tokens()[0];
  EXPECT_FALSE(m.allows(stop));
  ASSERT_TRUE(m.accept('1'));
  ASSERT_TRUE(m.accept('2'));
  EXPECT_TRUE(m.allows(stop));
  EXPECT_TRUE(m.allows('3'));
  ASSERT_TRUE(m.accept(stop));
  EXPECT_TRUE(m.ended());
  EXPECT_FALSE(m.accept('3'));
}

}  // namespace
}  // namespace splash::constrain
