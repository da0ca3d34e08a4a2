// Tokenizer::encode_bounded on the real vocabularies the other tokenizer tests use: the same ids as
// encode() whenever they fit, with SentencePiece chunk boundaries put everywhere, nullopt exactly
// when they do not fit, and a long text refused with memory that follows the bound, not the text.
#include <cstdio>
#include <fstream>
#include <random>
#include <string>

#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace splash {
namespace {

struct Named {
  std::string name;
  std::unique_ptr<Tokenizer> tok;
};

std::vector<Named> tokenizers() {
  std::vector<Named> out;
  auto add = [&](std::string name, Result<Tokenizer> r) {
    if (!r.ok()) {
      ADD_FAILURE() << name << ": " << r.error_message();
      return;
    }
    out.push_back({std::move(name), std::make_unique<Tokenizer>(std::move(r).value())});
  };
  add("qwen3 tokenizer.json", load_tokenizer_json(testing::qwen3_model_dir()));
  for (const char* g : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-qwen35.gguf"}) {
    auto f = gguf::GgufFile::open(testing::vocab_dir() + "/" + g);
    if (!f.ok()) {
      ADD_FAILURE() << f.error_message();
      continue;
    }
    add(g, load_tokenizer_gguf(*f));
  }
  if (std::ifstream(testing::demo_tokenizer_bin()).good())
    add("llama2.c tokenizer.bin", load_tokenizer_llama2c(testing::demo_tokenizer_bin()));
  return out;
}

// Every test string (accents, CJK, emoji, code, invalid UTF-8 escapes, whitespace runs) joined with
// separators that put spaces, runs of spaces, newlines and special tokens next to each other.
std::vector<std::string> corpus() {
  std::vector<std::string> out = testing::read_strings_jsonl(testing::source_path("tests/tokenizer/strings.jsonl"));
  for (const auto& e : testing::read_ggml_vocab_test(testing::vocab_dir() + "/ggml-vocab-llama-spm.gguf"))
    out.push_back(e.text);
  return out;
}

std::string joined(const std::vector<std::string>& parts) {
  const char* seps[] = {" ", "  ", "\n", " \n  ", "<|im_start|>", "<s>", "\t", "x ", "    "};
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i) s += parts[i] + seps[i % std::size(seps)];
  return s;
}

TEST(BoundedEncode, SameIdsAsEncodeAtEveryChunkSize) {
  const std::vector<std::string> parts = corpus();
  ASSERT_GT(parts.size(), 50u);
  const std::string text = joined(parts);
  for (const Named& n : tokenizers()) {
    SCOPED_TRACE(n.name);
    const Tokenizer& t = *n.tok;
    for (bool add_special : {false, true}) {
      for (bool parse_special : {false, true}) {
        const std::vector<int32_t> full = t.encode(text, add_special, parse_special);
        ASSERT_GT(full.size(), 1000u);
        for (size_t chunk : {size_t{1}, size_t{2}, size_t{3}, size_t{5}, size_t{17}, size_t{100}, size_t{4096},
                             SIZE_MAX}) {
          auto b = t.encode_bounded(text, add_special, parse_special, SIZE_MAX, chunk);
          ASSERT_TRUE(b.has_value()) << chunk;
          EXPECT_EQ(*b, full) << "chunk " << chunk << " add_special " << add_special << " parse_special "
                              << parse_special;
        }
        // The bound itself: exactly the full result when it fits, nullopt one id short of it.
        EXPECT_EQ(t.encode_bounded(text, add_special, parse_special, full.size(), 7), full);
        EXPECT_FALSE(t.encode_bounded(text, add_special, parse_special, full.size() - 1, 7).has_value());
        EXPECT_FALSE(t.encode_bounded(text, add_special, parse_special, full.size() / 2).has_value());
        EXPECT_FALSE(t.encode_bounded(text, add_special, parse_special, 0).has_value());
      }
    }
    // Each string alone, with a boundary at every safe point.
    for (const std::string& s : parts) {
      const std::vector<int32_t> full = t.encode(s, true, true);
      auto b = t.encode_bounded(s, true, true, full.size(), 1);
      ASSERT_TRUE(b.has_value()) << s;
      EXPECT_EQ(*b, full) << s;
      if (!full.empty()) {
        EXPECT_FALSE(t.encode_bounded(s, true, true, full.size() - 1, 1).has_value()) << s;
      }
    }
  }
}

