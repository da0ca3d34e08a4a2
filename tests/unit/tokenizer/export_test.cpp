// Tokenizer export: to_spec, GGUF tokenizer.ggml.* metadata and Hugging Face files must load back into
// tokenizers that encode every test string like the original; the llama2.c vocabulary exported in
// Llama-2 form must encode, in the independent @huggingface/tokenizers, like our SentencePiece encoder.
#include <filesystem>

#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "tokenizer/pretokenizers.h"
#include "tokenizer/tokenizer_export.h"
#include "tokenizer_test_util.h"

namespace splash {
namespace {

using testing::ids_str;

std::vector<std::string> test_strings() {
  return testing::read_strings_jsonl(testing::source_path("tests/tokenizer/strings.jsonl"));
}

Result<Tokenizer> via_gguf(const Tokenizer& tok) {
  SPLASH_TRY(auto kv, tokenizer_gguf_metadata(tok));
  gguf::GgufWriter w;
  for (auto& [k, v] : kv) SPLASH_TRY_STATUS(w.set(k, std::move(v)));
  SPLASH_TRY(std::vector<uint8_t> bytes, w.write_to_memory());
  // GgufFile::parse borrows the bytes; keep them alive for the loader.
  auto storage = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  SPLASH_TRY(auto f, gguf::GgufFile::parse(*storage, "exported.gguf"));
  return load_tokenizer_gguf(f);
}

Result<Tokenizer> via_hf(const Tokenizer& tok) {
  SPLASH_TRY(HfTokenizerFiles files, tokenizer_hf_files(tok));
  return load_tokenizer_json_text(files.tokenizer_json, files.tokenizer_config_json, "exported/tokenizer.json");
}

void expect_same_config(const Tokenizer& a, const Tokenizer& b, const std::string& what) {
  EXPECT_EQ(a.kind(), b.kind()) << what;
  EXPECT_EQ(a.n_vocab(), b.n_vocab()) << what;
  EXPECT_EQ(a.bos_id(), b.bos_id()) << what;
  EXPECT_EQ(a.eos_id(), b.eos_id()) << what;
  EXPECT_EQ(a.add_bos(), b.add_bos()) << what;
  EXPECT_EQ(a.add_eos(), b.add_eos()) << what;
  EXPECT_EQ(a.chat_template(), b.chat_template()) << what;
  int special_diff = 0;
  for (int32_t id = 0; id < a.n_vocab(); ++id) special_diff += a.is_special(id) != b.is_special(id);
  EXPECT_EQ(special_diff, 0) << what << ": tokens whose special flag changed";
  for (int32_t id : a.eog_ids()) EXPECT_TRUE(b.is_eog(id)) << what << ": end-of-generation id " << id;
}

// Same ids (with and without special parsing, with BOS/EOS) and same decoding on every string.
int count_mismatches(const Tokenizer& a, const Tokenizer& b, const std::vector<std::string>& strings,
                     const std::string& what) {
  int bad = 0;
  for (const std::string& s : strings) {
    for (bool parse_special : {false, true}) {
      auto want = a.encode(s, /*add_special=*/true, parse_special);
      auto got = b.encode(s, true, parse_special);
      if (want != got) {
        if (++bad <= 5)
          ADD_FAILURE() << what << " text: " << nlohmann::json(s).dump() << " parse_special=" << parse_special
                        << "\n  want: " << ids_str(want) << "\n  got:  " << ids_str(got);
        continue;
      }
      EXPECT_EQ(a.decode(want), b.decode(got)) << what << " " << nlohmann::json(s).dump();
    }
  }
  return bad;
}

// Loaded once: three tests start from it and a 151,936-token vocabulary takes a while under sanitizers.
const Tokenizer* qwen3() {
  static const Result<Tokenizer> tok = load_tokenizer_json(testing::qwen3_model_dir());
  EXPECT_TRUE(tok.ok()) << tok.error_message();
  return tok.ok() ? &*tok : nullptr;
}

bool is_nfc(const std::string& s, const Tokenizer& nfc_tokenizer) {
  // The Qwen3 tokenizer.json normalizes to NFC; its decode of its encode is NFC(s).
  return nfc_tokenizer.decode(nfc_tokenizer.encode(s, false, false)) == s;
}

// GPT-2's byte -> printable character mapping, written out here rather than taken from the library.
void detail_free_append_byte(std::string& out, uint8_t b) {
  uint32_t cp = b;
  const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
  if (!printable) {
    uint32_t n = 0;
    for (uint32_t x = 0; x < b; ++x)
      if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) ++n;
    cp = 256 + n;
  }
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// --- to_spec

TEST(TokenizerExport, ToSpecRebuildsIdentically) {
  const Tokenizer* tok = qwen3();
  ASSERT_NE(tok, nullptr);
  TokenizerSpec spec = tok->to_spec();
  EXPECT_EQ(spec.kind, TokenizerKind::kByteLevelBpe);
  ASSERT_EQ(spec.splits.size(), 1u);
  EXPECT_EQ(pretokenizer_gguf_name(spec.splits[0].pattern), "qwen2");
  EXPECT_EQ(spec.normalizers, std::vector<Normalizer>{Normalizer::kNfc});
  EXPECT_EQ(spec.merges.size(), 151387u);  // Qwen3's tokenizer.json lists 151,387 merges, no duplicates
  EXPECT_EQ(spec.merges.front(), std::make_pair(std::string("\xC4\xA0"), std::string("\xC4\xA0")));  // "Ġ Ġ"
  EXPECT_TRUE(spec.scores.empty());
  auto again = Tokenizer::build(std::move(spec));
  ASSERT_TRUE(again.ok()) << again.error_message();
  expect_same_config(*tok, *again, "to_spec");
  EXPECT_EQ(count_mismatches(*tok, *again, test_strings(), "to_spec"), 0);
}

// --- round trips

TEST(TokenizerExport, Qwen3JsonRoundTrips) {
  const Tokenizer* tok = qwen3();
  ASSERT_NE(tok, nullptr);
  const auto strings = test_strings();

  auto hf = via_hf(*tok);
  ASSERT_TRUE(hf.ok()) << hf.error_message();
  expect_same_config(*tok, *hf, "qwen3 -> tokenizer.json");
  EXPECT_EQ(count_mismatches(*tok, *hf, strings, "qwen3 -> tokenizer.json"), 0);

  // The GGUF gpt2 vocabulary has no normalizer (llama.cpp does not NFC-normalize), so the GGUF copy
  // encodes NFD and other non-NFC input differently: compare on the strings that are already NFC.
  auto gg = via_gguf(*tok);
  ASSERT_TRUE(gg.ok()) << gg.error_message();
  expect_same_config(*tok, *gg, "qwen3 -> GGUF");
  std::vector<std::string> nfc;
  for (const auto& s : strings)
    if (is_nfc(s, *tok)) nfc.push_back(s);
  EXPECT_GT(nfc.size(), strings.size() * 8 / 10);  // 331 of 371
  EXPECT_LT(nfc.size(), strings.size());  // strings.jsonl does have non-NFC cases
  EXPECT_EQ(count_mismatches(*tok, *gg, nfc, "qwen3 -> GGUF"), 0);
}

void gguf_round_trips(const std::string& name) {
  auto f = gguf::GgufFile::open(testing::vocab_dir() + "/" + name);
  ASSERT_TRUE(f.ok()) << f.error_message();
  auto tok = load_tokenizer_gguf(*f);
  ASSERT_TRUE(tok.ok()) << tok.error_message();
  const auto strings = test_strings();
  auto gg = via_gguf(*tok);
  ASSERT_TRUE(gg.ok()) << gg.error_message();
  expect_same_config(*tok, *gg, name + " -> GGUF");
  EXPECT_EQ(count_mismatches(*tok, *gg, strings, name + " -> GGUF"), 0);
  auto hf = via_hf(*tok);
  ASSERT_TRUE(hf.ok()) << hf.error_message();
  expect_same_config(*tok, *hf, name + " -> tokenizer.json");
  EXPECT_EQ(count_mismatches(*tok, *hf, strings, name + " -> tokenizer.json"), 0);
  // And llama.cpp's own reference tokenizations still hold for the copy.
  for (const auto& c : testing::read_ggml_vocab_test(testing::vocab_dir() + "/" + name))
    EXPECT_EQ(ids_str(hf->encode(c.text, false, false)), ids_str(c.ids)) << nlohmann::json(c.text).dump();
}

TEST(TokenizerExport, Qwen2GgufRoundTrips) { gguf_round_trips("ggml-vocab-qwen2.gguf"); }
TEST(TokenizerExport, LlamaSpmGgufRoundTrips) { gguf_round_trips("ggml-vocab-llama-spm.gguf"); }

TEST(TokenizerExport, Llama2cRoundTrips) {
  if (!std::filesystem::exists(testing::demo_tokenizer_bin())) GTEST_SKIP() << "no " << testing::demo_tokenizer_bin();
  auto tok = load_tokenizer_llama2c(testing::demo_tokenizer_bin());
  ASSERT_TRUE(tok.ok()) << tok.error_message();
  const auto strings = test_strings();
  for (auto* via : {&via_gguf, &via_hf}) {
    auto copy = (*via)(*tok);
    ASSERT_TRUE(copy.ok()) << copy.error_message();
    const std::string what = via == &via_gguf ? "llama2.c -> GGUF" : "llama2.c -> tokenizer.json";
    expect_same_config(*tok, *copy, what);
    EXPECT_EQ(count_mismatches(*tok, *copy, strings, what), 0);
  }
}

// --- against @huggingface/tokenizers

// llama2_expected.jsonl: our Llama-2-form export of tokenizer.bin, encoded by the JS library.
TEST(TokenizerExport, Llama2FormMatchesHuggingFace) {
  if (!std::filesystem::exists(testing::demo_tokenizer_bin())) GTEST_SKIP() << "no " << testing::demo_tokenizer_bin();
  auto tok = load_tokenizer_llama2c(testing::demo_tokenizer_bin());
  ASSERT_TRUE(tok.ok()) << tok.error_message();
  auto hf = via_hf(*tok);
  ASSERT_TRUE(hf.ok()) << hf.error_message();
  auto cases = testing::read_expected_jsonl(testing::source_path("tests/tokenizer/llama2_expected.jsonl"));
  ASSERT_EQ(cases.size(), test_strings().size());
  int bad_spm = 0, bad_json = 0;
  for (const auto& c : cases) {
    auto spm = tok->encode(c.text, /*add_special=*/false, /*parse_special=*/true);
    auto json = hf->encode(c.text, false, true);
    if (spm != c.ids && ++bad_spm <= 5)
      ADD_FAILURE() << "tokenizer.bin text: " << nlohmann::json(c.text).dump() << "\n  want: " << ids_str(c.ids)
                    << "\n  got:  " << ids_str(spm);
    if (json != c.ids && ++bad_json <= 5)
      ADD_FAILURE() << "exported tokenizer.json text: " << nlohmann::json(c.text).dump()
                    << "\n  want: " << ids_str(c.ids) << "\n  got:  " << ids_str(json);
  }
  EXPECT_EQ(bad_spm, 0) << "of " << cases.size();
  EXPECT_EQ(bad_json, 0) << "of " << cases.size();
}

// --- the Llama-2 form's variants

constexpr const char* kTinyVocab = R"({"<unk>": 0, "<s>": 1, "</s>": 2, "<0x20>": 3, "<0x61>": 4,
  "\u2581": 5, "a": 6, "b": 7, "\u2581a": 8, "ab": 9, "\u2581ab": 10, "\u2581\u2581": 11})";
