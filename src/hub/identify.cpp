#include "hub/identify.h"

#include <cstring>
#include <map>

#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "formats/gguf_config.h"
#include "formats/hf_config.h"
#include "model/architecture.h"

namespace splash::hub {

const std::vector<DType>& loadable_tensor_types() {
  static const std::vector<DType> kTypes = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,
                                            DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
  return kTypes;
}

std::string loadable_tensor_type_names() {
  std::string s;
  for (DType t : loadable_tensor_types()) s += (s.empty() ? "" : ", ") + std::string(dtype_name(t));
  return s;
}

std::string ggml_type_name(uint32_t id) {
  static const std::map<uint32_t, const char*> kNames = {
      {0, "F32"},      {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {6, "Q5_0"},    {7, "Q5_1"},
      {8, "Q8_0"},     {9, "Q8_1"},    {10, "Q2_K"},   {11, "Q3_K"},   {12, "Q4_K"},   {13, "Q5_K"},
      {14, "Q6_K"},    {15, "Q8_K"},   {16, "IQ2_XXS"}, {17, "IQ2_XS"}, {18, "IQ3_XXS"}, {19, "IQ1_S"},
      {20, "IQ4_NL"},  {21, "IQ3_S"},  {22, "IQ2_S"},  {23, "IQ4_XS"}, {24, "I8"},     {25, "I16"},
      {26, "I32"},     {27, "I64"},    {28, "F64"},    {29, "IQ1_M"},  {30, "BF16"},   {34, "TQ1_0"},
      {35, "TQ2_0"},   {39, "MXFP4"}};
  auto it = kNames.find(id);
  return it == kNames.end() ? str_cat("type ", id) : it->second;
}

Status check_model_config(const ModelConfig& config) {
  const Architecture* arch = find_architecture(config.architecture);
  if (arch == nullptr) {
    std::string names;
    for (std::string_view n : architecture_names()) names += (names.empty() ? "" : ", ") + std::string(n);
    return make_error("unsupported architecture '", config.architecture, "' (supported: ", names, ")");
  }
  if (arch->check_config) SPLASH_TRY_STATUS(arch->check_config(config));
  return {};
}

// --- GGUF header --------------------------------------------------------------------------------

namespace {

// Reads little-endian values from the prefix; running past its end sets `short_` (more bytes are
// needed), past the declared file size is an error.
class HeaderCursor {
 public:
  HeaderCursor(std::span<const uint8_t> data, uint64_t file_size) : data_(data), file_size_(file_size) {}
  uint64_t offset() const { return off_; }
  bool short_read() const { return short_; }
  // False when the bytes are not all in the prefix.
  bool skip(uint64_t n) {
    if (n > file_size_ || off_ > file_size_ - n) {
      bad_ = true;
      return false;
    }
    if (off_ + n > data_.size()) {
      short_ = true;
      need_ = off_ + n;
      return false;
    }
    off_ += n;
    return true;
  }
  template <class T>
  bool read(T& v) {
    const uint64_t at = off_;
    if (!skip(sizeof(T))) return false;
    std::memcpy(&v, data_.data() + at, sizeof(T));
    return true;
  }
  bool read_string(std::string* out) {
    uint64_t len = 0;
    if (!read(len)) return false;
    const uint64_t at = off_;
    if (!skip(len)) return false;
    if (out) out->assign(reinterpret_cast<const char*>(data_.data() + at), static_cast<size_t>(len));
    return true;
  }
  bool bad() const { return bad_; }
  uint64_t need() const { return need_; }

 private:
  std::span<const uint8_t> data_;
  uint64_t file_size_;
  uint64_t off_ = 0, need_ = 0;
  bool short_ = false, bad_ = false;
};

int scalar_size(uint32_t type) {
  switch (type) {
    case 0: case 1: case 7: return 1;    // u8 i8 bool
    case 2: case 3: return 2;            // u16 i16
    case 4: case 5: case 6: return 4;    // u32 i32 f32
    case 10: case 11: case 12: return 8; // u64 i64 f64
    default: return 0;
  }
}

bool skip_value(HeaderCursor& c, uint32_t type, int depth) {
  if (int n = scalar_size(type)) return c.skip(static_cast<uint64_t>(n));
  if (type == 8) return c.read_string(nullptr);
  if (type != 9 || depth > gguf::kMaxArrayDepth) return false;
  uint32_t elem = 0;
  uint64_t count = 0;
  if (!c.read(elem) || !c.read(count)) return false;
  if (int n = scalar_size(elem)) {
    if (count > (uint64_t{1} << 40)) return false;
    return c.skip(count * static_cast<uint64_t>(n));
  }
  for (uint64_t i = 0; i < count; ++i)
    if (!skip_value(c, elem, depth + 1)) return false;
  return true;
}

}  // namespace

Result<GgufHeaderScan> scan_gguf_header(std::span<const uint8_t> prefix, uint64_t file_size,
                                        const std::string& source) {
  GgufHeaderScan scan;
  HeaderCursor c(prefix, file_size);
  uint32_t magic = 0, version = 0;
  uint64_t n_tensors = 0, n_kv = 0;
  auto incomplete = [&]() -> Result<GgufHeaderScan> {
    if (c.bad() || !c.short_read())
      return make_error(source, ": the GGUF header is malformed (a count or length runs past the file's ",
                        file_size, " bytes, or a value type is invalid)");
    scan.complete = false;
    scan.bytes_needed = std::min(file_size, std::max<uint64_t>(c.need(), prefix.size() * 2));
    return scan;
  };
  if (!c.read(magic) || !c.read(version)) return incomplete();
  if (magic != gguf::kMagic) return make_error(source, ": not a GGUF file (bad magic)");
  if (version != 2 && version != 3) return make_error(source, ": GGUF version ", version, " is not supported (2 or 3)");
  if (!c.read(n_tensors) || !c.read(n_kv)) return incomplete();
  if (n_tensors > file_size / 24 || n_kv > file_size / 12)
    return make_error(source, ": the GGUF header declares more entries than the file can hold");
  for (uint64_t k = 0; k < n_kv; ++k) {
    uint32_t type = 0;
    if (!c.read_string(nullptr) || !c.read(type)) return incomplete();
    if (!skip_value(c, type, 1)) return incomplete();
  }
  scan.metadata_end = c.offset();
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorType t;
    uint32_t n_dims = 0, type = 0;
    if (!c.read_string(&t.name) || !c.read(n_dims)) return incomplete();
    if (n_dims > static_cast<uint32_t>(gguf::kMaxDims))
      return make_error(source, ": tensor '", t.name, "' has ", n_dims, " dimensions");
    uint64_t offset = 0;
    if (!c.skip(8ull * n_dims) || !c.read(type) || !c.read(offset)) return incomplete();
    t.type_id = type;
    scan.tensors.push_back(std::move(t));
  }
  scan.complete = true;
  return scan;
}

Result<ModelConfig> identify_gguf(std::span<const uint8_t> prefix, const GgufHeaderScan& scan,
                                  const std::string& source) {
  SPLASH_CHECK(scan.complete && scan.metadata_end <= prefix.size());
  // The metadata alone, as a GGUF of zero tensors, goes through the formats module's reader.
  std::vector<uint8_t> meta(prefix.begin(), prefix.begin() + static_cast<std::ptrdiff_t>(scan.metadata_end));
  std::memset(meta.data() + 8, 0, 8);  // n_tensors
  SPLASH_TRY(gguf::GgufFile file, gguf::GgufFile::parse(meta, source));
  SPLASH_TRY(ModelConfig config, model_config_from_gguf(file));
  SPLASH_TRY_STATUS(check_model_config(config));
  if (!file.has("tokenizer.ggml.model") || !file.has("tokenizer.ggml.tokens"))
    return make_error(source, ": the GGUF has no tokenizer (tokenizer.ggml.model / tokens are missing)");
  // One message for every tensor type the loader cannot pack.
  std::map<std::string, std::pair<size_t, std::string>> bad;  // type -> (count, first tensor)
  for (const GgufTensorType& t : scan.tensors) {
    const auto dt = dtype_from_gguf(t.type_id);
    bool ok = false;
    if (dt)
      for (DType l : loadable_tensor_types()) ok = ok || l == *dt;
    if (ok) continue;
    auto& e = bad[ggml_type_name(t.type_id)];
    if (e.first++ == 0) e.second = t.name;
  }
  if (!bad.empty()) {
    std::string list;
    for (const auto& [type, e] : bad)
      list += str_cat(list.empty() ? "" : ", ", type, " (", e.first, " tensor", e.first == 1 ? "" : "s", ", e.g. ",
                      e.second, ")");
    return make_error(source, ": this GGUF stores tensor types Splash cannot load: ", list,
                      " (supported: ", loadable_tensor_type_names(), ")");
  }
  return config;
}

// --- config.json ----------------------------------------------------------------------------------

namespace {

Status check_mlx_params(const nlohmann::json& q, const std::string& module, const std::string& source,
                        int64_t default_bits, int64_t default_group) {
  if (q.contains("mode") && q["mode"].is_string() && q["mode"].get<std::string>() != "affine")
    return make_error(source, ": MLX quantization mode '", q["mode"].get<std::string>(), "'",
                      module.empty() ? "" : " of " + module, " is not supported (affine only)");
  const int64_t bits = q.contains("bits") && q["bits"].is_number_integer() ? q["bits"].get<int64_t>() : default_bits;
  const int64_t group =
      q.contains("group_size") && q["group_size"].is_number_integer() ? q["group_size"].get<int64_t>() : default_group;
  if ((bits != 4 && bits != 8) || (group != 32 && group != 64 && group != 128))
    return make_error(source, ": MLX quantization with ", bits, " bits, group ", group,
                      module.empty() ? " (the default)" : " of module " + module,
                      " is not supported (affine 4 or 8 bits, group 32, 64 or 128)");
  return {};
}

}  // namespace

Result<ModelConfig> identify_hf_config(std::string_view config_json, const std::string& source) {
  SPLASH_TRY(ModelConfig config, parse_hf_config(config_json, source));
  if (Status st = check_model_config(config); !st.ok()) return make_error(source, ": ", st.error_message());
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(config_json);
  } catch (const nlohmann::json::exception& e) {
    return make_error(source, ": not valid JSON: ", e.what());
  }
  try {
    for (const char* key : {"quantization", "quantization_config"}) {
      auto q = root.find(key);
      if (q == root.end() || !q->is_object()) continue;
      if (q->contains("quant_method") && !q->contains("bits"))
        return make_error(source, ": ", key, " '", q->value("quant_method", std::string("?")),
                          "' is not an MLX affine quantization Splash can load");
      SPLASH_TRY_STATUS(check_mlx_params(*q, "", source, 4, 64));
      const int64_t bits = q->value("bits", int64_t{4}), group = q->value("group_size", int64_t{64});
      for (const auto& [module, params] : q->items())
        if (params.is_object()) SPLASH_TRY_STATUS(check_mlx_params(params, module, source, bits, group));
    }
  } catch (const nlohmann::json::exception& e) {
    return make_error(source, ": the quantization block is malformed: ", e.what());
  }
  return config;
}

}  // namespace splash::hub
