#include "ple/table_layout.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "core/half.h"
#include "core/mapped_file.h"
#include "formats/gguf.h"
#include "formats/quant/dequant.h"

namespace splash::ple {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // as formats/safetensors.h

struct FileHeader {
  json entries;
  uint64_t data_offset = 0;
  uint64_t file_size = 0;
};

Status pread_all(int fd, void* dst, uint64_t n, uint64_t offset, const std::string& path) {
  auto* p = static_cast<uint8_t*>(dst);
  while (n > 0) {
    ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      return make_error(path, ": read of ", n, " bytes at offset ", offset,
                        " failed: ", got < 0 ? std::strerror(errno) : "end of file");
    p += got;
    n -= static_cast<uint64_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return {};
}

Result<FileHeader> read_header(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(path, ": cannot open: ", std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return make_error(path, ": cannot stat: ", std::strerror(errno));
  FileHeader h;
  h.file_size = static_cast<uint64_t>(st.st_size);
  uint8_t len_bytes[8];
  if (h.file_size < 8) return make_error(path, ": too short for a safetensors header");
  SPLASH_TRY_STATUS(pread_all(fd, len_bytes, 8, 0, path));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | len_bytes[i];
  if (n > kMaxHeaderBytes || 8 + n > h.file_size)
    return make_error(path, ": safetensors header length ", n, " is invalid");
  std::string text(n, '\0');
  SPLASH_TRY_STATUS(pread_all(fd, text.data(), n, 8, path));
  h.entries = json::parse(text, nullptr, false);
  if (!h.entries.is_object()) return make_error(path, ": safetensors header is not a JSON object");
  h.data_offset = 8 + n;
  return h;
}

struct Entry {
  std::string dtype;
  std::vector<uint64_t> shape;
  uint64_t offset = 0;  // in the file
  uint64_t n_bytes = 0;
};

Result<Entry> entry(const FileHeader& h, const std::string& path, const std::string& name) {
  auto where = [&] { return str_cat(path, ": tensor '", name, "'"); };
  auto it = h.entries.find(name);
  if (it == h.entries.end()) return make_error(where(), " is listed in the index but absent from the file");
  const json& e = *it;
  if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() || !e.contains("shape") ||
      !e["shape"].is_array() || !e.contains("data_offsets") || !e["data_offsets"].is_array() ||
      e["data_offsets"].size() != 2)
    return make_error(where(), ": header entry needs dtype, shape and data_offsets");
  Entry out;
  out.dtype = e["dtype"].get<std::string>();
  for (const auto& d : e["shape"]) {
    if (!d.is_number_unsigned()) return make_error(where(), ": shape holds a non-integer");
    out.shape.push_back(d.get<uint64_t>());
  }
  const auto& off = e["data_offsets"];
  if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) return make_error(where(), ": bad data_offsets");
  uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
  if (b > en || h.data_offset + en > h.file_size)
    return make_error(where(), ": data_offsets [", b, ", ", en, "] lie outside the file");
  out.offset = h.data_offset + b;
  out.n_bytes = en - b;
  return out;
}

std::optional<std::pair<RowFormat, uint64_t>> hf_format(const std::string& dtype) {
  if (dtype == "BF16") return std::pair{RowFormat::kBF16, uint64_t{2}};
  if (dtype == "F16") return std::pair{RowFormat::kF16, uint64_t{2}};
  if (dtype == "F32") return std::pair{RowFormat::kF32, uint64_t{4}};
  if (dtype == "F8_E4M3") return std::pair{RowFormat::kF8E4M3, uint64_t{1}};
  return std::nullopt;
}

Result<float> read_scale(const std::string& path, const Entry& e, const std::string& name) {
  uint64_t n = 1;
  for (uint64_t d : e.shape) n *= d;
  auto fmt = hf_format(e.dtype);
  if (n != 1 || !fmt || fmt->first == RowFormat::kF8E4M3 || e.n_bytes != fmt->second)
    return make_error(path, ": '", name, "' must hold one BF16, F16 or F32 value (has ", n, " of ", e.dtype, ")");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(path, ": cannot open: ", std::strerror(errno));
  uint8_t b[4] = {};
  auto st = pread_all(fd, b, e.n_bytes, e.offset, path);
  ::close(fd);
  SPLASH_TRY_STATUS(st);
  float v = 0;
  if (fmt->first == RowFormat::kF32) {
    std::memcpy(&v, b, 4);
  } else {
    uint16_t u = static_cast<uint16_t>(b[0] | b[1] << 8);
    v = fmt->first == RowFormat::kBF16 ? bf16_to_f32(u) : f16_to_f32(u);
  }
  if (!std::isfinite(v) || v <= 0) return make_error(path, ": '", name, "' is ", v, ", not a positive scale");
  return v;
}

// name -> file for every tensor of the checkpoint at `path`.
Result<std::map<std::string, std::string>> hf_weight_map(const std::string& path) {
  std::map<std::string, std::string> out;
  std::vector<std::string> files;
  if (fs::is_directory(path)) {
    fs::path index = fs::path(path) / "model.safetensors.index.json";
    if (fs::exists(index)) {
      SPLASH_TRY(std::string text, read_text_file(index.string()));
      json j = json::parse(text, nullptr, false);
      if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
        return make_error(index.string(), ": no weight_map object");
      for (const auto& [name, file] : j["weight_map"].items()) {
        if (!file.is_string()) return make_error(index.string(), ": weight_map['", name, "'] is not a string");
        out[name] = (fs::path(path) / file.get<std::string>()).string();
      }
      return out;
    }
    files.push_back((fs::path(path) / "model.safetensors").string());
  } else {
    files.push_back(path);
  }
  for (const auto& f : files) {
    SPLASH_TRY(FileHeader h, read_header(f));
    for (const auto& [name, e] : h.entries.items())
      if (name != "__metadata__") out[name] = f;
  }
  return out;
}

}  // namespace