constexpr const char* kTinyMerges = R"([["\u2581", "a"], ["a", "b"], ["\u2581a", "b"], ["\u2581", "ab"], ["\u2581", "\u2581"]])";
constexpr const char* kTinyAdded =
    R"([{"id": 1, "content": "<s>", "special": true, "normalized": false}, {"id": 2, "content": "</s>", "special": true, "normalized": false}])";

std::string tiny(const std::string& normalizer, const std::string& pre_tokenizer) {
  return str_cat(R"({"version": "1.0", "added_tokens": )", kTinyAdded, R"(, "normalizer": )", normalizer,
                 R"(, "pre_tokenizer": )", pre_tokenizer,
                 R"(, "model": {"type": "BPE", "byte_fallback": true, "fuse_unk": true, "unk_token": "<unk>", "vocab": )",
                 kTinyVocab, R"(, "merges": )", kTinyMerges, "}}");
}

// Expected ids are what @huggingface/tokenizers 0.2.0 gives for the same files (checked by hand with node).
TEST(TokenizerExport, Llama2FormSpaceVariants) {
  const std::string prepend_replace =
      R"({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"}, {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]})";
  auto a = load_tokenizer_json_text(tiny(prepend_replace, "null"), "", "prepend.json");
  ASSERT_TRUE(a.ok()) << a.error_message();
  EXPECT_EQ(a->kind(), TokenizerKind::kSentencePiece);
  // "▁a" (rank 0) goes first, then "▁ab"; a leading space stays a lone "▁" (Prepend always adds one).
  EXPECT_EQ(ids_str(a->encode("ab", false, true)), "10 ");
  EXPECT_EQ(ids_str(a->encode(" ab", false, true)), "5 10 ");
  EXPECT_EQ(ids_str(a->encode("ab</s>ab", false, true)), "10 2 10 ");
  EXPECT_EQ(ids_str(a->encode("c", false, true)), "5 0 ");  // no <0x63>: unknown
  EXPECT_EQ(ids_str(a->encode("  a b ab", false, true)), "11 8 5 7 10 ");
  EXPECT_EQ(a->decode(a->encode("ab ab", false, true)), "ab ab");

  // Metaspace ("first"): no prefix after a special token, none when the text starts with a space.
  auto m = load_tokenizer_json_text(
      tiny("null", R"({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": false})"), "",
      "metaspace.json");
  ASSERT_TRUE(m.ok()) << m.error_message();
  EXPECT_EQ(ids_str(m->encode("ab", false, true)), "10 ");
  EXPECT_EQ(ids_str(m->encode(" ab", false, true)), "10 ");
  EXPECT_EQ(ids_str(m->encode("ab</s>ab", false, true)), "10 2 9 ");
  EXPECT_EQ(ids_str(m->encode("  a b ab", false, true)), "5 8 5 7 10 ");
  // The older form: add_prefix_space, which is "always".
  auto old = load_tokenizer_json_text(
      tiny("null", R"({"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": true})"), "", "old.json");
  ASSERT_TRUE(old.ok()) << old.error_message();
  EXPECT_EQ(ids_str(old->encode("ab</s>ab", false, true)), "10 2 10 ");
  // Each variant survives export to tokenizer.json.
  for (const Tokenizer* t : {&*a, &*m, &*old}) {
    auto copy = via_hf(*t);
    ASSERT_TRUE(copy.ok()) << copy.error_message();
    for (const char* s : {"ab", " ab", "ab</s>ab", "  a b ab", "c"})
      EXPECT_EQ(ids_str(copy->encode(s, false, true)), ids_str(t->encode(s, false, true))) << s;
  }

  auto bad = load_tokenizer_json_text(tiny(R"({"type": "Replace", "pattern": {"String": "x"}, "content": "y"})", "null"),
                                      "", "bad.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error_message().find("normalizer"), std::string::npos) << bad.error_message();
  auto no_space = load_tokenizer_json_text(tiny("null", "null"), "", "nospace.json");
  ASSERT_FALSE(no_space.ok());
  EXPECT_NE(no_space.error_message().find("Metaspace"), std::string::npos) << no_space.error_message();
}

