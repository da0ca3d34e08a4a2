#include "formats/safetensors.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "core/half.h"

namespace splash {

namespace {

using nlohmann::json;

struct DTypeName {
  std::string_view name;
  DType type;
};
constexpr std::array<DTypeName, 13> kDTypes = {{
    {"F32", DType::kF32}, {"F16", DType::kF16}, {"BF16", DType::kBF16}, {"F64", DType::kF64},
    {"I8", DType::kI8},   {"I16", DType::kI16}, {"I32", DType::kI32},   {"I64", DType::kI64},
    {"U8", DType::kU8},   {"U16", DType::kU16}, {"U32", DType::kU32},   {"U64", DType::kU64},
    {"BOOL", DType::kBool},
}};

// Reads a non-negative JSON integer; nlohmann stores non-negative literals as number_unsigned.
bool as_u64(const json& j, uint64_t* out) {
  if (!j.is_number_unsigned()) return false;
  *out = j.get<uint64_t>();
  return true;
}

Result<SafeTensor> parse_entry(const std::string& source, const std::string& name, const json& e,
                               uint64_t data_size, std::span<const uint8_t> data) {
  auto where = [&] { return str_cat(source, ": tensor '", name, "'"); };
  if (!e.is_object()) return make_error(where(), ": header entry is not a JSON object");
  SafeTensor t;
  t.name = name;

  auto dt = e.find("dtype");
  if (dt == e.end()) return make_error(where(), ": missing field 'dtype'");
  if (!dt->is_string()) return make_error(where(), ": field 'dtype' is not a string");
  const auto& dts = dt->get_ref<const std::string&>();
  auto dtype = safetensors_dtype_from_string(dts);
  if (!dtype) return make_error(where(), ": unsupported dtype '", dts, "'");
  t.dtype = *dtype;

  auto sh = e.find("shape");
  if (sh == e.end()) return make_error(where(), ": missing field 'shape'");
  if (!sh->is_array()) return make_error(where(), ": field 'shape' is not an array");
  uint64_t n = 1;
  bool overflow = false;
  for (size_t i = 0; i < sh->size(); ++i) {
    uint64_t d = 0;
    if (!as_u64((*sh)[i], &d))
      return make_error(where(), ": shape[", i, "] is not a non-negative integer");
    t.shape.push_back(d);
    uint64_t next = 0;
    if (__builtin_mul_overflow(n, d, &next)) overflow = true;
    n = next;
  }
  // A zero dimension makes the product 0 even if an earlier partial product overflowed.
  bool has_zero = std::find(t.shape.begin(), t.shape.end(), 0u) != t.shape.end();
  if (has_zero) n = 0;
  if (overflow && !has_zero) return make_error(where(), ": shape product overflows 64 bits");
  t.n_elems = n;

  auto off = e.find("data_offsets");
  if (off == e.end()) return make_error(where(), ": missing field 'data_offsets'");
  if (!off->is_array() || off->size() != 2)
    return make_error(where(), ": field 'data_offsets' is not an array of 2 integers");
  uint64_t begin = 0, end = 0;
  if (!as_u64((*off)[0], &begin) || !as_u64((*off)[1], &end))
    return make_error(where(), ": data_offsets are not non-negative integers");
  if (begin > end) return make_error(where(), ": data_offsets begin ", begin, " > end ", end);
  if (end > data_size)
    return make_error(where(), ": data_offsets end ", end, " is past the data section (", data_size,
                      " bytes)");
  auto bytes = dtype_bytes(t.dtype, n);
  if (!bytes) return make_error(where(), ": byte size of ", n, " elements overflows");
  if (*bytes != end - begin)
    return make_error(where(), ": data_offsets span ", end - begin, " bytes but shape and dtype ",
                      dts, " need ", *bytes);
  t.data = data.subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin));
  return t;
}

}  // namespace

std::optional<DType> safetensors_dtype_from_string(std::string_view s) {
  for (const auto& d : kDTypes)
    if (d.name == s) return d.type;
  return std::nullopt;
}

std::optional<std::string_view> safetensors_dtype_to_string(DType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d.name;
  return std::nullopt;
}

