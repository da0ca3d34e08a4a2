// GGUF writer: write -> read round trips for every value type and every way of adding a tensor.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "formats/gguf.h"
#include "formats/gguf_writer.h"

namespace splash::gguf {
namespace {

std::vector<std::pair<std::string, Value>> every_value_type() {
  std::vector<std::pair<std::string, Value>> kv = {
      {"t.u8", Value::from_u8(250)},
      {"t.i8", Value::from_i8(-128)},
      {"t.u16", Value::from_u16(65535)},
      {"t.i16", Value::from_i16(-32768)},
      {"t.u32", Value::from_u32(4000000000u)},
      {"t.i32", Value::from_i32(-2000000000)},
      {"t.u64", Value::from_u64(std::numeric_limits<uint64_t>::max())},
      {"t.i64", Value::from_i64(std::numeric_limits<int64_t>::min())},
      {"t.f32", Value::from_f32(3.25f)},
      {"t.f64", Value::from_f64(-1.0 / 3.0)},
      {"t.bool", Value::from_bool(true)},
      {"t.str", Value::from_string("h\xC3\xA9llo \0 world")},
      {"t.empty_str", Value::from_string("")},
      {"a.u8", Value::array_of_uints(ValueType::kU8, {0, 1, 255})},
      {"a.u16", Value::array_of_uints(ValueType::kU16, {7, 65535})},
      {"a.u32", Value::array_of_uints(ValueType::kU32, {1, 2, 3})},
      {"a.u64", Value::array_of_uints(ValueType::kU64, {1ull << 63})},
      {"a.i8", Value::array_of_ints(ValueType::kI8, {-1, 127})},
      {"a.i16", Value::array_of_ints(ValueType::kI16, {-300})},
      {"a.i32", Value::array_of_ints(ValueType::kI32, {-5, 0, 5})},
      {"a.i64", Value::array_of_ints(ValueType::kI64, {-(1ll << 62)})},
      {"a.f32", Value::array_of_floats(ValueType::kF32, {0.1, -2.5, 1e30})},
      {"a.f64", Value::array_of_floats(ValueType::kF64, {0.1, 1e300})},
      {"a.bool", Value::array_of_bools({true, false, true})},
      {"a.str", Value::array_of_strings({"a", "", "ccc"})},
      {"a.empty", Value::array_of_strings({})},
      {"a.nested", Value::array_of_arrays({Value::array_of_ints(ValueType::kI32, {1, 2}),
                                           Value::array_of_strings({"x", "y"}),
                                           Value::array_of_arrays({Value::array_of_floats(ValueType::kF32, {1.5})})})},
  };
  return kv;
}

std::vector<uint8_t> ramp(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t k = 0; k < n; ++k) v[k] = static_cast<uint8_t>(k * 31 + seed);
  return v;
}

TEST(GgufWriter, RoundTripEveryValueTypeAndTensorKind) {
  for (uint32_t alignment : {32u, 64u, 1u}) {
    GgufWriter w(alignment);
    auto kv = every_value_type();
    for (auto& [k, v] : kv) ASSERT_TRUE(w.set(k, v).ok());
    auto f32_bytes = ramp(4 * 3 * 5, 1);
    auto q80_bytes = ramp(34 * 2, 2);
    auto q4k_bytes = ramp(144, 3);
    ASSERT_TRUE(w.add_tensor_copy("f32", DType::kF32, {3, 5}, f32_bytes).ok());
    ASSERT_TRUE(w.add_tensor_view("q8", DType::kQ8_0, {32, 2}, q80_bytes).ok());
    ASSERT_TRUE(w.add_tensor_producer("q4k", DType::kQ4_K, {256}, [&](ByteSink& s) -> Status {
                   // Streamed in two uneven chunks, as a converter would.
                   SPLASH_TRY_STATUS(s.write(std::span(q4k_bytes).first(100)));
                   return s.write(std::span(q4k_bytes).subspan(100));
                 }).ok());
    f32_bytes[0] ^= 0xff;  // add_tensor_copy took a copy: later changes must not show
    auto mem = w.write_to_memory();
    ASSERT_TRUE(mem.ok()) << mem.error_message();
    auto f = GgufFile::parse(*mem, "mem.gguf");
    ASSERT_TRUE(f.ok()) << f.error_message();
    EXPECT_EQ(f->alignment(), alignment);
    EXPECT_EQ(f->data_offset() % alignment, 0u);
    // Keys in insertion order (after general.alignment when it is not the default).
    std::vector<std::string> expect_keys;
    if (alignment != 32) expect_keys.push_back("general.alignment");
    for (auto& [k, v] : kv) expect_keys.push_back(k);
    EXPECT_EQ(f->keys(), expect_keys);
    for (auto& [k, v] : kv) {
      const Value* got = f->find(k);
      ASSERT_NE(got, nullptr) << k;
      EXPECT_TRUE(*got == v) << k;
    }
    EXPECT_EQ(*f->get_u64("t.u64"), std::numeric_limits<uint64_t>::max());
    EXPECT_EQ(*f->get_i64("t.i64"), std::numeric_limits<int64_t>::min());
    EXPECT_EQ(*f->get_f32("t.f32"), 3.25f);
    EXPECT_FALSE(f->get_u32("t.i8").ok());  // -128 does not fit a u32
    EXPECT_EQ(*f->get_i32("t.u8"), 250);    // a u8 fits an i32
    EXPECT_FALSE(f->get_i32("t.u32").ok()); // 4e9 does not
    EXPECT_EQ(*f->get_bool("t.bool"), true);
    EXPECT_EQ(f->get_string_array("a.str")->size(), 3u);
    EXPECT_EQ(*f->get_f32_array("a.f32"), (std::vector<float>{0.1f, -2.5f, 1e30f}));

    ASSERT_EQ(f->tensors().size(), 3u);
    const TensorInfo* t = f->find_tensor("f32");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->shape, (std::vector<uint64_t>{3, 5}));
    f32_bytes[0] ^= 0xff;
    EXPECT_EQ(std::vector<uint8_t>(t->data, t->data + t->n_bytes), f32_bytes);
    t = f->find_tensor("q8");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type, DType::kQ8_0);
    EXPECT_EQ(std::vector<uint8_t>(t->data, t->data + t->n_bytes), q80_bytes);
    t = f->find_tensor("q4k");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->type, DType::kQ4_K);
    EXPECT_EQ(std::vector<uint8_t>(t->data, t->data + t->n_bytes), q4k_bytes);
    for (const TensorInfo& ti : f->tensors()) EXPECT_EQ(ti.offset % alignment, 0u) << ti.name;
  }
}