// Random short texts over the pieces where a chunk boundary could go wrong: spaces and their runs,
// a literal U+2581, lone UTF-8 lead bytes, accents, newlines and special tokens next to each other.
TEST(BoundedEncode, RandomTextsAtEveryBoundary) {
  const char* atoms[] = {" ", "  ", "a", "b", "ab", "\xE2\x96\x81", "\xE2", "\xE2\x96", "\xC3", "\xC3\xA9", "e\xCC\x81",
                         "\n", "\t", "<s>", "<|im_start|>", "1", "23", "'s", "\xF0\x9F\x98\x80", "\xFF"};
  std::mt19937 rng(40);
  for (const Named& n : tokenizers()) {
    SCOPED_TRACE(n.name);
    for (int k = 0; k < 800; ++k) {
      std::string text;
      const int len = static_cast<int>(rng() % 24);
      for (int i = 0; i < len; ++i) text += atoms[rng() % std::size(atoms)];
      const std::vector<int32_t> full = n.tok->encode(text, true, true);
      for (size_t chunk : {size_t{1}, size_t{2}, size_t{5}}) {
        auto b = n.tok->encode_bounded(text, true, true, full.size(), chunk);
        ASSERT_TRUE(b.has_value()) << ::testing::PrintToString(text);
        ASSERT_EQ(*b, full) << ::testing::PrintToString(text) << " chunk " << chunk;
      }
    }
  }
}

TEST(BoundedEncode, SentencePieceVocabulariesAreMergedInChunks) {
  // Otherwise the chunk sizes above would all be the whole text and prove nothing.
  for (const Named& n : tokenizers()) {
    if (n.tok->kind() == TokenizerKind::kSentencePiece) {
      EXPECT_TRUE(n.tok->encodes_in_chunks()) << n.name;
    }
  }
}

// VmHWM (peak resident set) in KiB, after resetting it (clear_refs 5) when the kernel allows.
long peak_kib(bool reset) {
  if (reset) {
    std::ofstream("/proc/self/clear_refs") << "5";
  }
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

TEST(BoundedEncode, LongTextIsRefusedWithBoundedMemory) {
  // 32 MiB of prose with spaces and newlines, and 32 MiB of one word without a break: a context of
  // 256 tokens is passed after a few hundred bytes. The old encode split all of it first (tens of
  // bytes of bookkeeping per byte of text: gigabytes here); now ASCII text is not even copied.
  std::string prose;
  const std::string para = "Once upon a time, there was a little girl named Lily. She loved to play outside.\n";
  while (prose.size() < (32u << 20)) prose += para;
  const std::string blob(32u << 20, 'a');
  for (const Named& n : tokenizers()) {
    SCOPED_TRACE(n.name);
    const std::string* texts[] = {&prose, &blob};
    for (const std::string* text : texts) {
      const long before = peak_kib(true);
      EXPECT_FALSE(n.tok->encode_bounded(*text, true, true, 255).has_value());
      const long after = peak_kib(false);
      if (before > 0 && after > 0) {
        EXPECT_LT(after - before, 8 << 10) << "KiB of peak growth";
      }
    }
    // Just under the bound is still exact.
    const std::string head = prose.substr(0, 600);
    const std::vector<int32_t> full = n.tok->encode(head, true, true);
    EXPECT_EQ(n.tok->encode_bounded(head, true, true, full.size()), full);
  }
}

}  // namespace
}  // namespace splash