Result<std::vector<float>> safetensor_to_f32(const SafeTensor& t) {
  std::vector<float> out(static_cast<size_t>(t.n_elems));
  const uint8_t* p = t.data.data();
  switch (t.dtype) {
    case DType::kF32:
      if (!out.empty()) std::memcpy(out.data(), p, out.size() * 4);
      break;
    case DType::kF64:
      for (size_t i = 0; i < out.size(); ++i) {
        double d;
        std::memcpy(&d, p + i * 8, 8);
        out[i] = static_cast<float>(d);
      }
      break;
    case DType::kF16:
    case DType::kBF16:
      for (size_t i = 0; i < out.size(); ++i) {
        uint16_t h;
        std::memcpy(&h, p + i * 2, 2);
        out[i] = t.dtype == DType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      break;
    default:
      return make_error("tensor '", t.name, "': dtype ", dtype_name(t.dtype), " is not a float type");
  }
  return out;
}

namespace {

// The first repeated key of the top-level object. (A parse callback could see the keys too, but
// nlohmann's callback parser rescans the parent object at every end of object: quadratic in the
// tensor count, seconds for a MoE checkpoint with one tensor per expert in one file.)
struct TopLevelKeys : nlohmann::json_sax<json> {
  int depth = 0;
  std::set<std::string> seen;
  std::string duplicate;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return ++depth, true; }
  bool end_object() override { return --depth, true; }
  bool start_array(std::size_t) override { return ++depth, true; }
  bool end_array() override { return --depth, true; }
  bool key(string_t& k) override {
    if (depth == 1 && duplicate.empty() && !seen.insert(k).second) duplicate = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

}  // namespace

Result<SafeTensorsHeader> parse_safetensors(std::span<const uint8_t> bytes, const std::string& source) {
  if (bytes.size() < 8)
    return make_error(source, ": too small for a safetensors file (", bytes.size(), " bytes)");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[static_cast<size_t>(i)];
  if (header_len > kSafetensorsMaxHeaderBytes)
    return make_error(source, ": header length ", header_len, " exceeds the ", kSafetensorsMaxHeaderBytes,
                      "-byte limit (not a safetensors file?)");
  if (header_len > bytes.size() - 8)
    return make_error(source, ": header length ", header_len, " is past the end of the file (",
                      bytes.size(), " bytes)");
  const char* hbegin = reinterpret_cast<const char*>(bytes.data() + 8);
  const char* hend = hbegin + header_len;

  json root;
  try {
    root = json::parse(hbegin, hend);
  } catch (const json::exception& e) {
    return make_error(source, ": header is not valid JSON: ", e.what());
  }
  // nlohmann keeps the last of duplicate keys silently: a second, SAX pass sees every key.
  TopLevelKeys keys;
  json::sax_parse(hbegin, hend, &keys);
  if (!keys.duplicate.empty()) return make_error(source, ": tensor '", keys.duplicate, "' appears twice in the header");
  if (!root.is_object()) return make_error(source, ": header is not a JSON object");

  SafeTensorsHeader h;
  h.data_offset = 8 + header_len;
  auto data = bytes.subspan(static_cast<size_t>(h.data_offset));
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) return make_error(source, ": __metadata__ is not a JSON object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string())
          return make_error(source, ": __metadata__ value '", mk, "' is not a string");
        h.metadata.emplace(mk, mv.get<std::string>());
      }
      continue;
    }
    SPLASH_TRY(auto t, parse_entry(source, key, value, data.size(), data));
    h.tensors.push_back(std::move(t));
  }

  std::sort(h.tensors.begin(), h.tensors.end(), [&](const SafeTensor& a, const SafeTensor& b) {
    if (a.data.data() != b.data.data()) return a.data.data() < b.data.data();
    return a.data.size() < b.data.size();
  });
  // Empty tensors occupy no bytes and cannot overlap anything.
  const SafeTensor* prev = nullptr;
  for (const auto& t : h.tensors) {
    if (t.data.empty()) continue;
    if (prev != nullptr && t.data.data() < prev->data.data() + prev->data.size())
      return make_error(source, ": tensors '", prev->name, "' and '", t.name, "' overlap in the data section");
    prev = &t;
  }
  return h;
}

Result<SafeTensorsFile> SafeTensorsFile::open(const std::string& path) {
  SPLASH_TRY(auto file, MappedFile::open(path));
  SPLASH_TRY(auto header, parse_safetensors(file.bytes(), path));
  SafeTensorsFile f;
  f.file_ = std::move(file);
  f.header_ = std::move(header);
  for (size_t i = 0; i < f.header_.tensors.size(); ++i) f.by_name_.emplace(f.header_.tensors[i].name, i);
  return f;
}

const SafeTensor* SafeTensorsFile::find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &header_.tensors[it->second];
}

}  // namespace splash
