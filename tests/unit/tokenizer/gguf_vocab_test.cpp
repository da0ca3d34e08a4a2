// GGUF vocabularies against llama.cpp's reference tokenizations (SPLASH_VOCAB_DIR: ../shared/reference/vocab, no BOS),
// and the llama2.c tokenizer.bin against the same Llama-2 vocabulary from GGUF.
#include <filesystem>

#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace splash {
namespace {

using testing::ids_str;

Result<Tokenizer> load_vocab(const std::string& name) {
  SPLASH_TRY(auto f, gguf::GgufFile::open(testing::vocab_dir() + "/" + name));
  return load_tokenizer_gguf(f);
}

void check_reference(const std::string& name, TokenizerKind kind) {
  auto tok = load_vocab(name);
  ASSERT_TRUE(tok.ok()) << tok.error_message();
  EXPECT_EQ(tok->kind(), kind);
  auto cases = testing::read_ggml_vocab_test(testing::vocab_dir() + "/" + name);
  ASSERT_GT(cases.size(), 20u);
  int bad = 0;
  for (const auto& c : cases) {
    auto ids = tok->encode(c.text, /*add_special=*/false, /*parse_special=*/false);
    if (ids != c.ids) {
      ++bad;
      ADD_FAILURE() << name << " text: " << nlohmann::json(c.text).dump() << "\n  want: " << ids_str(c.ids)
                    << "\n  got:  " << ids_str(ids);
    }
  }
  EXPECT_EQ(bad, 0) << "of " << cases.size();
}

TEST(GgufVocab, LlamaSpmMatchesReference) { check_reference("ggml-vocab-llama-spm.gguf", TokenizerKind::kSentencePiece); }
TEST(GgufVocab, Qwen2MatchesReference) { check_reference("ggml-vocab-qwen2.gguf", TokenizerKind::kByteLevelBpe); }
TEST(GgufVocab, Qwen35MatchesReference) { check_reference("ggml-vocab-qwen35.gguf", TokenizerKind::kByteLevelBpe); }

TEST(GgufVocab, LlamaSpmSpecialsAndRoundTrip) {
  auto tok = load_vocab("ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(tok.ok()) << tok.error_message();
  EXPECT_EQ(tok->n_vocab(), 32000);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_TRUE(tok->add_bos());
  auto ids = tok->encode("Hello world", /*add_special=*/true, false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(tok->decode(ids, /*skip_special=*/true), "Hello world");
  // Byte fallback: a character missing from the vocabulary becomes its UTF-8 bytes.
  auto emoji = tok->encode("🦙", false, false);
  EXPECT_EQ(tok->decode(emoji), "🦙");
  ASSERT_EQ(emoji.size(), 5u);  // the prefix space, then F0 9F A6 99
  EXPECT_EQ(tok->token_to_piece(emoji[0]), " ");
  for (size_t i = 1; i < emoji.size(); ++i) EXPECT_EQ(tok->token_type(emoji[i]), TokenType::kByte);
  // Special tokens in text are matched only when asked.
  auto parsed = tok->encode("a</s>b", false, true);
  EXPECT_NE(std::find(parsed.begin(), parsed.end(), 2), parsed.end());
  auto plain = tok->encode("a</s>b", false, false);
  EXPECT_EQ(std::find(plain.begin(), plain.end(), 2), plain.end());
}

TEST(GgufVocab, Qwen2RoundTripAndSpecials) {
  auto tok = load_vocab("ggml-vocab-qwen2.gguf");
  ASSERT_TRUE(tok.ok()) << tok.error_message();
  auto ids = tok->encode("<|im_start|>user\nhi<|im_end|>", false, true);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_TRUE(tok->is_special(ids.front()));
  EXPECT_TRUE(tok->is_eog(ids.back()));
  for (const auto& s : testing::read_strings_jsonl(testing::source_path("tests/tokenizer/strings.jsonl")))
    EXPECT_EQ(tok->decode(tok->encode(s, false, false)), s) << nlohmann::json(s).dump();
}

// Rewrites a reference vocabulary with one metadata key changed, in memory.
Result<Tokenizer> load_modified(const std::string& name, const std::string& key, gguf::Value v,
                                std::vector<uint8_t>& storage) {
  SPLASH_TRY(auto f, gguf::GgufFile::open(testing::vocab_dir() + "/" + name));
  gguf::GgufWriter w;
  SPLASH_TRY_STATUS(w.copy_metadata(f));
  SPLASH_TRY_STATUS(w.set(key, std::move(v)));
  SPLASH_TRY(auto bytes, w.write_to_memory());
  storage = std::move(bytes);
  SPLASH_TRY(auto g, gguf::GgufFile::parse(storage, "modified.gguf"));
  return load_tokenizer_gguf(g);
}

TEST(GgufVocab, UnknownPreTokenizerIsRefused) {
  std::vector<uint8_t> storage;
  auto r = load_modified("ggml-vocab-qwen2.gguf", "tokenizer.ggml.pre", gguf::Value::from_string("mystery"), storage);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_message().find("'mystery'"), std::string::npos) << r.error_message();
  EXPECT_NE(r.error_message().find("modified.gguf"), std::string::npos) << r.error_message();
}

TEST(GgufVocab, HostileMetadataIsRefused) {
  std::vector<uint8_t> storage;
  auto model = load_modified("ggml-vocab-llama-spm.gguf", "tokenizer.ggml.model", gguf::Value::from_string("bert"),
                             storage);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error_message().find("'bert'"), std::string::npos) << model.error_message();

  std::vector<int64_t> types(32000, 1);
  types[77] = 9;
  auto bad_type = load_modified("ggml-vocab-llama-spm.gguf", "tokenizer.ggml.token_type",
                                gguf::Value::array_of_ints(gguf::ValueType::kI32, types), storage);
  ASSERT_FALSE(bad_type.ok());
  EXPECT_NE(bad_type.error_message().find("token_type[77]"), std::string::npos) << bad_type.error_message();

  auto short_types = load_modified("ggml-vocab-llama-spm.gguf", "tokenizer.ggml.token_type",
                                   gguf::Value::array_of_ints(gguf::ValueType::kI32, {1, 1, 1}), storage);
  ASSERT_FALSE(short_types.ok());
  EXPECT_NE(short_types.error_message().find("3 entries"), std::string::npos) << short_types.error_message();

  auto bad_bos = load_modified("ggml-vocab-llama-spm.gguf", "tokenizer.ggml.bos_token_id",
                               gguf::Value::from_u32(99999), storage);
  ASSERT_FALSE(bad_bos.ok());
  EXPECT_NE(bad_bos.error_message().find("bos id 99999"), std::string::npos) << bad_bos.error_message();

  auto bad_merge = load_modified("ggml-vocab-qwen2.gguf", "tokenizer.ggml.merges",
                                 gguf::Value::array_of_strings({"a b", "zzzqqq xxyy"}), storage);
  ASSERT_FALSE(bad_merge.ok());
  EXPECT_NE(bad_merge.error_message().find("merge 1"), std::string::npos) << bad_merge.error_message();
}

// --- llama2.c tokenizer.bin: the same Llama-2 vocabulary, so ids must agree with the GGUF one.

TEST(Llama2cTokenizer, AgreesWithLlamaSpmGguf) {
  const std::string bin = testing::demo_tokenizer_bin();
  if (!std::filesystem::exists(bin)) GTEST_SKIP() << "demo tokenizer " << bin << " is absent (run scripts/setup)";
  auto a = load_tokenizer_llama2c(bin);
  ASSERT_TRUE(a.ok()) << a.error_message();
  auto b = load_vocab("ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(b.ok()) << b.error_message();
  EXPECT_EQ(a->n_vocab(), 32000);
  EXPECT_EQ(a->bos_id(), 1);
  EXPECT_EQ(a->eos_id(), 2);
  std::vector<std::string> texts = testing::read_strings_jsonl(testing::source_path("tests/tokenizer/strings.jsonl"));
  for (const auto& c : testing::read_ggml_vocab_test(testing::vocab_dir() + "/ggml-vocab-llama-spm.gguf"))
    texts.push_back(c.text);
  ASSERT_GT(texts.size(), 300u);
  int bad = 0;
  for (const auto& s : texts) {
    auto x = a->encode(s, true, false);
    auto y = b->encode(s, true, false);
    if (x != y) {
      ++bad;
      ADD_FAILURE() << nlohmann::json(s).dump() << "\n  bin:  " << ids_str(x) << "\n  gguf: " << ids_str(y);
    }
    EXPECT_EQ(a->decode(x, /*skip_special=*/true), s) << nlohmann::json(s).dump();
  }
  EXPECT_EQ(bad, 0);
  // Known ids of the Llama-2 vocabulary.
  EXPECT_EQ(a->encode("Hello", true, false), (std::vector<int32_t>{1, 15043}));
  EXPECT_EQ(a->token_to_piece(13), "\n");  // <0x0A>
}

TEST(Llama2cTokenizer, TruncatedFileIsAnError) {
  std::vector<uint8_t> bytes = {27, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 'a'};
  auto r = load_tokenizer_llama2c_bytes(bytes, "mem.bin");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_message().find("mem.bin"), std::string::npos);
  EXPECT_NE(r.error_message().find("truncated"), std::string::npos);
}

}  // namespace
}  // namespace splash
