// IncrementalDetokenizer: streamed chunks concatenate to decode(all) and never end inside a UTF-8
// sequence, for byte-level BPE (Qwen3 tokenizer.json) and SentencePiece with byte fallback (GGUF llama).
#include "formats/gguf.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace splash {
namespace {

// True if `s` is complete, valid UTF-8 (independent of utf8_complete_prefix).
bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

const std::vector<std::string>& heavy_strings() {
  static const std::vector<std::string> v = {
      "👨‍👩‍👧‍👦 family 🏳️‍🌈 flag 👋🏽👋🏿",
      "今天天气很好，我们去公园散步吧。日本語のテキスト",
      "🦙🦄🌈⭐️ mixed 中文 and emoji 😂😂😂",
      "𠀀𠀁 𪚥 rare CJK extension B",
      "한국어 문장입니다 🇺🇸🇯🇵",
      " leading space then 🧑🏿‍🚀 astronaut",
      "नमस्ते दुनिया สวัสดีครับ مرحبا",
  };
  return v;
}

void check_stream(const Tokenizer& tok, const std::string& text, bool skip_special) {
  auto ids = tok.encode(text, /*add_special=*/true, /*parse_special=*/true);
  IncrementalDetokenizer detok(tok, skip_special);
  std::string streamed;
  size_t held_back_steps = 0;
  for (int32_t id : ids) {
    std::string chunk = detok.push(id);
    EXPECT_TRUE(valid_utf8(chunk)) << "chunk ends inside a character: " << nlohmann::json(text).dump();
    if (detok.pending_bytes() > 0) ++held_back_steps;
    streamed += chunk;
  }
  streamed += detok.flush();
  EXPECT_EQ(streamed, tok.decode(ids, skip_special)) << nlohmann::json(text).dump();
  (void)held_back_steps;
}

TEST(Detokenizer, ByteLevelBpeStreamsWholeCharacters) {
  auto tok = load_tokenizer_json(testing::qwen3_model_dir());
  ASSERT_TRUE(tok.ok()) << tok.error_message();
  size_t total_held = 0;
  for (const auto& s : heavy_strings()) {
    check_stream(*tok, s, false);
    check_stream(*tok, "<|im_start|>assistant\n" + s + "<|im_end|>", true);
    // The test only means something if some token really splits a character.
    auto ids = tok->encode(s, false, false);
    for (int32_t id : ids) total_held += !valid_utf8(tok->token_to_piece(id));
  }
  EXPECT_GT(total_held, 0u) << "no token split a character; the test data is too easy";
}

TEST(Detokenizer, SentencePieceByteFallbackAndLeadingSpace) {
  auto f = gguf::GgufFile::open(testing::vocab_dir() + "/ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(f.ok()) << f.error_message();
  auto tok = load_tokenizer_gguf(*f);
  ASSERT_TRUE(tok.ok()) << tok.error_message();
  for (const auto& s : heavy_strings()) {
    check_stream(*tok, s, true);
    check_stream(*tok, s, false);
  }
  // BOS + "Hello": the prefix space the encoder added is not streamed out.
  auto ids = tok->encode("Hello world", true, false);
  IncrementalDetokenizer d(*tok, /*skip_special=*/true);
  std::string out;
  for (int32_t id : ids) out += d.push(id);
  out += d.flush();
  EXPECT_EQ(out, "Hello world");
}

TEST(Detokenizer, HoldsBackSplitCharacter) {
  auto f = gguf::GgufFile::open(testing::vocab_dir() + "/ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(f.ok());
  auto tok = load_tokenizer_gguf(*f);
  ASSERT_TRUE(tok.ok());
  // 🦙 = F0 9F A6 99, four byte-fallback tokens <0xF0> <0x9F> <0xA6> <0x99> = ids 3 + byte.
  IncrementalDetokenizer d(*tok);
  EXPECT_EQ(d.push(3 + 0xF0), "");
  EXPECT_EQ(d.push(3 + 0x9F), "");
  EXPECT_EQ(d.push(3 + 0xA6), "");
  EXPECT_EQ(d.push(3 + 0x99), "🦙");
  EXPECT_EQ(d.pending_bytes(), 0u);
  // A truncated sequence comes out at flush.
  EXPECT_EQ(d.push(3 + 0xE4), "");
  EXPECT_EQ(d.flush(), "\xE4");
}

TEST(Detokenizer, CompletePrefix) {
  EXPECT_EQ(utf8_complete_prefix("abc"), 3u);
  EXPECT_EQ(utf8_complete_prefix("ab\xE4\xBD"), 2u);       // 你 missing its last byte
  EXPECT_EQ(utf8_complete_prefix("ab\xE4\xBD\xA0"), 5u);   // complete
  EXPECT_EQ(utf8_complete_prefix("\xF0\x9F\xA6"), 0u);
  EXPECT_EQ(utf8_complete_prefix("a\x80\x80"), 3u);        // stray continuation bytes can never complete
  EXPECT_EQ(utf8_complete_prefix("a\xFF"), 2u);            // not a lead byte
}

}  // namespace
}  // namespace splash
