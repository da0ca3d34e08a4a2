#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/half.h"
#include "formats/safetensors.h"
#include "formats/safetensors_writer.h"

namespace splash {
namespace {

namespace fs = std::filesystem;

// Builds a safetensors blob by hand (independent of our writer): u64 LE length, JSON, data.
std::vector<uint8_t> blob(const std::string& json, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out(8 + json.size() + data.size());
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  if (!json.empty()) std::memcpy(out.data() + 8, json.data(), json.size());
  if (!data.empty()) std::memcpy(out.data() + 8 + json.size(), data.data(), data.size());
  return out;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("splash_st_test_" + std::to_string(getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

void write_raw(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Replaces the first `from` in `s` (built by concatenation: GCC 12 warns falsely on string::replace).
std::string replace_first(const std::string& s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  if (at == std::string::npos) return s;
  return s.substr(0, at) + to + s.substr(at + from.size());
}

std::string parse_error(const std::string& json, const std::vector<uint8_t>& data = {}) {
  auto b = blob(json, data);
  auto r = parse_safetensors(b, "x.safetensors");
  return r.ok() ? std::string("<ok>") : r.error_message();
}

TEST(Safetensors, ParsesHandWrittenFile) {
  std::vector<uint8_t> data = f32_bytes({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f});
  uint16_t h[2] = {f32_to_bf16(0.5f), f32_to_bf16(-2.0f)};
  data.insert(data.end(), reinterpret_cast<uint8_t*>(h), reinterpret_cast<uint8_t*>(h) + 4);
  data.push_back(7);  // one I8
  std::string json =
      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[24,28]},"s":{"dtype":"I8","shape":[],"data_offsets":[28,29]},)"
      R"("e":{"dtype":"U32","shape":[0,4],"data_offsets":[29,29]}})";
  TempDir dir;
  write_raw(dir.file("a.safetensors"), blob(json, data));
  auto f = SafeTensorsFile::open(dir.file("a.safetensors"));
  ASSERT_TRUE(f.ok()) << f.error_message();
  ASSERT_EQ(f->tensors().size(), 4u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  const SafeTensor* w = f->find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::kF32);
  EXPECT_EQ(w->shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(w->n_elems, 6u);
  ASSERT_EQ(w->data.size(), 24u);
  float v[6];
  std::memcpy(v, w->data.data(), 24);
  EXPECT_EQ(v[5], 6.0f);  // row-major: element [1][2]
  const SafeTensor* b = f->find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kBF16);
  uint16_t bh;
  std::memcpy(&bh, b->data.data() + 2, 2);
  EXPECT_EQ(bf16_to_f32(bh), -2.0f);
  const SafeTensor* s = f->find("s");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->shape.empty());
  EXPECT_EQ(s->n_elems, 1u);
  EXPECT_EQ(s->data[0], 7);
  EXPECT_EQ(f->find("e")->n_elems, 0u);
  EXPECT_EQ(f->find("missing"), nullptr);
}

TEST(Safetensors, ConvertsFloatTensorsToF32) {
  uint16_t bf[3] = {0x3F80, 0xC000, 0x3E80};  // 1, -2, 0.25 in bfloat16
  uint16_t hf[2] = {0x3C00, 0xB800};          // 1, -0.5 in IEEE half
  double df[2] = {1.5, -3.25};
  std::vector<uint8_t> data(6 + 4 + 16);
  std::memcpy(data.data(), bf, 6);
  std::memcpy(data.data() + 6, hf, 4);
  std::memcpy(data.data() + 10, df, 16);
  auto b = blob(R"({"b":{"dtype":"BF16","shape":[3],"data_offsets":[0,6]},"h":{"dtype":"F16","shape":[2],"data_offsets":[6,10]},)"
                R"("d":{"dtype":"F64","shape":[2],"data_offsets":[10,26]},"i":{"dtype":"I8","shape":[0],"data_offsets":[26,26]}})",
                data);
  auto h = parse_safetensors(b, "x");
  ASSERT_TRUE(h.ok()) << h.error_message();
  auto get = [&](const char* n) -> const SafeTensor& {
    for (const auto& t : h->tensors)
      if (t.name == n) return t;
    static SafeTensor none;
    return none;
  };
  EXPECT_EQ(*safetensor_to_f32(get("b")), (std::vector<float>{1.0f, -2.0f, 0.25f}));
  EXPECT_EQ(*safetensor_to_f32(get("h")), (std::vector<float>{1.0f, -0.5f}));
  EXPECT_EQ(*safetensor_to_f32(get("d")), (std::vector<float>{1.5f, -3.25f}));
  auto bad = safetensor_to_f32(get("i"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error_message().find("tensor 'i'"), std::string::npos);
}

TEST(Safetensors, MapsEveryDtype) {
  const char* names[] = {"F32", "F16", "BF16", "F64", "I8", "I16", "I32", "I64", "U8", "U16", "U32", "U64", "BOOL"};
  const uint32_t sizes[] = {4, 2, 2, 8, 1, 2, 4, 8, 1, 2, 4, 8, 1};
  for (size_t i = 0; i < 13; ++i) {
    auto t = safetensors_dtype_from_string(names[i]);
    ASSERT_TRUE(t.has_value()) << names[i];
    EXPECT_EQ(dtype_traits(*t).block_bytes, sizes[i]) << names[i];
    EXPECT_EQ(*safetensors_dtype_to_string(*t), names[i]);
  }
  EXPECT_FALSE(safetensors_dtype_from_string("f32").has_value());  // case-sensitive, as in the format
  EXPECT_FALSE(safetensors_dtype_from_string("F8_E4M3").has_value());
  EXPECT_FALSE(safetensors_dtype_to_string(DType::kQ4_0).has_value());
}

TEST(Safetensors, RejectsBadHeaders) {
  // Truncated length prefix.
  std::vector<uint8_t> tiny = {1, 2, 3};
  EXPECT_NE(parse_safetensors(tiny, "x").error_message().find("too small"), std::string::npos);
  // Length past the end / over the cap.
  std::vector<uint8_t> past = {100, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
  EXPECT_NE(parse_safetensors(past, "x").error_message().find("past the end"), std::string::npos);
  std::vector<uint8_t> huge = {0, 0, 0, 0, 0, 0, 0, 0x40, '{', '}'};
  EXPECT_NE(parse_safetensors(huge, "x").error_message().find("limit"), std::string::npos);

  EXPECT_NE(parse_error("{\"a\":").find("not valid JSON"), std::string::npos);
  EXPECT_NE(parse_error("[1,2]").find("not a JSON object"), std::string::npos);
  EXPECT_NE(parse_error(R"({"__metadata__":{"k":1}})").find("__metadata__ value 'k'"), std::string::npos);
  EXPECT_NE(parse_error(R"({"t":{"shape":[1],"data_offsets":[0,4]}})").find("tensor 't': missing field 'dtype'"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"t":{"dtype":"F32","data_offsets":[0,4]}})").find("missing field 'shape'"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"t":{"dtype":"F32","shape":[1]}})").find("missing field 'data_offsets'"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"t":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}})", {0}).find("unsupported dtype 'F8'"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"t":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", {0, 0, 0, 0}).find("shape[0]"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"t":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", {0, 0, 0, 0}).find("shape[0]"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", {0, 0, 0, 0}).find("begin 4 > end 0"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", {0, 0, 0, 0}).find("past the data section"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", {0, 0, 0, 0}).find("need 8"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", {0, 0, 0, 0})
                .find("overflows"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"t":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,4]}})", {0, 0, 0, 0})
                .find("overflows"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"u":{"dtype":"F16","shape":[2],"data_offsets":[2,6]}})",
                        std::vector<uint8_t>(8))
                .find("overlap"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                        std::vector<uint8_t>(8))
                .find("'t' appears twice"),
            std::string::npos);
  // A zero dimension after a huge one is a valid empty tensor, not an overflow.
  EXPECT_EQ(parse_error(R"({"t":{"dtype":"F32","shape":[18446744073709551615,0],"data_offsets":[0,0]}})"), "<ok>");
}