const TableSegment& TableLayout::segment_of(uint64_t row) const {
  auto it = std::upper_bound(segments.begin(), segments.end(), row,
                             [](uint64_t r, const TableSegment& s) { return r < s.first_row; });
  SPLASH_CHECK(it != segments.begin() && row < n_rows);
  return *(it - 1);
}

std::string row_format_name(const TableLayout& layout) {
  switch (layout.format) {
    case RowFormat::kBF16:
      return "bf16";
    case RowFormat::kF16:
      return "f16";
    case RowFormat::kF32:
      return "f32";
    case RowFormat::kF8E4M3:
      return "fp8";
    case RowFormat::kGgml:
      break;
  }
  std::string n(dtype_name(layout.ggml_type));
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return n;
}

Result<TableLayout> locate_hf_table(const std::string& path, const std::string& tensor_prefix) {
  SPLASH_TRY(auto wmap, hf_weight_map(path));
  const std::string shard_prefix = tensor_prefix + "ngram_embedding.shard_";
  const std::string scale_name = tensor_prefix + "ngram_embedding.weight_scale";
  std::map<uint64_t, std::string> shards;  // index -> tensor name
  for (const auto& [name, file] : wmap) {
    if (name.rfind(shard_prefix, 0) != 0 || !name.ends_with(".weight")) continue;
    std::string idx = name.substr(shard_prefix.size(), name.size() - shard_prefix.size() - 7);
    if (idx.empty() || idx.size() > 9 || !std::all_of(idx.begin(), idx.end(), ::isdigit))
      return make_error(path, ": '", name, "' is not a numbered table shard");
    shards[std::stoull(idx)] = name;
  }
  if (shards.empty()) return make_error(path, ": no PLE table shards named '", shard_prefix, "{i}.weight'");
  if (shards.rbegin()->first != shards.size() - 1)
    return make_error(path, ": PLE table shards are not numbered 0..", shards.size() - 1, " (highest is ",
                      shards.rbegin()->first, ")");
  std::map<std::string, FileHeader> headers;
  auto header_of = [&](const std::string& file) -> Result<const FileHeader*> {
    auto it = headers.find(file);
    if (it == headers.end()) {
      SPLASH_TRY(FileHeader h, read_header(file));
      it = headers.emplace(file, std::move(h)).first;
    }
    return &it->second;
  };
  TableLayout t;
  std::string dtype;
  for (const auto& [i, name] : shards) {
    const std::string& file = wmap[name];
    SPLASH_TRY(const FileHeader* h, header_of(file));
    SPLASH_TRY(Entry e, entry(*h, file, name));
    auto fmt = hf_format(e.dtype);
    if (!fmt)
      return make_error(file, ": '", name, "' has dtype ", e.dtype,
                        "; the PLE table must be BF16, F16, F32 or F8_E4M3");
    if (e.shape.size() != 2 || e.shape[1] == 0)
      return make_error(file, ": '", name, "' must be [rows, width], has ", e.shape.size(), " dims");
    if (i == 0) {
      dtype = e.dtype;
      t.format = fmt->first;
      t.width = e.shape[1];
      t.row_bytes = t.width * fmt->second;
    } else if (e.dtype != dtype || e.shape[1] != t.width) {
      return make_error(file, ": '", name, "' is ", e.dtype, " of width ", e.shape[1], " but shard 0 is ", dtype,
                        " of width ", t.width);
    }
    if (e.n_bytes != e.shape[0] * t.row_bytes)
      return make_error(file, ": '", name, "' spans ", e.n_bytes, " bytes, its shape needs ", e.shape[0] * t.row_bytes);
    if (e.shape[0] == 0) continue;
    t.segments.push_back({file, e.offset, t.n_rows, e.shape[0]});
    t.n_rows += e.shape[0];
  }
  if (wmap.count(scale_name)) {
    const std::string& file = wmap[scale_name];
    SPLASH_TRY(const FileHeader* h, header_of(file));
    SPLASH_TRY(Entry e, entry(*h, file, scale_name));
    SPLASH_TRY(t.scale, read_scale(file, e, scale_name));
  } else if (t.format == RowFormat::kF8E4M3) {
    return make_error(path, ": an F8_E4M3 PLE table needs '", scale_name, "'");
  }
  if (t.n_rows == 0) return make_error(path, ": the PLE table has no rows");
  return t;
}