// --- spm_merges_by_score

TEST(TokenizerExport, SpmMergesOrderedByScoreThenIds) {
  TokenizerSpec spec;
  spec.kind = TokenizerKind::kSentencePiece;
  spec.tokens = {"a", "b", "c", "ab", "bc", "abc", "\xC3\xA9", "x\xC3\xA9"};
  spec.scores = {0, 0, 0, -2, -1, -3, 0, -5};
  auto merges = spm_merges_by_score(spec);
  std::vector<std::pair<std::string, std::string>> want = {
      {"b", "c"}, {"a", "b"}, {"a", "bc"}, {"ab", "c"}};  // "xé": "x" is not a piece
  EXPECT_EQ(merges, want);
}

// --- errors

TEST(TokenizerExport, UnnamedPreTokenizerIsAnError) {
  // A small byte-level vocabulary: every byte's character, plus "he", "ll" and "hell".
  TokenizerSpec spec;
  spec.source = "odd.json";
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    detail_free_append_byte(ch, static_cast<uint8_t>(b));
    spec.tokens.push_back(ch);
  }
  spec.tokens.insert(spec.tokens.end(), {"he", "ll", "hell"});
  spec.merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}};
  spec.splits.push_back({R"(\s+|\S+)", SplitBehavior::kIsolated, false});
  auto odd = Tokenizer::build(std::move(spec));
  ASSERT_TRUE(odd.ok()) << odd.error_message();
  EXPECT_EQ(ids_str(odd->encode("hello", false, false)), "258 111 ");
  auto kv = tokenizer_gguf_metadata(*odd);
  ASSERT_FALSE(kv.ok());
  EXPECT_NE(kv.error_message().find("no GGUF"), std::string::npos) << kv.error_message();
  EXPECT_NE(kv.error_message().find("qwen2"), std::string::npos) << kv.error_message();  // lists the known names
  // The Hugging Face form carries any regex.
  auto hf = via_hf(*odd);
  ASSERT_TRUE(hf.ok()) << hf.error_message();
  for (const char* s : {"hello  world", "hell\thell", " x"})
    EXPECT_EQ(ids_str(hf->encode(s, false, false)), ids_str(odd->encode(s, false, false))) << s;
}

TEST(Pretokenizers, TableIsConsistent) {
  for (const char* name : {"qwen2", "qwen35", "gpt-2"}) {
    auto p = pretokenizer_pattern(name);
    ASSERT_TRUE(p.has_value()) << name;
    EXPECT_EQ(pretokenizer_gguf_name(*p), name);
  }
  EXPECT_EQ(pretokenizer_pattern("gpt2"), pretokenizer_pattern("default"));
  EXPECT_EQ(pretokenizer_gguf_name(*pretokenizer_pattern("default")), "gpt-2");
  EXPECT_FALSE(pretokenizer_pattern("llama-bpe").has_value());
  EXPECT_NE(pretokenizer_gguf_names().find("qwen35"), std::string::npos);
}

}  // namespace
}  // namespace splash