TEST(Safetensors, ErrorsNameTheFile) {
  TempDir dir;
  write_raw(dir.file("bad.safetensors"), {1, 0, 0});
  auto f = SafeTensorsFile::open(dir.file("bad.safetensors"));
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.error_message().find("bad.safetensors"), std::string::npos);
  EXPECT_FALSE(SafeTensorsFile::open(dir.file("absent.safetensors")).ok());
}

TEST(SafetensorsWriter, RoundTripsWithMetadataAndPadding) {
  TempDir dir;
  std::vector<float> a = {1, -2, 3.5f, 4, 5, 6};
  std::vector<uint16_t> b = {f32_to_f16(0.25f), f32_to_f16(-8.0f), f32_to_f16(1e-3f)};
  std::vector<int64_t> c = {-5, 1ll << 40};
  std::vector<SafeTensorWrite> ts(3);
  ts[0] = {"layer.a", DType::kF32, {2, 3}, {reinterpret_cast<const uint8_t*>(a.data()), 24}, {}};
  ts[1] = {"layer.b", DType::kF16, {3}, {reinterpret_cast<const uint8_t*>(b.data()), 6}, {}};
  ts[2] = {"c", DType::kI64, {2}, {}, [&](ByteSink& s) -> Status {
             // Produced in two pieces, as a converter streaming a tensor would.
             SPLASH_TRY_STATUS(s.write({reinterpret_cast<const uint8_t*>(c.data()), 8}));
             return s.write({reinterpret_cast<const uint8_t*>(c.data()) + 8, 8});
           }};
  std::string path = dir.file("out.safetensors");
  auto st = write_safetensors(path, ts, {{"format", "mlx"}});
  ASSERT_TRUE(st.ok()) << st.error_message();

  // Header length is a multiple of 8 and padded with spaces.
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> raw((std::istreambuf_iterator<char>(in)), {});
  uint64_t hl = 0;
  std::memcpy(&hl, raw.data(), 8);
  EXPECT_EQ(hl % 8, 0u);
  EXPECT_EQ(raw.size(), 8 + hl + 24 + 6 + 16);
  EXPECT_EQ(raw[8], '{');
  for (uint64_t i = 8 + hl - 1; raw[i] != '}'; --i) EXPECT_EQ(raw[i], ' ');

  auto f = SafeTensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error_message();
  EXPECT_EQ(f->metadata().at("format"), "mlx");
  const SafeTensor* ta = f->find("layer.a");
  ASSERT_NE(ta, nullptr);
  EXPECT_EQ(ta->shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(std::memcmp(ta->data.data(), a.data(), 24), 0);
  EXPECT_EQ(f16_to_f32(reinterpret_cast<const uint16_t*>(f->find("layer.b")->data.data())[1]), -8.0f);
  int64_t c1;
  std::memcpy(&c1, f->find("c")->data.data() + 8, 8);
  EXPECT_EQ(c1, 1ll << 40);
  // Data section follows tensor order: a, b, c.
  EXPECT_EQ(f->find("layer.b")->data.data(), ta->data.data() + 24);
}

TEST(SafetensorsWriter, RejectsInconsistentInput) {
  TempDir dir;
  std::vector<uint8_t> bytes(8);
  std::vector<SafeTensorWrite> ts(1);
  ts[0] = {"t", DType::kF32, {3}, bytes, {}};
  auto st = write_safetensors(dir.file("x.safetensors"), ts);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error_message().find("tensor 't'"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir.file("x.safetensors")));

  ts[0] = {"t", DType::kF32, {3}, {}, [&](ByteSink& s) { return s.write(bytes); }};  // 8 of 12 bytes
  st = write_safetensors(dir.file("x.safetensors"), ts);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error_message().find("expected 12"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir.file("x.safetensors")));
  EXPECT_TRUE(fs::is_empty(dir.path()));  // no temporary left behind

  ts[0] = {"t", DType::kQ4_K, {256}, {}, {}};
  EXPECT_FALSE(write_safetensors(dir.file("x.safetensors"), ts).ok());
}

