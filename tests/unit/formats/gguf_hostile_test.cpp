// Hostile GGUF input: every truncation of a valid file and targeted corruptions must give an Error
// that names the problem, never a crash, a huge allocation or an out-of-bounds view.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "formats/gguf_writer.h"

namespace splash::gguf {
namespace {

// Knobs for a hand-assembled file: one string KV, one u32-array KV, optional general.alignment, and
// two F32 tensors "a" [8] and "b" [4, 2].
struct Spec {
  uint64_t n_tensors = 2;
  uint64_t n_kv = 2;
  uint64_t key_len = 12;           // length field of the first key ("general.name")
  uint32_t first_value_type = 8;   // string
  uint32_t array_elem_type = 4;    // u32
  uint64_t array_count = 3;
  bool add_alignment = false;
  uint32_t alignment_type = 4;     // u32
  uint32_t alignment = 32;
  uint32_t b_n_dims = 2;
  uint64_t b_dim0 = 4, b_dim1 = 2;
  uint32_t b_type = 0;             // F32
  uint64_t b_offset = 32;
  std::string b_name = "b";
};

struct Bytes {
  std::vector<uint8_t> b;
  template <class T>
  void put(T v) {
    uint8_t t[sizeof(T)];
    std::memcpy(t, &v, sizeof(T));
    b.insert(b.end(), t, t + sizeof(T));
  }
  void str(const std::string& s, uint64_t len) {
    put<uint64_t>(len);
    b.insert(b.end(), s.begin(), s.end());
  }
};

std::vector<uint8_t> build(const Spec& s) {
  Bytes x;
  x.put<uint32_t>(kMagic);
  x.put<uint32_t>(3);
  x.put<uint64_t>(s.n_tensors);
  x.put<uint64_t>(s.n_kv + (s.add_alignment ? 1 : 0));
  x.str("general.name", s.key_len);
  x.put<uint32_t>(s.first_value_type);
  x.str("tiny", 4);
  x.str("list", 4);
  x.put<uint32_t>(9);
  x.put<uint32_t>(s.array_elem_type);
  x.put<uint64_t>(s.array_count);
  for (int k = 0; k < 3; ++k) x.put<uint32_t>(10 + k);
  if (s.add_alignment) {
    x.str("general.alignment", 17);
    x.put<uint32_t>(s.alignment_type);
    x.put<uint32_t>(s.alignment);
  }
  x.str("a", 1);
  x.put<uint32_t>(1);
  x.put<uint64_t>(8);
  x.put<uint32_t>(0);
  x.put<uint64_t>(0);
  x.str(s.b_name, s.b_name.size());
  x.put<uint32_t>(s.b_n_dims);
  x.put<uint64_t>(s.b_dim0);
  if (s.b_n_dims >= 2) x.put<uint64_t>(s.b_dim1);
  for (uint32_t d = 2; d < s.b_n_dims && d < 8; ++d) x.put<uint64_t>(1);
  x.put<uint32_t>(s.b_type);
  x.put<uint64_t>(s.b_offset);
  const uint32_t al = (s.add_alignment && s.alignment && !(s.alignment & (s.alignment - 1))) ? s.alignment : 32;
  while (x.b.size() % al) x.b.push_back(0);
  for (int k = 0; k < 64; ++k) x.b.push_back(static_cast<uint8_t>(k));  // a: 32 bytes, b: 32 bytes
  return x.b;
}

// Parses and expects an error containing `needle`.
void expect_error(const Spec& s, const std::string& needle) {
  auto bytes = build(s);
  auto r = GgufFile::parse(bytes, "bad.gguf");
  ASSERT_FALSE(r.ok()) << "expected an error containing: " << needle;
  EXPECT_NE(r.error_message().find(needle), std::string::npos) << r.error_message();
  EXPECT_NE(r.error_message().find("bad.gguf"), std::string::npos) << r.error_message();
}

TEST(GgufHostile, BaselineIsValid) {
  auto bytes = build(Spec{});
  auto r = GgufFile::parse(bytes, "ok.gguf");
  ASSERT_TRUE(r.ok()) << r.error_message();
  EXPECT_EQ(r->find_tensor("b")->data[0], 32);
  Spec s;
  s.add_alignment = true;
  s.alignment = 64;
  s.b_offset = 64;
  bytes = build(s);
  bytes.resize(bytes.size() + 32);  // b at 64 needs 96 bytes of data
  r = GgufFile::parse(bytes, "ok64.gguf");
  ASSERT_TRUE(r.ok()) << r.error_message();
  EXPECT_EQ(r->alignment(), 64u);
}

TEST(GgufHostile, EveryTruncationOfAWriterFileFails) {
  GgufWriter w;
  ASSERT_TRUE(w.set_string("general.architecture", "llama").ok());
  ASSERT_TRUE(w.set("tokenizer.ggml.tokens", Value::array_of_strings({"<unk>", "<s>", "</s>", "hello"})).ok());
  ASSERT_TRUE(w.set("n.nested", Value::array_of_arrays({Value::array_of_ints(ValueType::kI16, {1, -2})})).ok());
  ASSERT_TRUE(w.set_f32("x.eps", 1e-5f).ok());
  std::vector<uint8_t> t1(34 * 2, 7), t2(4 * 6, 9);
  ASSERT_TRUE(w.add_tensor_copy("q", DType::kQ8_0, {32, 2}, t1).ok());
  ASSERT_TRUE(w.add_tensor_copy("f", DType::kF32, {3, 2}, t2).ok());
  auto full = w.write_to_memory();
  ASSERT_TRUE(full.ok());
  ASSERT_TRUE(GgufFile::parse(*full, "full").ok());
  for (size_t n = 0; n < full->size(); ++n) {
    // A fresh allocation of exactly n bytes, so ASan sees any read past the end.
    std::vector<uint8_t> cut(full->begin(), full->begin() + static_cast<std::ptrdiff_t>(n));
    auto r = GgufFile::parse(cut, "cut.gguf");
    EXPECT_FALSE(r.ok()) << "truncated at " << n << " of " << full->size();
    if (!r.ok()) {
      EXPECT_NE(r.error_message().find("cut.gguf"), std::string::npos);
    }
  }
}

TEST(GgufHostile, HugeCounts) {
  Spec s;
  s.n_kv = 1ull << 60;
  expect_error(s, "metadata count");
  s = Spec{};
  s.n_tensors = 1ull << 60;
  expect_error(s, "tensor count");
  s = Spec{};
  s.array_count = 1ull << 60;
  expect_error(s, "array length");
  s = Spec{};
  s.array_count = 1ull << 62;  // * 4 bytes would wrap around 64 bits
  expect_error(s, "array length");
}

TEST(GgufHostile, HugeStringLength) {
  Spec s;
  s.key_len = ~0ull;
  expect_error(s, "metadata key length");
  s.key_len = 1ull << 40;
  expect_error(s, "metadata key length");
}

TEST(GgufHostile, BadTypeIds) {
  Spec s;
  s.first_value_type = 13;
  expect_error(s, "unknown value type 13");
  s = Spec{};
  s.array_elem_type = 0xffffffffu;
  expect_error(s, "unknown array element type");
  s = Spec{};
  s.b_type = 4;  // ggml type 4 (old Q4_2) no longer exists
  expect_error(s, "unknown or unsupported ggml type id 4");
  s.b_type = 1000;
  expect_error(s, "ggml type id 1000");
}

TEST(GgufHostile, BadShapes) {
  Spec s;
  s.b_n_dims = 5;
  expect_error(s, "5 dimensions");
  s = Spec{};
  s.b_dim1 = 0;
  expect_error(s, "equal to 0");
  s = Spec{};
  s.b_dim0 = 1ull << 40;
  s.b_dim1 = 1ull << 40;
  expect_error(s, "overflows");
  s = Spec{};
  s.b_type = 8;  // Q8_0 with a row of 4: not a whole block
  expect_error(s, "not a multiple of the block size 32");
}

TEST(GgufHostile, BadOffsets) {
  Spec s;
  s.b_offset = 1ull << 50;
  expect_error(s, "outside the data section");
  s.b_offset = ~0ull - 31;  // offset + size wraps around
  expect_error(s, "outside the data section");
  s = Spec{};
  s.b_offset = 40;
  expect_error(s, "not a multiple of the alignment");
  s = Spec{};
  s.b_offset = 0;  // on top of "a"
  expect_error(s, "overlap");
}

TEST(GgufHostile, DuplicateNamesAndKeys) {
  Spec s;
  s.b_name = std::string(1, 'a');  // not = "a": GCC 12 -Werror=restrict false positive on that assignment
  expect_error(s, "duplicate tensor name 'a'");
  // A duplicate key: patch the second key "list" into "gene" won't do; build one with the same key.
  Bytes x;
  x.put<uint32_t>(kMagic);
  x.put<uint32_t>(3);
  x.put<uint64_t>(0);
  x.put<uint64_t>(2);
  for (int k = 0; k < 2; ++k) {
    x.str("k", 1);
    x.put<uint32_t>(0);
    x.put<uint8_t>(1);
  }
  auto r = GgufFile::parse(x.b, "dup.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_message().find("duplicate metadata key 'k'"), std::string::npos) << r.error_message();
}

TEST(GgufHostile, BadAlignment) {
  for (uint32_t al : {0u, 3u, 48u}) {
    Spec s;
    s.add_alignment = true;
    s.alignment = al;
    expect_error(s, "power of two");
  }
  Spec s;
  s.add_alignment = true;
  s.alignment_type = 6;  // f32
  expect_error(s, "general.alignment has type f32");
}

TEST(GgufHostile, DeepNestingAndBadBool) {
  Bytes x;
  x.put<uint32_t>(kMagic);
  x.put<uint32_t>(3);
  x.put<uint64_t>(0);
  x.put<uint64_t>(1);
  x.str("deep", 4);
  x.put<uint32_t>(9);
  for (int d = 0; d < 100; ++d) {
    x.put<uint32_t>(9);
    x.put<uint64_t>(1);
  }
  x.put<uint32_t>(0);
  x.put<uint64_t>(0);
  auto r = GgufFile::parse(x.b, "deep.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_message().find("nests arrays deeper"), std::string::npos) << r.error_message();

  Bytes y;
  y.put<uint32_t>(kMagic);
  y.put<uint32_t>(3);
  y.put<uint64_t>(0);
  y.put<uint64_t>(1);
  y.str("flag", 4);
  y.put<uint32_t>(7);
  y.put<uint8_t>(2);
  r = GgufFile::parse(y.b, "bool.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_message().find("bool value 2"), std::string::npos) << r.error_message();
}

}  // namespace
}  // namespace splash::gguf