Result<TableLayout> locate_gguf_table(const std::string& path) {
  SPLASH_TRY(gguf::GgufFile gf, gguf::GgufFile::open(path));
  const char* kName = "per_layer_token_embd.weight";
  const gguf::TensorInfo* ti = gf.find_tensor(kName);
  if (!ti) return make_error(path, ": no tensor '", kName, "' (the PLE table)");
  if (ti->shape.size() != 2 || ti->shape[0] == 0 || ti->shape[1] == 0)
    return make_error(path, ": '", kName, "' must be 2-D {width, rows}");
  if (!quant::can_dequantize(ti->type))
    return make_error(path, ": '", kName, "' has type ", dtype_name(ti->type), ", which cannot be decoded row by row");
  TableLayout t;
  t.width = ti->shape[0];
  auto rb = dtype_bytes(ti->type, t.width);
  if (!rb)
    return make_error(path, ": '", kName, "' rows of ", t.width, " values are not whole ", dtype_name(ti->type),
                      " blocks");
  switch (ti->type) {
    case DType::kBF16:
      t.format = RowFormat::kBF16;
      break;
    case DType::kF16:
      t.format = RowFormat::kF16;
      break;
    case DType::kF32:
      t.format = RowFormat::kF32;
      break;
    default:
      t.format = RowFormat::kGgml;
      break;
  }
  t.ggml_type = ti->type;
  t.row_bytes = *rb;
  t.n_rows = ti->shape[1];
  t.segments.push_back({path, gf.data_offset() + ti->offset, 0, t.n_rows});
  return t;
}

namespace {

std::array<float, 256> make_e4m3_table() {
  std::array<float, 256> v{};
  for (int c = 0; c < 256; ++c) {
    int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
    float x =
        e == 0 ? std::ldexp(static_cast<float>(m) / 8.0f, -6) : std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
    if (e == 15 && m == 7) x = std::nanf("");
    v[static_cast<size_t>(c)] = s ? -x : x;
  }
  return v;
}

}  // namespace

void decode_row(const TableLayout& layout, const uint8_t* src, float* dst) {
  const uint64_t n = layout.width;
  switch (layout.format) {
    case RowFormat::kBF16:
    case RowFormat::kF16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t u = static_cast<uint16_t>(src[2 * i] | src[2 * i + 1] << 8);
        dst[i] = layout.format == RowFormat::kBF16 ? bf16_to_f32(u) : f16_to_f32(u);
      }
      break;
    case RowFormat::kF32:
      std::memcpy(dst, src, n * 4);
      break;
    case RowFormat::kF8E4M3: {
      static const std::array<float, 256> kE4M3 = make_e4m3_table();
      for (uint64_t i = 0; i < n; ++i) dst[i] = kE4M3[src[i]];
      break;
    }
    case RowFormat::kGgml:
      quant::dequantize_row(layout.ggml_type, src, dst, static_cast<int64_t>(n));
      break;
  }
  if (layout.scale != 1.0f)
    for (uint64_t i = 0; i < n; ++i) dst[i] *= layout.scale;
}

}  // namespace splash::ple