TEST(SafetensorsModel, ShardsAndLooksUpAcrossFiles) {
  TempDir dir;
  std::vector<std::vector<float>> data;
  std::vector<SafeTensorWrite> ts;
  for (int i = 0; i < 5; ++i) data.push_back(std::vector<float>(10, static_cast<float>(i)));
  for (int i = 0; i < 5; ++i)
    ts.push_back({str_cat("t", i), DType::kF32, {2, 5},
                  {reinterpret_cast<const uint8_t*>(data[static_cast<size_t>(i)].data()), 40}, {}});
  // 40 bytes per tensor, limit 100: shards of 2, 2, 1.
  auto names = write_safetensors_checkpoint(dir.path().string(), ts, {{"format", "pt"}}, 100);
  ASSERT_TRUE(names.ok()) << names.error_message();
  ASSERT_EQ(names->size(), 4u);
  EXPECT_EQ((*names)[0], "model-00001-of-00003.safetensors");
  EXPECT_EQ((*names)[3], "model.safetensors.index.json");

  auto m = SafeTensorsModel::open(dir.path().string());
  ASSERT_TRUE(m.ok()) << m.error_message();
  EXPECT_EQ(m->n_shards(), 3u);
  EXPECT_EQ(m->tensors().size(), 5u);
  for (int i = 0; i < 5; ++i) {
    const SafeTensor* t = m->find(str_cat("t", i));
    ASSERT_NE(t, nullptr);
    float v;
    std::memcpy(&v, t->data.data() + 36, 4);
    EXPECT_EQ(v, static_cast<float>(i));
  }
  EXPECT_NE(m->shard_path_of("t4").find("model-00003-of-00003"), std::string::npos);
  EXPECT_EQ(m->metadata().at("format"), "pt");

  // A tensor listed in the index but absent from its shard.
  std::ifstream in(dir.file("model.safetensors.index.json"));
  std::string idx((std::istreambuf_iterator<char>(in)), {});
  std::string bad = replace_first(idx, "\"t4\"", "\"zz\"");
  write_raw(dir.file("model.safetensors.index.json"), std::vector<uint8_t>(bad.begin(), bad.end()));
  auto m2 = SafeTensorsModel::open(dir.path().string());
  ASSERT_FALSE(m2.ok());
  EXPECT_NE(m2.error_message().find("'zz' is listed in weight_map but absent"), std::string::npos);

  // A missing shard.
  write_raw(dir.file("model.safetensors.index.json"), std::vector<uint8_t>(idx.begin(), idx.end()));
  fs::remove(dir.file("model-00002-of-00003.safetensors"));
  auto m3 = SafeTensorsModel::open(dir.path().string());
  ASSERT_FALSE(m3.ok());
  EXPECT_NE(m3.error_message().find("model-00002-of-00003.safetensors"), std::string::npos);
  EXPECT_NE(m3.error_message().find("missing"), std::string::npos);

  // Shard names may not leave the directory.
  std::string escape = replace_first(idx, "model-00001-of-00003.safetensors", "../model-00001-of-00003.safetensors");
  write_raw(dir.file("model.safetensors.index.json"), std::vector<uint8_t>(escape.begin(), escape.end()));
  EXPECT_FALSE(SafeTensorsModel::open(dir.path().string()).ok());
}

TEST(SafetensorsModel, SingleFileDirectoryAndPlainFile) {
  TempDir dir;
  std::vector<float> a = {1, 2};
  std::vector<SafeTensorWrite> ts = {{"a", DType::kF32, {2}, {reinterpret_cast<const uint8_t*>(a.data()), 8}, {}}};
  auto names = write_safetensors_checkpoint(dir.path().string(), ts, {}, 1000);
  ASSERT_TRUE(names.ok()) << names.error_message();
  EXPECT_EQ(*names, std::vector<std::string>{"model.safetensors"});
  auto m = SafeTensorsModel::open(dir.path().string());
  ASSERT_TRUE(m.ok()) << m.error_message();
  EXPECT_EQ(m->n_shards(), 1u);
  EXPECT_NE(m->find("a"), nullptr);
  auto m2 = SafeTensorsModel::open(dir.file("model.safetensors"));
  ASSERT_TRUE(m2.ok());
  EXPECT_NE(m2->find("a"), nullptr);

  TempDir empty;
  auto m3 = SafeTensorsModel::open(empty.path().string());
  ASSERT_FALSE(m3.ok());
  EXPECT_NE(m3.error_message().find("model.safetensors.index.json"), std::string::npos);
}

}  // namespace
}  // namespace splash