TEST(GgufWriter, WritesFileAtomicallyAndRewritesIdentically) {
  const std::string path = std::string(SPLASH_BINARY_DIR) + "/gguf_writer_test_" + std::to_string(getpid()) + ".gguf";
  GgufWriter w;
  ASSERT_TRUE(w.set_string("general.architecture", "llama").ok());
  ASSERT_TRUE(w.set_u32("llama.block_count", 6).ok());
  ASSERT_TRUE(w.set_u32("llama.block_count", 7).ok());  // the last value wins, position is kept
  auto bytes = ramp(2 * 8 * 4 * 2, 9);  // 64 f16 values
  ASSERT_TRUE(w.add_tensor_copy("tok_embd", DType::kF16, {8, 4, 2}, bytes).ok());
  ASSERT_TRUE(w.write(path).ok());
  EXPECT_NE(access((path + ".tmp-" + std::to_string(getpid())).c_str(), F_OK), 0);
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error_message();
  EXPECT_EQ(f->keys().size(), 2u);
  EXPECT_EQ(*f->get_u32("llama.block_count"), 7u);
  EXPECT_EQ(f->tensors()[0].shape, (std::vector<uint64_t>{8, 4, 2}));

  // Reading a file and writing it back with copy_metadata + views gives the same bytes.
  GgufWriter w2;
  ASSERT_TRUE(w2.copy_metadata(*f).ok());
  for (const TensorInfo& t : f->tensors()) ASSERT_TRUE(w2.add_tensor_view(t.name, t.type, t.shape, t.bytes()).ok());
  auto again = w2.write_to_memory();
  auto first = w.write_to_memory();
  ASSERT_TRUE(again.ok() && first.ok());
  EXPECT_EQ(*again, *first);
  std::remove(path.c_str());
}

TEST(GgufWriter, RejectsBadTensors) {
  GgufWriter w;
  std::vector<uint8_t> b(34);
  EXPECT_FALSE(w.add_tensor_copy("", DType::kQ8_0, {32}, b).ok());
  EXPECT_FALSE(w.add_tensor_copy("x", DType::kQ8_0, {16, 2}, b).ok());    // row not a whole block
  EXPECT_FALSE(w.add_tensor_copy("x", DType::kQ8_0, {32, 2}, b).ok());    // too few bytes
  EXPECT_FALSE(w.add_tensor_copy("x", DType::kQ8_0, {32, 0}, b).ok());    // zero dim
  EXPECT_FALSE(w.add_tensor_copy("x", DType::kQ8_0, {32, 1, 1, 1, 1}, b).ok());  // 5 dims
  EXPECT_FALSE(w.add_tensor_copy("x", DType::kU32, {1}, std::span(b).first(4)).ok());  // not a GGUF type
  EXPECT_TRUE(w.add_tensor_copy("x", DType::kQ8_0, {32}, b).ok());
  EXPECT_FALSE(w.add_tensor_copy("x", DType::kQ8_0, {32}, b).ok());  // duplicate
  EXPECT_FALSE(w.set_u32("general.alignment", 64).ok());
  // A producer that writes the wrong number of bytes fails the write instead of corrupting the file.
  ASSERT_TRUE(w.add_tensor_producer("p", DType::kF32, {4}, [](ByteSink& s) -> Status {
                 uint8_t z[12] = {};
                 return s.write(z);
               }).ok());
  auto r = w.write_to_memory();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error_message().find("'p'"), std::string::npos) << r.error_message();
}

}  // namespace
}  // namespace splash::gguf
