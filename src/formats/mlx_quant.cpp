#include "formats/mlx_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/half.h"

namespace splash {

namespace {

using nlohmann::json;

Result<MlxQuantParams> params_from_json(const json& j, MlxQuantParams def, const std::string& where) {
  MlxQuantParams p = def;
  for (auto [key, field] : {std::pair{"group_size", &p.group_size}, std::pair{"bits", &p.bits}}) {
    auto it = j.find(key);
    if (it == j.end()) continue;
    if (!it->is_number_unsigned() || it->get<uint64_t>() > 1024)
      return make_error(where, ": '", key, "' must be a small non-negative integer");
    *field = static_cast<uint32_t>(it->get<uint64_t>());
  }
  if (auto m = j.find("mode"); m != j.end() && !(m->is_string() && *m == "affine"))
    return make_error(where, ": quantization mode ", m->dump(), " is not supported (only \"affine\")");
  SPLASH_TRY_STATUS(validate_mlx_quant_params(p, where));
  return p;
}

float load_scale(const uint8_t* p, DType t) {
  if (t == DType::kF32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return t == DType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
}

void store_scale(float v, DType t, uint8_t* p) {
  if (t == DType::kF32) {
    std::memcpy(p, &v, 4);
    return;
  }
  uint16_t h = t == DType::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
  std::memcpy(p, &h, 2);
}

bool is_scale_dtype(DType t) { return t == DType::kF16 || t == DType::kBF16 || t == DType::kF32; }

}  // namespace

Status validate_mlx_quant_params(const MlxQuantParams& p, const std::string& where) {
  bool bits_ok = p.bits == 2 || p.bits == 3 || p.bits == 4 || p.bits == 5 || p.bits == 6 || p.bits == 8;
  bool group_ok = p.group_size == 32 || p.group_size == 64 || p.group_size == 128;
  if (!bits_ok) return make_error(where, ": bits ", p.bits, " is not supported (2, 3, 4, 5, 6 or 8)");
  if (!group_ok) return make_error(where, ": group_size ", p.group_size, " is not supported (32, 64 or 128)");
  return {};
}

Result<std::optional<MlxQuantConfig>> MlxQuantConfig::parse(std::string_view config_json, const std::string& source) {
  json root;
  try {
    root = json::parse(config_json);
  } catch (const json::exception& e) {
    return make_error(source, ": not valid JSON: ", e.what());
  }
  if (!root.is_object()) return make_error(source, ": not a JSON object");
  const json* block = nullptr;
  std::string block_name;
  for (const char* key : {"quantization", "quantization_config"}) {
    auto it = root.find(key);
    if (it != root.end() && !it->is_null()) {
      block = &*it;
      block_name = key;
      break;
    }
  }
  if (block == nullptr) return std::optional<MlxQuantConfig>();
  std::string where = str_cat(source, ": ", block_name);
  if (!block->is_object()) return make_error(where, " is not an object");
  MlxQuantConfig c;
  SPLASH_TRY(c.defaults_, params_from_json(*block, MlxQuantParams{}, where));
  // Module entries are objects or booleans; scalars are the block's own parameters.
  for (const auto& [key, value] : block->items()) {
    if (value.is_boolean()) {
      if (value.get<bool>()) {
        c.overrides_.emplace(key, c.defaults_);
      } else {
        c.overrides_.emplace(key, std::nullopt);
      }
    } else if (value.is_object()) {
      SPLASH_TRY(auto p, params_from_json(value, c.defaults_, str_cat(where, "['", key, "']")));
      c.overrides_.emplace(key, p);
    }
  }
  return std::optional<MlxQuantConfig>(std::move(c));
}

std::optional<MlxQuantParams> MlxQuantConfig::params_for(std::string_view module_path) const {
  auto it = overrides_.find(module_path);
  return it == overrides_.end() ? std::optional<MlxQuantParams>(defaults_) : it->second;
}

Result<std::optional<MlxQuantizedTensor>> find_mlx_quantized(const SafeTensorsModel& model,
                                                             const MlxQuantConfig* config,
                                                             std::string_view module_path) {
  std::string path(module_path);
  const SafeTensor* scales = model.find(path + ".scales");
  if (scales == nullptr) return std::optional<MlxQuantizedTensor>();
  std::string where = str_cat(model.shard_path_of(path + ".scales"), ": module '", path, "'");
  const SafeTensor* biases = model.find(path + ".biases");
  const SafeTensor* weight = model.find(path + ".weight");
  if (biases == nullptr) return make_error(where, ": has .scales but no .biases");
  if (weight == nullptr) return make_error(where, ": has .scales but no .weight");
  if (config == nullptr) return make_error(where, ": is quantized but config.json has no quantization block");
  auto params = config->params_for(path);
  if (!params) return make_error(where, ": config.json marks it unquantized (false) but it has .scales");
  if (weight->dtype != DType::kU32)
    return make_error(where, ": .weight has dtype ", dtype_name(weight->dtype), ", quantized weights are U32");
  if (!is_scale_dtype(scales->dtype) || biases->dtype != scales->dtype)
    return make_error(where, ": .scales/.biases have dtypes ", dtype_name(scales->dtype), "/", dtype_name(biases->dtype),
                      " (need the same float type)");
  const auto& ws = weight->shape;
  if (ws.empty() || scales->shape.size() != ws.size() || biases->shape != scales->shape)
    return make_error(where, ": .weight, .scales and .biases must have the same number of dimensions (>= 1)");
  for (size_t d = 0; d + 1 < ws.size(); ++d)
    if (ws[d] != scales->shape[d])
      return make_error(where, ": .weight dimension ", d, " is ", ws[d], " but .scales has ", scales->shape[d]);
  const MlxQuantParams& p = *params;
  uint64_t words = ws.back();
  if (words > (UINT64_MAX / 32)) return make_error(where, ": .weight row is too long");
  if ((words * 32) % p.bits != 0)
    return make_error(where, ": .weight row of ", words, " words is not a whole number of ", p.bits, "-bit codes");
  uint64_t in = words * 32 / p.bits;
  if (in % p.group_size != 0 || scales->shape.back() != in / p.group_size)
    return make_error(where, ": ", in, " values per row at ", p.bits, " bits need ", in / p.group_size,
                      " groups of ", p.group_size, " but .scales has ", scales->shape.back(), " per row");
  MlxQuantizedTensor t;
  t.weight = weight;
  t.scales = scales;
  t.biases = biases;
  t.params = p;
  t.in_features = in;
  t.rows = weight->n_elems / words;
  if (words == 0) t.rows = 0;
  return std::optional<MlxQuantizedTensor>(t);
}

std::vector<uint32_t> mlx_pack_codes(std::span<const uint8_t> codes, uint32_t bits) {
  SPLASH_CHECK(bits >= 1 && bits <= 8 && (codes.size() * bits) % 32 == 0);
  std::vector<uint32_t> out(codes.size() * bits / 32, 0);
  const uint32_t mask = (1u << bits) - 1;
  for (size_t j = 0; j < codes.size(); ++j) {
    SPLASH_CHECK(codes[j] <= mask);
    uint64_t bit = j * bits;
    size_t w = bit / 32;
    uint32_t sh = bit % 32;
    out[w] |= static_cast<uint32_t>(codes[j]) << sh;
    if (sh + bits > 32) out[w + 1] |= static_cast<uint32_t>(codes[j]) >> (32 - sh);
  }
  return out;
}

void mlx_unpack_codes(std::span<const uint8_t> packed, uint32_t bits, std::span<uint8_t> codes) {
  SPLASH_CHECK(bits >= 1 && bits <= 8 && packed.size() * 8 >= codes.size() * bits);
  const uint32_t mask = (1u << bits) - 1;
  for (size_t j = 0; j < codes.size(); ++j) {
    uint64_t bit = j * bits;
    size_t b = bit / 8;
    uint32_t sh = bit % 8;
    // A code of <= 8 bits spans at most two bytes.
    uint32_t v = packed[b];
    if (sh + bits > 8) v |= static_cast<uint32_t>(packed[b + 1]) << 8;
    codes[j] = static_cast<uint8_t>((v >> sh) & mask);
  }
}

Status mlx_dequantize(std::span<const uint8_t> packed, std::span<const uint8_t> scales,
                      std::span<const uint8_t> biases, DType scale_dtype, const MlxQuantParams& p,
                      uint64_t rows, uint64_t in_features, std::span<float> out) {
  SPLASH_TRY_STATUS(validate_mlx_quant_params(p, "mlx_dequantize"));
  if (!is_scale_dtype(scale_dtype)) return make_error("mlx_dequantize: scale dtype ", dtype_name(scale_dtype));
  if (in_features % p.group_size != 0)
    return make_error("mlx_dequantize: ", in_features, " values per row is not a multiple of group ", p.group_size);
  const uint64_t row_bytes = in_features * p.bits / 8;
  const uint64_t groups = in_features / p.group_size;
  const uint32_t sbytes = dtype_traits(scale_dtype).block_bytes;
  if (packed.size() != rows * row_bytes || scales.size() != rows * groups * sbytes ||
      biases.size() != scales.size() || out.size() != rows * in_features)
    return make_error("mlx_dequantize: buffer sizes do not match ", rows, " rows of ", in_features, " values");
  std::vector<uint8_t> codes(p.group_size);
  for (uint64_t r = 0; r < rows; ++r) {
    for (uint64_t g = 0; g < groups; ++g) {
      // A group of >= 32 codes is a whole number of bytes, so it can be unpacked on its own.
      uint64_t gbyte = r * row_bytes + g * p.group_size * p.bits / 8;
      mlx_unpack_codes(packed.subspan(gbyte, p.group_size * p.bits / 8), p.bits, codes);
      uint64_t gi = r * groups + g;
      float s = load_scale(scales.data() + gi * sbytes, scale_dtype);
      float b = load_scale(biases.data() + gi * sbytes, scale_dtype);
      float* o = out.data() + r * in_features + g * p.group_size;
      for (uint32_t j = 0; j < p.group_size; ++j) o[j] = s * static_cast<float>(codes[j]) + b;
    }
  }
  return {};
}

Result<std::vector<float>> mlx_dequantize(const MlxQuantizedTensor& t) {
  std::vector<float> out(t.rows * t.in_features);
  SPLASH_TRY_STATUS(mlx_dequantize(t.weight->data, t.scales->data, t.biases->data, t.scales->dtype, t.params, t.rows,
                                   t.in_features, out));
  return out;
}

Result<MlxQuantized> mlx_quantize(std::span<const float> w, uint64_t rows, uint64_t in_features,
                                  const MlxQuantParams& p, DType scale_dtype) {
  SPLASH_TRY_STATUS(validate_mlx_quant_params(p, "mlx_quantize"));
  if (!is_scale_dtype(scale_dtype)) return make_error("mlx_quantize: scale dtype ", dtype_name(scale_dtype));
  if (in_features % p.group_size != 0 || w.size() != rows * in_features)
    return make_error("mlx_quantize: ", w.size(), " values are not ", rows, " rows of ", in_features,
                      " (a multiple of group ", p.group_size, ")");
  const float n_bins = static_cast<float>((1u << p.bits) - 1);
  const float eps = 1e-7f;
  const uint64_t groups = rows * in_features / p.group_size;
  const uint32_t sbytes = dtype_traits(scale_dtype).block_bytes;
  MlxQuantized q;
  q.scale_dtype = scale_dtype;
  q.scales.resize(groups * sbytes);
  q.biases.resize(groups * sbytes);
  std::vector<uint8_t> codes(w.size());
  for (uint64_t gi = 0; gi < groups; ++gi) {
    const float* x = w.data() + gi * p.group_size;
    float lo = std::numeric_limits<float>::infinity();
    float hi = -lo;
    for (uint32_t j = 0; j < p.group_size; ++j) {
      lo = std::min(lo, x[j]);
      hi = std::max(hi, x[j]);
    }
    // Anchor the grid on the edge with the larger magnitude so that value is reproduced exactly.
    bool min_edge = std::fabs(lo) > std::fabs(hi);
    float scale = std::max((hi - lo) / n_bins, eps);
    scale = min_edge ? scale : -scale;
    float edge = min_edge ? lo : hi;
    float q0 = std::rint(edge / scale);
    float bias = 0.0f;
    if (q0 != 0.0f) {
      scale = edge / q0;
      bias = edge;
    }
    for (uint32_t j = 0; j < p.group_size; ++j) {
      float c = std::rint((x[j] - bias) / scale);
      c = std::min(std::max(c, 0.0f), n_bins);  // NaN inputs compare false and stay NaN: clamp below
      codes[gi * p.group_size + j] = std::isnan(c) ? 0 : static_cast<uint8_t>(c);
    }
    store_scale(scale, scale_dtype, q.scales.data() + gi * sbytes);
    store_scale(bias, scale_dtype, q.biases.data() + gi * sbytes);
  }
  q.weight = mlx_pack_codes(codes, p.bits);
  return q;
}

}  // namespace splash
