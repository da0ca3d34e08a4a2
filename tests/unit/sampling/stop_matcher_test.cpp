#include <gtest/gtest.h>

#include "sampling/stop_matcher.h"

namespace splash {
namespace {

StopMatcher make(std::vector<std::string> stops) {
  auto m = StopMatcher::create(std::move(stops));
  SPLASH_CHECK_MSG(m.ok(), m.error_message());
  return std::move(m).value();
}

// Feeds every piece, returns everything emitted (including finish() when no stop matched).
struct Run {
  std::string text;
  bool stopped = false;
  int32_t stop_index = -1;
};
Run run(StopMatcher m, const std::vector<std::string>& pieces) {
  Run r;
  for (const auto& p : pieces) {
    auto f = m.feed(p);
    r.text += f.emit;
    if (f.stopped) {
      r.stopped = true;
      r.stop_index = f.stop_index;
    }
  }
  if (!r.stopped) r.text += m.finish();
  return r;
}

TEST(StopMatcher, MatchAcrossTokenBoundaries) {
  StopMatcher m = make({"<|im_end|>"});
  auto f1 = m.feed("Hello<|im");
  EXPECT_EQ(f1.emit, "Hello");
  EXPECT_FALSE(f1.stopped);
  EXPECT_EQ(m.held_size(), 4u);
  auto f2 = m.feed("_end|>trailing");
  EXPECT_EQ(f2.emit, "");
  EXPECT_TRUE(f2.stopped);
  EXPECT_EQ(f2.stop_index, 0);
  EXPECT_TRUE(m.feed("more").stopped);
  EXPECT_EQ(m.feed("more").emit, "");
  EXPECT_EQ(m.finish(), "");
}

TEST(StopMatcher, HeldTextIsReleasedWhenTheMatchFails) {
  StopMatcher m = make({"<|im_end|>"});
  EXPECT_EQ(m.feed("a<|i").emit, "a");
  EXPECT_EQ(m.feed("m_").emit, "");
  EXPECT_EQ(m.feed("x").emit, "<|im_x");
  EXPECT_EQ(m.feed("<").emit, "");
  EXPECT_EQ(m.finish(), "<");
}

TEST(StopMatcher, OverlappingPartialMatches) {
  // "aab" with stop "ab": the first 'a' cannot start a match once the second arrives.
  StopMatcher m = make({"ab"});
  EXPECT_EQ(m.feed("a").emit, "");
  EXPECT_EQ(m.feed("a").emit, "a");
  auto f = m.feed("b");
  EXPECT_TRUE(f.stopped);
  EXPECT_EQ(f.emit, "");
  // Self-overlapping stop strings: the held prefix shifts instead of being dropped.
  auto r = run(make({"aab"}), {"a", "a", "a", "b", "zz"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "a");
  r = run(make({"abab"}), {"ab", "ac", "aba", "b"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "abac");
  r = run(make({"abab"}), {"ab", "a", "c"});
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.text, "abac");
}

TEST(StopMatcher, ResultDoesNotDependOnHowTheTextIsSplit) {
  const std::string text = "one two <stop> three ab STOP";
  const std::vector<std::string> stops = {"STOP", "<stop>", "b S"};
  const auto whole = run(make(stops), {text});
  EXPECT_TRUE(whole.stopped);
  EXPECT_EQ(whole.text, "one two ");
  EXPECT_EQ(whole.stop_index, 1);
  for (size_t a = 0; a <= text.size(); ++a) {
    for (size_t b = a; b <= text.size(); b += 3) {
      const auto r = run(make(stops), {text.substr(0, a), text.substr(a, b - a), text.substr(b)});
      EXPECT_EQ(r.text, whole.text) << a << "," << b;
      EXPECT_EQ(r.stop_index, whole.stop_index);
    }
  }
}

TEST(StopMatcher, MultipleStopStringsEarliestCompletionWins) {
  // "bc" completes (at byte 3) before "abcd" (byte 4), even though "abcd" starts earlier.
  auto r = run(make({"abcd", "bc"}), {"xabcd"});
  EXPECT_EQ(r.text, "xa");
  EXPECT_EQ(r.stop_index, 1);
  // Same end: the one starting earlier wins.
  r = run(make({"b", "ab"}), {"xab"});
  EXPECT_EQ(r.text, "x");
  EXPECT_EQ(r.stop_index, 1);
  // Holdback uses the longest partial among all stop strings.
  StopMatcher m = make({"xyz", "yzw!"});
  EXPECT_EQ(m.feed("..xyz").stopped, true);
  StopMatcher m2 = make({"xyq", "yzw!"});
  EXPECT_EQ(m2.feed("..xyzw").emit, "..x");
  EXPECT_EQ(m2.held_size(), 3u);
}

TEST(StopMatcher, NoStopStringsPassesTextThrough) {
  StopMatcher m = make({});
  EXPECT_TRUE(m.empty());
  EXPECT_EQ(m.feed("abc").emit, "abc");
  EXPECT_EQ(m.finish(), "");
}

TEST(StopMatcher, NeverSplitsAUtf8Character) {
  // "é" = C3 A9, "日" = E6 97 A5, "😀" = F0 9F 98 80, fed byte by byte.
  const std::string text = "caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x98\x80!";
  StopMatcher m = make({"\xE6\x97\xA5\xE6\x9C\xAC"});  // "日本"
  std::string out;
  for (char c : text) {
    auto f = m.feed(std::string(1, c));
    // Every emitted chunk is whole characters.
    EXPECT_EQ(utf8_text_boundary(f.emit), f.emit.size());
    if (!f.emit.empty()) {
      EXPECT_NE(static_cast<unsigned char>(f.emit[0]) & 0xC0, 0x80) << "chunk starts mid-character";
    }
    out += f.emit;
  }
  out += m.finish();
  EXPECT_EQ(out, text);
}

TEST(StopMatcher, Utf8StopStringAcrossSplitCharacters) {
  // "日本" split inside both characters; the text before it is emitted whole.
  auto r = run(make({"\xE6\x97\xA5\xE6\x9C\xAC"}), {"a\xC3", "\xA9\xE6\x97", "\xA5\xE6", "\x9C\xAC", "z"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "a\xC3\xA9");
}

TEST(StopMatcher, InvalidStopStringsAreRejected) {
  auto a = StopMatcher::create({"ok", ""});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error_message(), "stop: stop string 1 is empty");
  auto b = StopMatcher::create({"\xA9x"});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error_message(), "stop: stop string 0 is not valid UTF-8");
}

TEST(Utf8, CompletePrefix) {
  EXPECT_EQ(utf8_text_boundary(""), 0u);
  EXPECT_EQ(utf8_text_boundary("abc"), 3u);
  EXPECT_EQ(utf8_text_boundary("ab\xC3"), 2u);
  EXPECT_EQ(utf8_text_boundary("ab\xC3\xA9"), 4u);
  EXPECT_EQ(utf8_text_boundary("a\xF0\x9F\x98"), 1u);
  EXPECT_EQ(utf8_text_boundary("a\xF0\x9F\x98\x80"), 5u);
  EXPECT_EQ(utf8_text_boundary("a\x80"), 2u);  // stray continuation byte: not held
  EXPECT_EQ(utf8_text_boundary("a\xFF"), 2u);  // invalid byte: not held
}

TEST(StopTokens, SetMembership) {
  StopTokens st(std::vector<int32_t>{151645, 2, 151643, 2});
  EXPECT_EQ(st.ids().size(), 3u);
  EXPECT_TRUE(st.contains(2));
  EXPECT_TRUE(st.contains(151645));
  EXPECT_FALSE(st.contains(3));
  st.add(3);
  st.add(3);
  EXPECT_TRUE(st.contains(3));
  EXPECT_EQ(st.ids().size(), 4u);
}

}  // namespace
}  // namespace splash
