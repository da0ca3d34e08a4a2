#include "convert/convert.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string_view>

#include "convert/hf_config_writer.h"
#include "convert/safetensors_layout.h"
#include "core/half.h"
#include "core/sizes.h"
#include "formats/architecture_facts.h"
#include "formats/gguf_config.h"
#include "formats/gguf_writer.h"
#include "formats/norm_gains.h"
#include "formats/quant/quantize.h"
#include "formats/safetensors_writer.h"
#include "formats/tensor_names.h"
#include "tokenizer/tokenizer_export.h"

namespace splash {

namespace fs = std::filesystem;

namespace {

void note(const ConvertOptions& o, const std::string& line) {
  if (o.log) o.log(line);
}

bool is_float_type(DType t) { return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16; }

// f32 values -> bytes of a plain float type.
std::vector<uint8_t> encode_floats(std::span<const float> v, DType t) {
  std::vector<uint8_t> out(v.size() * dtype_traits(t).block_bytes);
  if (t == DType::kF32) {
    std::memcpy(out.data(), v.data(), out.size());
  } else {
    auto* p = reinterpret_cast<uint16_t*>(out.data());
    for (size_t i = 0; i < v.size(); ++i) p[i] = t == DType::kF16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
  }
  return out;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// MoE routers (and the shared expert's gate) stay F32 as llama.cpp keeps them: top-k routing is
// discontinuous, so their rounding would move tokens between experts.
bool is_router(const std::string& name) {
  return ends_with(name, ".mlp.gate.weight") || ends_with(name, ".mlp.shared_expert_gate.weight");
}

// The GGUF type of one tensor: matrices get the requested type when their rows are whole blocks of
// it, else Q8_0, else F16; vectors (norms, biases), routers and the Gated DeltaNet conv1d stay F32
// (llama.cpp's ssm_conv reads F32 kernels only, and its converter keeps ssm_conv1d F32).
DType gguf_tensor_type(const ModelTensor& t, DType wanted) {
  if (t.shape.size() < 2 || is_router(t.name) || ends_with(t.name, "linear_attn.conv1d.weight")) return DType::kF32;
  const uint64_t row = t.shape.back();
  if (row % dtype_traits(wanted).block_elems == 0) return wanted;
  if (wanted == DType::kF32 || wanted == DType::kF16 || wanted == DType::kBF16) return wanted;
  if (row % 32 == 0) return DType::kQ8_0;
  return DType::kF16;
}

bool is_qk_projection(const std::string& name) {
  return name.find("self_attn.q_proj.") != std::string::npos || name.find("self_attn.k_proj.") != std::string::npos;
}

// llama.cpp's qwen35 / qwen35moe converter tiles the value heads: [nk, r, width] -> [r, nk, width]
// along rows (`row_len` values each) from row `first` on, or along columns when `cols` is set.
void tile_value_heads(std::vector<float>& v, uint64_t row_len, uint64_t first, const ModelConfig& c, uint64_t width,
                      bool cols) {
  const uint64_t nk = c.linear_n_key_heads, r = c.linear_n_value_heads / c.linear_n_key_heads;
  const std::vector<float> src = v;
  const uint64_t rows = v.size() / row_len;
  auto to = [&](uint64_t i) {  // grouped index (key head g, copy j, element w) -> tiled index
    const uint64_t g = i / (r * width), j = i / width % r, w = i % width;
    return (j * nk + g) * width + w;
  };
  if (!cols) {
    for (uint64_t i = 0; i < nk * r * width && first + i < rows; ++i)
      std::copy_n(&src[(first + i) * row_len], row_len, &v[(first + to(i)) * row_len]);
    return;
  }
  for (uint64_t row = 0; row < rows; ++row)
    for (uint64_t i = 0; i < nk * r * width; ++i) v[row * row_len + to(i)] = src[row * row_len + i];
}

// Reads a tensor as f32 in the layout the output format stores: GGUF llama keeps q/k interleaved;
// the hybrids as llama.cpp's converter writes them (gains 1 + w, ssm_a = -exp(A_log), Qwen3.5's value
// heads tiled; docs/ADDING_A_MODEL.md, "Layout conventions per format").
Result<std::vector<float>> values_for_gguf(const ModelFiles& in, const ModelTensor& t) {
  SPLASH_TRY(std::vector<float> v, in.read_f32(t));
  const ModelConfig& c = in.config();
  const ArchitectureFacts& arch = architecture_facts(c.architecture);
  if (arch.hybrid && in.format() != ModelFormat::kGguf) {
    const std::string& n = t.name;
    if (is_zero_centred_norm_name(n) && !in.zero_centred_gains_shifted())
      for (float& x : v) x += 1.0f;
    if (ends_with(n, "linear_attn.A_log"))
      for (float& x : v) x = -std::exp(x);
    if (arch.gguf_v_heads_tiled && c.linear_n_value_heads > c.linear_n_key_heads &&
        n.find("linear_attn.") != std::string::npos) {
      const uint64_t kd2 = 2ull * c.linear_n_key_heads * c.linear_key_head_dim, dv = c.linear_value_head_dim;
      const uint64_t row_len = t.shape.size() > 1 ? t.n_elems() / t.shape[0] : 1;
      if (ends_with(n, "in_proj_qkv.weight")) tile_value_heads(v, row_len, kd2, c, dv, false);
      if (ends_with(n, "in_proj_z.weight")) tile_value_heads(v, row_len, 0, c, dv, false);
      if (ends_with(n, "in_proj_b.weight") || ends_with(n, "in_proj_a.weight")) tile_value_heads(v, row_len, 0, c, 1, false);
      if (ends_with(n, "linear_attn.A_log") || ends_with(n, "linear_attn.dt_bias")) tile_value_heads(v, 1, 0, c, 1, false);
      if (ends_with(n, "conv1d.weight")) tile_value_heads(v, row_len, kd2, c, dv, false);
      if (ends_with(n, "out_proj.weight")) tile_value_heads(v, t.shape.back(), 0, c, dv, true);
    }
    return v;
  }
  if (arch.gguf_qk_rope_interleaved && is_qk_projection(t.name)) {
    const bool is_q = t.name.find("q_proj") != std::string::npos;
    const int heads = static_cast<int>(is_q ? c.n_head : c.n_head_kv);
    const uint64_t rows = t.shape.front();
    const uint64_t row_len = t.shape.size() > 1 ? t.n_elems() / rows : 1;
    permute_rope_rows(v.data(), row_len * sizeof(float), heads, static_cast<int>(rows / heads), true);
  }
  return v;
}

// Qwen3-Next's in_proj_qkvz ([q_g k_g v_g z_g] per key head g) as llama.cpp's converter splits it:
// [q of every head, k, v] (attn_qkv) or z (attn_gate), value heads grouped as before. `row_len`
// values per row.
std::vector<float> split_qkvz(const std::vector<float>& v, const ModelConfig& c, uint64_t row_len, bool z) {
  const uint64_t nk = c.linear_n_key_heads, dk = c.linear_key_head_dim;
  const uint64_t vg = uint64_t{c.linear_n_value_heads} / nk * c.linear_value_head_dim;  // v (or z) rows per key head
  const uint64_t per = 2 * dk + 2 * vg;
  std::vector<float> out;
  auto take = [&](uint64_t g, uint64_t first, uint64_t n) {
    const float* p = v.data() + (g * per + first) * row_len;
    out.insert(out.end(), p, p + n * row_len);
  };
  if (z) {
    for (uint64_t g = 0; g < nk; ++g) take(g, 2 * dk + vg, vg);
    return out;
  }
  for (uint64_t g = 0; g < nk; ++g) take(g, 0, dk);
  for (uint64_t g = 0; g < nk; ++g) take(g, dk, dk);
  for (uint64_t g = 0; g < nk; ++g) take(g, 2 * dk, vg);
  return out;
}

// A Hugging Face per-expert tensor "model.layers.<L>.mlp.experts.<e>.<proj>.weight": the name of
// its stacked form ("model.layers.<L>.mlp.switch_mlp.<proj>.weight", GGUF ffn_<proj>_exps) and e.
std::optional<std::pair<std::string, uint64_t>> per_expert(const std::string& name) {
  const std::string key = ".mlp.experts.";
  const size_t at = name.find(key);
  if (at == std::string::npos) return std::nullopt;
  size_t i = at + key.size(), j = i;
  while (j < name.size() && name[j] >= '0' && name[j] <= '9') ++j;
  if (j == i || j >= name.size() || name[j] != '.') return std::nullopt;
  return std::pair{name.substr(0, at) + ".mlp.switch_mlp." + name.substr(j + 1), std::stoull(name.substr(i, j - i))};
}

// --- GGUF

Result<ConvertReport> convert_to_gguf(const ModelFiles& in, const Tokenizer* tokenizer, const std::string& out_path,
                                      const ConvertOptions& o) {
  if (!is_float_type(o.gguf_type) && !quant::can_quantize(o.gguf_type))
    return make_error("cannot write GGUF tensors of type ", dtype_name(o.gguf_type));
  gguf::GgufWriter w;
  SPLASH_TRY(auto arch_kv, gguf_metadata_for(in.config()));
  std::string name = o.model_name.empty() ? fs::path(out_path).stem().string() : o.model_name;
  SPLASH_TRY_STATUS(w.set_string("general.name", name));
  for (auto& [k, v] : arch_kv) SPLASH_TRY_STATUS(w.set(k, std::move(v)));
  if (auto ft = gguf::file_type_of(o.gguf_type)) SPLASH_TRY_STATUS(w.set_u32("general.file_type", *ft));
  if (dtype_traits(o.gguf_type).quantized) SPLASH_TRY_STATUS(w.set_u32("general.quantization_version", 2));
  if (tokenizer != nullptr) {
    SPLASH_TRY(auto tok_kv, tokenizer_gguf_metadata(*tokenizer));
    for (auto& [k, v] : tok_kv) SPLASH_TRY_STATUS(w.set(k, std::move(v)));
  }

  ConvertReport report;
  std::map<std::string, int> fallbacks;  // "Q8_0" -> count
  const size_t total = in.tensors().size();
  auto done = std::make_shared<size_t>(0);
  std::map<std::string, std::vector<const ModelTensor*>> stacks;  // stacked name -> experts in order
  for (const ModelTensor& t : in.tensors()) {
    if (auto pe = per_expert(t.name)) {
      auto& parts = stacks[pe->first];
      if (parts.size() <= pe->second) parts.resize(pe->second + 1, nullptr);
      parts[pe->second] = &t;
    }
  }
  std::map<std::string, bool> stacked_done;
  const bool hybrid = architecture_facts(in.config().architecture).hybrid;
  bool dropped_mtp = false;
  for (const ModelTensor& t : in.tensors()) {
    if (hybrid && t.name.starts_with("mtp.")) {  // not written (llama.cpp's qwen3next converter drops it too)
      dropped_mtp = true;
      continue;
    }
    if (auto pe = per_expert(t.name)) {
      // One tensor per expert (Hugging Face) -> llama.cpp's stacked [n_expert, rows, cols] tensor.
      if (stacked_done[pe->first]) continue;
      stacked_done[pe->first] = true;
      const auto& parts = stacks[pe->first];
      auto gname = hf_to_gguf_name(pe->first);
      if (!gname) return make_error(in.path(), ": tensor ", t.name, " has no GGUF name (unsupported tensor for this converter)");
      if (parts.size() != in.config().n_expert)
        return make_error(in.path(), ": ", pe->first, ": ", parts.size(), " experts, the config has ", in.config().n_expert);
      for (size_t e = 0; e < parts.size(); ++e)
        if (parts[e] == nullptr || parts[e]->shape != t.shape || t.shape.size() != 2)
          return make_error(in.path(), ": expert ", e, " of ", pe->first, " is missing or has another shape than expert 0");
      const DType type = gguf_tensor_type(t, o.gguf_type);
      if (type != o.gguf_type) fallbacks[std::string(dtype_name(type))]++;
      const std::vector<uint64_t> shape = {t.shape[1], t.shape[0], parts.size()};
      auto n_bytes = dtype_bytes(type, t.n_elems() * parts.size());
      if (!n_bytes) return make_error("tensor ", pe->first, ": values are not whole ", dtype_name(type), " blocks");
      report.n_tensors++;
      for (const ModelTensor* p : parts) report.bytes_in += p->n_bytes();
      report.bytes_out += *n_bytes;
      SPLASH_TRY_STATUS(w.add_tensor_producer(*gname, type, shape, [&in, parts, type, &o, done, total](gguf::ByteSink& sink) -> Status {
        for (const ModelTensor* p : parts) {  // expert by expert: one expert's values in memory at a time
          SPLASH_TRY(std::vector<float> v, in.read_f32(*p));
          std::vector<uint8_t> bytes;
          if (is_float_type(type)) {
            bytes = encode_floats(v, type);
          } else {
            SPLASH_TRY_STATUS(quant::quantize_tensor(type, v, static_cast<int64_t>(p->shape.back()), bytes));
          }
          ++*done;
          note(o, str_cat("[", *done, "/", total, "] ", p->name, " -> ", dtype_name(type), " (stacked)"));
          SPLASH_TRY_STATUS(sink.write(bytes));
        }
        return {};
      }));
      continue;
    }
    if (architecture_facts(in.config().architecture).hf_fused_qkvz && ends_with(t.name, "linear_attn.in_proj_qkvz.weight")) {
      // llama.cpp's current qwen3next converter: attn_qkv + attn_gate (ssm_ba stays as it is).
      const ModelConfig& c = in.config();
      const std::string base = t.name.substr(0, t.name.size() - std::string_view("in_proj_qkvz.weight").size());
      const uint64_t cols = t.shape.back();
      const uint64_t z_rows = uint64_t{c.linear_n_value_heads} * c.linear_value_head_dim;
      const uint64_t qkv_rows = 2ull * c.linear_n_key_heads * c.linear_key_head_dim + z_rows;
      if (t.shape.size() != 2 || t.shape[0] != qkv_rows + z_rows)
        return make_error(in.path(), ": ", t.name, " is not [", qkv_rows + z_rows, ", n_embd]");
      const DType type = gguf_tensor_type(t, o.gguf_type);
      if (type != o.gguf_type) fallbacks[std::string(dtype_name(type))]++;
      report.n_tensors += 2;
      report.bytes_in += t.n_bytes();
      for (const bool z : {false, true}) {
        const uint64_t rows = z ? z_rows : qkv_rows;
        auto n_bytes = dtype_bytes(type, rows * cols);
        if (!n_bytes) return make_error("tensor ", t.name, ": values are not whole ", dtype_name(type), " blocks");
        report.bytes_out += *n_bytes;
        const std::string gname = *hf_to_gguf_name(base + (z ? "in_proj_z.weight" : "in_proj_qkv.weight"));
        const ModelTensor* tp = &t;
        SPLASH_TRY_STATUS(w.add_tensor_producer(gname, type, {cols, rows}, [&in, tp, type, z, cols, &o, done, total](gguf::ByteSink& sink) -> Status {
          SPLASH_TRY(std::vector<float> all, values_for_gguf(in, *tp));
          const std::vector<float> v = split_qkvz(all, in.config(), cols, z);
          std::vector<uint8_t> bytes;
          if (is_float_type(type)) {
            bytes = encode_floats(v, type);
          } else {
            SPLASH_TRY_STATUS(quant::quantize_tensor(type, v, static_cast<int64_t>(cols), bytes));
          }
          if (z) ++*done;
          note(o, str_cat("[", *done, "/", total, "] ", tp->name, z ? " (z)" : " (qkv)", " -> ", dtype_name(type)));
          return sink.write(bytes);
        }));
      }
      continue;
    }
    auto gname = hf_to_gguf_name(t.name);
    if (!gname) return make_error(in.path(), ": tensor ", t.name, " has no GGUF name (unsupported tensor for this converter)");
    // llama.cpp's qwen3next / qwen35 loaders want post_attention_norm where other families use ffn_norm.
    if (hybrid && ends_with(*gname, ".ffn_norm.weight"))
      gname = gname->substr(0, gname->size() - std::string_view("ffn_norm.weight").size()) + "post_attention_norm.weight";
    const DType type = gguf_tensor_type(t, o.gguf_type);
    if (t.shape.size() >= 2 && type != o.gguf_type) fallbacks[std::string(dtype_name(type))]++;
    std::vector<uint64_t> shape(t.shape.rbegin(), t.shape.rend());
    if (ends_with(t.name, ".mlp.shared_expert_gate.weight")) shape = {t.n_elems()};  // llama.cpp: [n_embd]
    if (ends_with(t.name, "linear_attn.conv1d.weight") && !t.shape.empty())
      shape = {t.n_elems() / t.shape[0], t.shape[0]};  // squeezed to [C, K] whatever the source's axis
    auto n_bytes = dtype_bytes(type, t.n_elems());
    if (!n_bytes) return make_error("tensor ", t.name, ": ", t.n_elems(), " values are not whole ", dtype_name(type), " blocks");
    report.n_tensors++;
    report.bytes_in += t.n_bytes();
    report.bytes_out += *n_bytes;
    const ModelTensor* tp = &t;
    SPLASH_TRY_STATUS(w.add_tensor_producer(*gname, type, shape, [&in, tp, type, &o, done, total](gguf::ByteSink& sink) -> Status {
      SPLASH_TRY(std::vector<float> v, values_for_gguf(in, *tp));
      std::vector<uint8_t> bytes;
      if (is_float_type(type)) {
        bytes = encode_floats(v, type);
      } else {
        SPLASH_TRY_STATUS(quant::quantize_tensor(type, v, static_cast<int64_t>(tp->shape.back()), bytes));
      }
      ++*done;
      note(o, str_cat("[", *done, "/", total, "] ", tp->name, " -> ", dtype_name(type)));
      return sink.write(bytes);
    }));
  }
  if (dropped_mtp) note(o, "the MTP head (mtp.*) is left out: the GGUF writer does not lay it out yet");
  for (const auto& [type, n] : fallbacks)
    note(o, str_cat(n, " matrices written as ", type, ": their rows are not whole ", dtype_name(o.gguf_type), " blocks"));
  SPLASH_TRY_STATUS(w.write(out_path));
  return report;
}

// --- safetensors / MLX

struct MlxPlan {
  std::optional<MlxQuantParams> params;  // nullopt: left unquantized
};

// Per-module quantization parameters: the layout's own (mlx-lm's 8-bit routers), the requested
// ones, group 32 when the row length only allows that, or none. Matrices and stacked experts only.
MlxPlan plan_mlx(const LayoutTensor& t, const std::optional<MlxQuantParams>& wanted) {
  if (!wanted || (t.shape.size() != 2 && t.shape.size() != 3)) return {};
  const uint64_t row = t.shape.back();
  if (t.mlx_params && row % t.mlx_params->group_size == 0) return {t.mlx_params};
  if (row % wanted->group_size == 0) return {wanted};
  MlxQuantParams g32 = *wanted;
  g32.group_size = 32;
  if (row % 32 == 0) return {g32};
  return {};
}

std::string module_of(const std::string& weight_name) {
  return weight_name.substr(0, weight_name.size() - std::string(".weight").size());
}

Result<ConvertReport> convert_to_safetensors(const ModelFiles& in, const Tokenizer* tokenizer, const std::string& dir,
                                             const ConvertOptions& o) {
  if (!is_float_type(o.float_type)) return make_error("safetensors float type must be F32, F16 or BF16");
  if (o.mlx) SPLASH_TRY_STATUS(validate_mlx_quant_params(*o.mlx, "--bits/--group-size"));
  SPLASH_TRY(std::vector<LayoutTensor> layout,
             safetensors_layout(in, o.mlx.has_value(), [&o](const std::string& line) { note(o, line); }));
  std::error_code ec;
  if (fs::exists(dir, ec) && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec)))
    return make_error(dir, ": output directory exists and is not empty");
  fs::create_directories(dir, ec);
  if (ec) return make_error(dir, ": cannot create directory: ", ec.message());

