// Broken or hostile tokenizer.json files load to a clear error (naming the field), never a crash.
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace splash {
namespace {

// A tiny valid byte-level BPE tokenizer: every byte's character plus a few merges.
nlohmann::json tiny() {
  nlohmann::json vocab = nlohmann::json::object();
  // The 256 byte-level characters, in GPT-2 order is not required; ids 0..255 by byte value.
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    uint32_t cp = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(next++);
    std::string s;
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
    vocab[s] = b;
  }
  vocab["he"] = 256;
  vocab["ll"] = 257;
  vocab["hell"] = 258;
  vocab["hello"] = 259;
  nlohmann::json j;
  j["model"] = {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"h e", "l l", "he ll", "hell o"}}};
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  j["added_tokens"] = nlohmann::json::array({{{"id", 260}, {"content", "<eos>"}, {"special", true}}});
  return j;
}

Result<Tokenizer> load(const nlohmann::json& j) { return load_tokenizer_json_text(j.dump(), "", "hostile.json"); }

void expect_error(const nlohmann::json& j, const std::string& needle) {
  auto r = load(j);
  ASSERT_FALSE(r.ok()) << "expected an error mentioning '" << needle << "'";
  EXPECT_NE(r.error_message().find("hostile.json"), std::string::npos) << r.error_message();
  EXPECT_NE(r.error_message().find(needle), std::string::npos) << r.error_message();
}

TEST(HostileJson, TinyTokenizerWorks) {
  auto r = load(tiny());
  ASSERT_TRUE(r.ok()) << r.error_message();
  EXPECT_EQ(r->n_vocab(), 261);
  EXPECT_EQ(r->encode("hello", false, true), std::vector<int32_t>{259});
  EXPECT_EQ(r->encode("hello<eos>", false, true), (std::vector<int32_t>{259, 260}));
  // Merge order matters: without "he ll" the word stops at he + ll + o.
  auto j = tiny();
  j["model"]["merges"] = {"h e", "l l", "hell o"};
  auto r2 = load(j);
  ASSERT_TRUE(r2.ok()) << r2.error_message();
  EXPECT_EQ(r2->encode("hello", false, true), (std::vector<int32_t>{256, 257, 'o'}));
  // Merges as ["a", "b"] pairs mean the same.
  using J = nlohmann::json;
  j["model"]["merges"] = J::array({J::array({"h", "e"}), J::array({"l", "l"}), J::array({"he", "ll"}),
                                   J::array({"hell", "o"})});
  auto r3 = load(j);
  ASSERT_TRUE(r3.ok()) << r3.error_message();
  EXPECT_EQ(r3->encode("hello", false, true), std::vector<int32_t>{259});
}

TEST(HostileJson, IgnoreMerges) {
  auto j = tiny();
  j["model"]["merges"] = {"h e"};
  auto a = load(j);
  ASSERT_TRUE(a.ok());
  EXPECT_NE(a->encode("hello", false, true), std::vector<int32_t>{259});
  j["model"]["ignore_merges"] = true;
  auto b = load(j);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->encode("hello", false, true), std::vector<int32_t>{259});
}

TEST(HostileJson, AddedTokenStripFlags) {
  auto j = tiny();
  j["added_tokens"] = nlohmann::json::array(
      {{{"id", 260}, {"content", "<m>"}, {"special", false}, {"lstrip", true}, {"rstrip", true}}});
  auto r = load(j);
  ASSERT_TRUE(r.ok()) << r.error_message();
  // Spaces around the token are swallowed by it.
  EXPECT_EQ(r->encode("hello  <m>  hello", false, true), (std::vector<int32_t>{259, 260, 259}));
  j["added_tokens"][0]["lstrip"] = false;
  j["added_tokens"][0]["rstrip"] = false;
  auto r2 = load(j);
  ASSERT_TRUE(r2.ok());
  EXPECT_GT(r2->encode("hello  <m>  hello", false, true).size(), 3u);
  j["added_tokens"][0]["single_word"] = true;
  auto r3 = load(j);
  ASSERT_TRUE(r3.ok());
  auto in_word = r3->encode("hello<m>hello", false, true);
  EXPECT_EQ(std::find(in_word.begin(), in_word.end(), 260), in_word.end());
}

TEST(HostileJson, NotJson) {
  auto r = load_tokenizer_json_text("{\"model\": ", "", "hostile.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_message().find("not valid JSON"), std::string::npos);
}

TEST(HostileJson, MissingModel) {
  auto j = tiny();
  j.erase("model");
  expect_error(j, "model");
}

TEST(HostileJson, UnknownModelType) {
  auto j = tiny();
  j["model"]["type"] = "WordPiece";
  expect_error(j, "WordPiece");
}

TEST(HostileJson, UnknownNormalizer) {
  auto j = tiny();
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "BertNormalizer"}}}}};
  expect_error(j, "BertNormalizer");
}

TEST(HostileJson, UnknownPreTokenizer) {
  auto j = tiny();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_error(j, "Whitespace");
}

TEST(HostileJson, BadRegex) {
  auto j = tiny();
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}},
                          {{"type", "ByteLevel"}, {"use_regex", false}}}}};
  expect_error(j, "regex");
}

TEST(HostileJson, BadMerges) {
  auto j = tiny();
  j["model"]["merges"] = {"h e", "nospace"};
  expect_error(j, "merges[1]");
  j["model"]["merges"] = {"h e", "x zz"};  // "zz" is not a token
  expect_error(j, "merge 1");
  j["model"]["merges"] = {"h e", 42};
  expect_error(j, "merges[1]");
}

TEST(HostileJson, IdsOutOfRange) {
  auto j = tiny();
  j["model"]["vocab"]["bad"] = -5;
  expect_error(j, "out of range");
  j = tiny();
  j["model"]["vocab"]["huge"] = 1LL << 40;
  expect_error(j, "out of range");
  j = tiny();
  j["added_tokens"][0]["id"] = -1;
  expect_error(j, "out of range");
  j = tiny();
  j["model"]["vocab"]["str"] = "7";
  expect_error(j, "not an integer");
}

TEST(HostileJson, DuplicateIds) {
  auto j = tiny();
  j["model"]["vocab"]["hello2"] = 259;
  expect_error(j, "duplicate id 259");
  j = tiny();
  j["added_tokens"][0]["id"] = 259;  // "<eos>" on top of "hello"
  expect_error(j, "duplicate id 259");
}

TEST(HostileJson, NoByteLevel) {
  auto j = tiny();
  j["pre_tokenizer"] = nullptr;
  expect_error(j, "ByteLevel");
}

TEST(HostileJson, BadConfig) {
  auto r = load_tokenizer_json_text(tiny().dump(), "{\"eos_token\": \"<nope>\"}", "hostile.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_message().find("eos_token"), std::string::npos);
  auto ok = load_tokenizer_json_text(tiny().dump(), "{\"eos_token\": {\"content\": \"<eos>\"}}", "hostile.json");
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(ok->eos_id(), 260);
  EXPECT_TRUE(ok->is_eog(260));
}

TEST(HostileJson, MissingFile) {
  auto r = load_tokenizer_json("/nonexistent/dir/tokenizer.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_message().find("/nonexistent/dir"), std::string::npos);
}

}  // namespace
}  // namespace splash
