// GGUF reader: real llama.cpp-written vocabulary files, and small files assembled byte by byte here
// (independently of the writer) to pin down the layout.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "formats/gguf.h"

namespace splash::gguf {
namespace {

const std::string kVocabDir = SPLASH_VOCAB_DIR "/";

// Little-endian byte builder for hand-made files.
struct Bytes {
  std::vector<uint8_t> b;
  template <class T>
  Bytes& put(T v) {
    uint8_t tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof(T));
    b.insert(b.end(), tmp, tmp + sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& pad_to(size_t al) {
    while (b.size() % al) b.push_back(0);
    return *this;
  }
};

TEST(GgufReader, LlamaSpmVocabFile) {
  auto f = GgufFile::open(kVocabDir + "ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(f.ok()) << f.error_message();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(*f->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(*f->get_string("general.architecture"), "llama");
  auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.error_message();
  ASSERT_EQ(tokens->size(), 32000u);
  EXPECT_EQ((*tokens)[0], "<unk>");
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ((*tokens)[2], "</s>");
  EXPECT_EQ((*tokens)[3], "<0x00>");
  auto scores = f->get_f32_array("tokenizer.ggml.scores");
  ASSERT_TRUE(scores.ok()) << scores.error_message();
  EXPECT_EQ(scores->size(), 32000u);
  auto types = f->get_i32_array("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.ok()) << types.error_message();
  EXPECT_EQ(types->size(), 32000u);
  EXPECT_EQ((*types)[0], 2);  // UNKNOWN
  EXPECT_EQ((*types)[1], 3);  // CONTROL
  EXPECT_EQ((*types)[3], 6);  // BYTE
  EXPECT_EQ(*f->get_u32("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(*f->get_u32("tokenizer.ggml.eos_token_id"), 2u);
  // Wrong-type access is an error naming the key, not a crash.
  auto bad = f->get_u32("tokenizer.ggml.model");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error_message().find("tokenizer.ggml.model"), std::string::npos);
  EXPECT_FALSE(f->get_string("no.such.key").ok());
  // keys() keeps file order: general.architecture comes first in llama.cpp's writer.
  ASSERT_FALSE(f->keys().empty());
  EXPECT_EQ(f->keys()[0], "general.architecture");
}

TEST(GgufReader, Qwen2VocabFile) {
  auto f = GgufFile::open(kVocabDir + "ggml-vocab-qwen2.gguf");
  ASSERT_TRUE(f.ok()) << f.error_message();
  EXPECT_EQ(*f->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(*f->get_string("tokenizer.ggml.pre"), "qwen2");
  auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.error_message();
  EXPECT_EQ(tokens->size(), 151936u);
  EXPECT_EQ((*tokens)[0], "!");
  auto merges = f->get_string_array("tokenizer.ggml.merges");
  ASSERT_TRUE(merges.ok()) << merges.error_message();
  EXPECT_GT(merges->size(), 100000u);
  EXPECT_EQ((*merges)[0], "\xC4\xA0 \xC4\xA0");  // "Ġ Ġ", the first Qwen2 merge
}

TEST(GgufReader, Qwen35VocabFile) {
  auto f = GgufFile::open(kVocabDir + "ggml-vocab-qwen35.gguf");
  ASSERT_TRUE(f.ok()) << f.error_message();
  EXPECT_EQ(*f->get_string("tokenizer.ggml.model"), "gpt2");
  auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ(tokens->size(), 151936u);  // qwen2-architecture vocab file, pre-tokenizer "qwen35"
  EXPECT_EQ(*f->get_string("tokenizer.ggml.pre"), "qwen35");
}

// A hand-assembled v3 file: two KVs and two tensors, default alignment 32.
Bytes handmade_file(uint32_t version = 3) {
  Bytes x;
  x.put<uint32_t>(kMagic).put<uint32_t>(version).put<uint64_t>(2).put<uint64_t>(2);
  x.str("general.name").put<uint32_t>(8).str("tiny");
  x.str("a.list").put<uint32_t>(9).put<uint32_t>(5).put<uint64_t>(3).put<int32_t>(-1).put<int32_t>(7).put<int32_t>(9);
  x.str("w").put<uint32_t>(2).put<uint64_t>(2).put<uint64_t>(3).put<uint32_t>(0).put<uint64_t>(0);
  x.str("q").put<uint32_t>(1).put<uint64_t>(32).put<uint32_t>(8).put<uint64_t>(32);
  x.pad_to(32);
  for (int k = 0; k < 6; ++k) x.put<float>(static_cast<float>(k) + 0.5f);
  x.pad_to(32);
  for (int k = 0; k < 34; ++k) x.put<uint8_t>(static_cast<uint8_t>(k));
  return x;
}

TEST(GgufReader, HandmadeFile) {
  Bytes x = handmade_file();
  auto f = GgufFile::parse(x.b, "hand.gguf");
  ASSERT_TRUE(f.ok()) << f.error_message();
  EXPECT_EQ(*f->get_string("general.name"), "tiny");
  EXPECT_EQ(*f->get_i32_array("a.list"), (std::vector<int32_t>{-1, 7, 9}));
  EXPECT_FALSE(f->get_u32("a.list").ok());
  ASSERT_EQ(f->tensors().size(), 2u);
  const TensorInfo* w = f->find_tensor("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->type, DType::kF32);
  EXPECT_EQ(w->shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(w->n_bytes, 24u);
  float w5;
  std::memcpy(&w5, w->data + 20, 4);
  EXPECT_EQ(w5, 5.5f);
  const TensorInfo* q = f->find_tensor("q");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, DType::kQ8_0);
  EXPECT_EQ(q->n_bytes, 34u);
  EXPECT_EQ(q->data[33], 33);
  EXPECT_EQ(q->data - w->data, 32);
  EXPECT_EQ(f->find_tensor("nope"), nullptr);
}

TEST(GgufReader, Version2AcceptedVersion1AndBigEndianRejected) {
  Bytes v2 = handmade_file(2);
  EXPECT_TRUE(GgufFile::parse(v2.b, "v2").ok());
  Bytes v1 = handmade_file(1);
  auto r1 = GgufFile::parse(v1.b, "v1.gguf");
  ASSERT_FALSE(r1.ok());
  EXPECT_NE(r1.error_message().find("version 1"), std::string::npos) << r1.error_message();
  Bytes be = handmade_file(0x03000000u);
  auto rb = GgufFile::parse(be.b, "be.gguf");
  ASSERT_FALSE(rb.ok());
  EXPECT_NE(rb.error_message().find("big-endian"), std::string::npos) << rb.error_message();
}

TEST(GgufReader, NotGguf) {
  std::vector<uint8_t> junk = {'G', 'G', 'M', 'L', 0, 0, 0, 0};
  auto r = GgufFile::parse(junk, "junk.bin");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_message().find("junk.bin"), std::string::npos);
  EXPECT_FALSE(GgufFile::open("/nonexistent/file.gguf").ok());
}

}  // namespace
}  // namespace splash::gguf