  SPLASH_TRY(nlohmann::json config, hf_config_json(in.config()));
  (config.contains("text_config") ? config["text_config"] : config).update(safetensors_layout_config(in, o.mlx.has_value()));
  nlohmann::json quant_block = nlohmann::json::object();
  if (o.mlx) {
    quant_block["group_size"] = o.mlx->group_size;
    quant_block["bits"] = o.mlx->bits;
  }

  ConvertReport report;
  std::vector<SafeTensorWrite> writes;
  // The producers point into `layout`, which outlives write_safetensors_checkpoint below.
  for (const LayoutTensor& t : layout) {
    report.n_tensors++;
    for (const ModelTensor* s : t.sources) report.bytes_in += s->n_bytes();
    uint64_t n_elems = 1;
    for (uint64_t d : t.shape) n_elems *= d;
    const bool is_weight = t.name.size() > 7 && t.name.substr(t.name.size() - 7) == ".weight";
    MlxPlan plan = is_weight ? plan_mlx(t, o.mlx) : MlxPlan{};
    const LayoutTensor* tp = &t;
    if (!plan.params) {
      if (o.mlx && t.shape.size() == 2) {
        quant_block[module_of(t.name)] = false;
        note(o, str_cat(t.name, ": rows of ", t.shape.back(), " values fit no group size; kept unquantized"));
      }
      SafeTensorWrite sw;
      sw.name = t.name;
      sw.dtype = o.float_type;
      sw.shape = t.shape;
      sw.produce = [tp, &o](ByteSink& sink) -> Status {
        SPLASH_TRY(std::vector<float> v, tp->values());
        note(o, str_cat(tp->name, " -> ", dtype_name(o.float_type)));
        return sink.write(encode_floats(v, o.float_type));
      };
      report.bytes_out += n_elems * dtype_traits(o.float_type).block_bytes;
      writes.push_back(std::move(sw));
      continue;
    }
    const MlxQuantParams p = *plan.params;
    const std::string module = module_of(t.name);
    if (p.group_size != o.mlx->group_size || p.bits != o.mlx->bits) {
      quant_block[module] = {{"group_size", p.group_size}, {"bits", p.bits}};
      note(o, str_cat(module, ": ", p.bits, "-bit, group size ", p.group_size));
    }
    const uint64_t cols = t.shape.back(), rows = n_elems / cols;  // stacked experts: all rows of all experts
    auto packed_shape = [&t](uint64_t last) {
      std::vector<uint64_t> s = t.shape;
      s.back() = last;
      return s;
    };
    // The weight's producer quantizes once; the scales and biases producers (called right after it,
    // in order) take their parts from the shared result.
    auto cache = std::make_shared<std::shared_ptr<MlxQuantized>>();
    auto quantize = [tp, p, rows, cols, cache, &o]() -> Status {
      if (*cache) return {};
      SPLASH_TRY(std::vector<float> v, tp->values());
      SPLASH_TRY(MlxQuantized q, mlx_quantize(v, rows, cols, p, o.float_type));
      *cache = std::make_shared<MlxQuantized>(std::move(q));
      note(o, str_cat(tp->name, " -> MLX ", p.bits, "-bit group ", p.group_size));
      return {};
    };
    SafeTensorWrite wq{t.name, DType::kU32, packed_shape(cols * p.bits / 32), {}, nullptr};
    wq.produce = [quantize, cache](ByteSink& sink) -> Status {
      SPLASH_TRY_STATUS(quantize());
      const auto& w = (*cache)->weight;
      return sink.write({reinterpret_cast<const uint8_t*>(w.data()), w.size() * sizeof(uint32_t)});
    };
    SafeTensorWrite ws{module + ".scales", o.float_type, packed_shape(cols / p.group_size), {}, nullptr};
    ws.produce = [quantize, cache](ByteSink& sink) -> Status {
      SPLASH_TRY_STATUS(quantize());
      return sink.write((*cache)->scales);
    };
    SafeTensorWrite wb{module + ".biases", o.float_type, packed_shape(cols / p.group_size), {}, nullptr};
    wb.produce = [quantize, cache](ByteSink& sink) -> Status {
      SPLASH_TRY_STATUS(quantize());
      Status s = sink.write((*cache)->biases);
      cache->reset();  // last of the three: free the quantized copy
      return s;
    };
    report.bytes_out += rows * cols * p.bits / 8 + 2 * rows * (cols / p.group_size) * dtype_traits(o.float_type).block_bytes;
    writes.push_back(std::move(wq));
    writes.push_back(std::move(ws));
    writes.push_back(std::move(wb));
  }
  if (o.mlx) {
    config["quantization"] = quant_block;
    config["quantization_config"] = quant_block;
  }
  const fs::path d(dir);
  auto write_text = [](const fs::path& path, const std::string& text) {
    return write_file_atomic(path.string(), {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  };
  SPLASH_TRY_STATUS(write_text(d / "config.json", config.dump(2) + "\n"));
  nlohmann::json gen = hf_generation_config_json(in.config());
  if (!gen.empty()) SPLASH_TRY_STATUS(write_text(d / "generation_config.json", gen.dump(2) + "\n"));
  if (tokenizer != nullptr) {
    SPLASH_TRY(HfTokenizerFiles files, tokenizer_hf_files(*tokenizer));
    SPLASH_TRY_STATUS(write_text(d / "tokenizer.json", files.tokenizer_json));
    SPLASH_TRY_STATUS(write_text(d / "tokenizer_config.json", files.tokenizer_config_json));
  }
  std::map<std::string, std::string> metadata = {{"format", o.mlx ? "mlx" : "pt"}};
  SPLASH_TRY(auto names, write_safetensors_checkpoint(dir, writes, metadata, o.max_shard_bytes));
  (void)names;
  return report;
}

}  // namespace

Result<ConvertReport> convert_model(const ModelFiles& in, const Tokenizer* tokenizer, const std::string& out_path,
                                    const ConvertOptions& options) {
  if (options.target == ConvertTarget::kGguf) return convert_to_gguf(in, tokenizer, out_path, options);
  return convert_to_safetensors(in, tokenizer, out_path, options);
}

}  // namespace splash
