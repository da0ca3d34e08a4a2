#include "formats/model_files.h"

#include <cstring>
#include <filesystem>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/half.h"
#include "core/mapped_file.h"
#include "formats/architecture_facts.h"
#include "formats/gguf.h"
#include "formats/gguf_config.h"
#include "formats/hf_config.h"
#include "formats/llama2c.h"
#include "formats/mlx_quant.h"
#include "formats/norm_gains.h"
#include "formats/quant/dequant.h"
#include "formats/safetensors.h"
#include "formats/tensor_names.h"

namespace splash {

namespace fs = std::filesystem;

struct ModelFiles::Storage {
  std::unique_ptr<gguf::GgufFile> gguf;
  std::unique_ptr<SafeTensorsModel> safetensors;
  std::unique_ptr<Llama2cModel> llama2c;
};

std::string_view model_format_name(ModelFormat f) {
  switch (f) {
    case ModelFormat::kGguf: return "GGUF";
    case ModelFormat::kSafetensors: return "safetensors";
    case ModelFormat::kMlx: return "MLX safetensors";
    case ModelFormat::kLlama2c: return "llama2.c";
  }
  return "?";
}

uint64_t ModelTensor::n_elems() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

uint64_t ModelTensor::n_bytes() const {
  uint64_t n = data.size();
  if (mlx) n += mlx->scales.size() + mlx->biases.size();
  return n;
}

ModelFiles::ModelFiles() = default;
ModelFiles::~ModelFiles() = default;
ModelFiles::ModelFiles(ModelFiles&&) noexcept = default;
ModelFiles& ModelFiles::operator=(ModelFiles&&) noexcept = default;

const gguf::GgufFile* ModelFiles::gguf() const { return storage_ ? storage_->gguf.get() : nullptr; }

void ModelFiles::index_tensors() {
  by_name_.clear();
  by_name_.reserve(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) by_name_.emplace(tensors_[i].name, i);  // first one wins
  NormGainLayout layout;
  layout.gguf = format_ == ModelFormat::kGguf;
  for (const ModelTensor& t : tensors_) {
    const std::string& n = t.name;
    if (n.ends_with("linear_attn.conv1d.weight") && t.shape.size() >= 2) {
      // [C, 1, K] / [C, K] (raw) or [C, K, 1] (mlx-lm); K = 1 would say nothing.
      const uint64_t last = t.shape.back();
      if (last > 1) layout.conv_axis_raw = true;
      if (last == 1 && t.shape.size() == 3 && t.shape[1] > 1) layout.conv_axis_moved = true;
    }
    if (n.starts_with("mtp.")) layout.mtp_tensors = true;
    if (const size_t at = n.find(".mlp.experts."); at != std::string::npos && n.starts_with("model.layers.")) {
      const size_t e = at + std::string_view(".mlp.experts.").size();
      if (e < n.size() && n[e] >= '0' && n[e] <= '9') layout.per_expert_tensors = true;
    }
  }
  zero_centred_gains_shifted_ = zero_centred_gains_stored_shifted(config_.architecture, layout);
}

const ModelTensor* ModelFiles::find(std::string_view hf_name) const {
  auto it = by_name_.find(std::string(hf_name));
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

namespace {

bool is_qk_projection(std::string_view hf_name) {
  auto ends_with = [&](std::string_view s) {
    return hf_name.size() >= s.size() && hf_name.substr(hf_name.size() - s.size()) == s;
  };
  return ends_with("self_attn.q_proj.weight") || ends_with("self_attn.k_proj.weight") ||
         ends_with("self_attn.q_proj.bias") || ends_with("self_attn.k_proj.bias");
}

// The chat template of a Hugging Face directory: chat_template.jinja, else tokenizer_config.json's
// `chat_template` (a string, or a list of {name, template} where "default" wins).
Result<std::string> hf_chat_template(const fs::path& dir) {
  if (fs::exists(dir / "chat_template.jinja")) return read_text_file((dir / "chat_template.jinja").string());
  const fs::path cfg = dir / "tokenizer_config.json";
  if (!fs::exists(cfg)) return std::string();
  SPLASH_TRY(std::string text, read_text_file(cfg.string()));
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return make_error(cfg.string(), ": not a JSON object");
  auto it = j.find("chat_template");
  if (it == j.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    std::string first;
    for (const auto& e : *it) {
      if (!e.is_object() || !e.contains("template") || !e["template"].is_string()) continue;
      if (first.empty()) first = e["template"].get<std::string>();
      if (e.value("name", "") == "default") return e["template"].get<std::string>();
    }
    return first;
  }
  return make_error(cfg.string(), ": chat_template must be a string or a list of {name, template}");
}

}  // namespace

// --- GGUF

static Status open_gguf(const std::string& path, ModelFiles::Storage& st, ModelConfig& config,
                        std::vector<ModelTensor>& tensors, TokenizerInfo& tok) {
  SPLASH_TRY(auto file, gguf::GgufFile::open(path));
  st.gguf = std::make_unique<gguf::GgufFile>(std::move(file));
  const gguf::GgufFile& f = *st.gguf;
  SPLASH_TRY(config, model_config_from_gguf(f));
  for (const auto& ti : f.tensors()) {
    ModelTensor t;
    t.stored_name = ti.name;
    t.name = gguf_to_hf_name(ti.name).value_or(ti.name);
    t.dtype = ti.type;
    t.shape.assign(ti.shape.rbegin(), ti.shape.rend());
    t.data = ti.bytes();
    t.rope_interleaved = architecture_facts(config.architecture).gguf_qk_rope_interleaved && is_qk_projection(t.name);
    tensors.push_back(std::move(t));
  }
  if (f.has("tokenizer.ggml.model")) {
    SPLASH_TRY(std::string model, f.get_string("tokenizer.ggml.model"));
    tok.kind = "gguf:" + model;
    tok.path = path;
    if (f.has("tokenizer.ggml.tokens")) {
      SPLASH_TRY(auto tokens, f.get_string_array("tokenizer.ggml.tokens"));
      tok.n_vocab = static_cast<uint32_t>(tokens.size());
    }
  }
  if (f.has("tokenizer.chat_template")) {
    SPLASH_TRY(tok.chat_template, f.get_string("tokenizer.chat_template"));
  }
  return {};
}

// --- safetensors (plain or MLX-quantized)

// Multimodal checkpoints keep the text model under a prefix: transformers' (Qwen3.5, Qwen3.5-MoE:
// *ForConditionalGeneration) "model.language_model.layers.0..." and MLX-LM's
// "language_model.model.layers.0..." / "language_model.lm_head.weight". Inside Splash they carry
// the text model's names; the vision tower's tensors keep theirs (and go unused).
static std::string text_model_name(const std::string& name) {
  static constexpr std::pair<std::string_view, std::string_view> kPrefixes[] = {
      {"model.language_model.", "model."},
      {"language_model.model.", "model."},
      {"language_model.lm_head.", "lm_head."},
  };
  for (const auto& [from, to] : kPrefixes)
    if (name.starts_with(from)) return std::string(to) + name.substr(from.size());
  return name;
}

static Status open_safetensors(const std::string& dir, ModelFiles::Storage& st, ModelConfig& config,
                               std::vector<ModelTensor>& tensors, TokenizerInfo& tok, bool& is_mlx) {
  SPLASH_TRY(config, load_hf_config(dir));
  SPLASH_TRY(std::string config_text, read_text_file((fs::path(dir) / "config.json").string()));
  SPLASH_TRY(auto quant, MlxQuantConfig::parse(config_text, (fs::path(dir) / "config.json").string()));
  SPLASH_TRY(auto model, SafeTensorsModel::open(dir));
  st.safetensors = std::make_unique<SafeTensorsModel>(std::move(model));
  const SafeTensorsModel& m = *st.safetensors;
  is_mlx = false;

  auto strip = [](std::string_view name, std::string_view suffix) -> std::optional<std::string_view> {
    if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix)
      return name.substr(0, name.size() - suffix.size());
    return std::nullopt;
  };
  for (const SafeTensor* s : m.tensors()) {
    // scales/biases belong to their module's weight.
    if (auto module = strip(s->name, ".scales"); module && m.find(std::string(*module) + ".weight")) continue;
    if (auto module = strip(s->name, ".biases"); module && m.find(std::string(*module) + ".scales")) continue;
    ModelTensor t;
    t.name = text_model_name(s->name);
    t.stored_name = s->name;
    t.dtype = s->dtype;
    t.shape = s->shape;
    t.data = s->data;
    if (auto module = strip(s->name, ".weight")) {
      SPLASH_TRY(auto q, find_mlx_quantized(m, quant ? &*quant : nullptr, *module));
      if (q) {
        is_mlx = true;
        t.shape.back() = q->in_features;
        t.mlx = MlxQuantView{static_cast<int>(q->params.bits), static_cast<int>(q->params.group_size),
                             q->scales->dtype, q->scales->data, q->biases->data};
      }
    }
    tensors.push_back(std::move(t));
  }
  tok.path = (fs::path(dir) / "tokenizer.json").string();
  tok.kind = fs::exists(tok.path) ? "tokenizer.json" : "";
  if (tok.kind.empty()) tok.path.clear();
  SPLASH_TRY(tok.chat_template, hf_chat_template(dir));
  return {};
}

// --- llama2.c

static Status open_llama2c(const std::string& path, const ModelFilesOptions& options, ModelFiles::Storage& st,
                           ModelConfig& config, std::vector<ModelTensor>& tensors, TokenizerInfo& tok) {
  SPLASH_TRY(auto model, Llama2cModel::open(path));
  st.llama2c = std::make_unique<Llama2cModel>(std::move(model));
  config = st.llama2c->config();
  for (const auto& v : st.llama2c->tensors()) {
    ModelTensor t;
    t.name = v.name;
    t.stored_name = v.name;
    t.dtype = DType::kF32;
    t.shape = v.shape;
    t.data = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data.data()), v.data.size_bytes());
    t.rope_interleaved = is_qk_projection(t.name);
    tensors.push_back(std::move(t));
  }
  std::string tok_path = options.tokenizer_path;
  if (tok_path.empty()) tok_path = (fs::path(path).parent_path() / "tokenizer.bin").string();
  if (fs::exists(tok_path)) {
    SPLASH_TRY(auto vocab, load_llama2c_tokenizer(tok_path, config.n_vocab));
    tok.kind = "llama2.c";
    tok.path = tok_path;
    tok.n_vocab = static_cast<uint32_t>(vocab.pieces.size());
  } else if (!options.tokenizer_path.empty()) {
    return make_error(tok_path, ": tokenizer file not found");
  }
  return {};
}

Result<ModelFiles> ModelFiles::open(const std::string& path, const ModelFilesOptions& options) {
  ModelFiles mf;
  mf.storage_ = std::make_unique<Storage>();
  mf.path_ = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    if (!fs::exists(fs::path(path) / "config.json"))
      return make_error(path, ": not a model directory (no config.json)");
    bool is_mlx = false;
    SPLASH_TRY_STATUS(open_safetensors(path, *mf.storage_, mf.config_, mf.tensors_, mf.tokenizer_, is_mlx));
    mf.format_ = is_mlx ? ModelFormat::kMlx : ModelFormat::kSafetensors;
    mf.index_tensors();
    return mf;
  }
  if (!fs::exists(path, ec)) return make_error(path, ": no such file or directory");
  SPLASH_TRY(auto file, MappedFile::open(path));
  if (file.size() >= 4 && std::memcmp(file.data(), "GGUF", 4) == 0) {
    mf.format_ = ModelFormat::kGguf;
    SPLASH_TRY_STATUS(open_gguf(path, *mf.storage_, mf.config_, mf.tensors_, mf.tokenizer_));
    mf.index_tensors();
    return mf;
  }
  if (path.size() > 4 && path.substr(path.size() - 4) == ".bin") {
    mf.format_ = ModelFormat::kLlama2c;
    SPLASH_TRY_STATUS(open_llama2c(path, options, *mf.storage_, mf.config_, mf.tensors_, mf.tokenizer_));
    mf.index_tensors();
    return mf;
  }
  return make_error(path, ": unrecognised model file (expected a .gguf file, a llama2.c .bin checkpoint, or a "
                          "directory with config.json and safetensors)");
}

Result<std::vector<float>> ModelFiles::read_f32(const ModelTensor& t) const {
  const uint64_t n = t.n_elems();
  std::vector<float> out(n);
  if (t.mlx) {
    MlxQuantParams p{static_cast<uint32_t>(t.mlx->group_size), static_cast<uint32_t>(t.mlx->bits)};
    const uint64_t cols = t.shape.back();
    SPLASH_TRY_STATUS(mlx_dequantize(t.data, t.mlx->scales, t.mlx->biases, t.mlx->scale_dtype, p, n / cols, cols, out));
  } else if (quant::can_dequantize(t.dtype)) {
    const uint64_t row = t.shape.empty() ? 1 : t.shape.back();
    const auto& tr = dtype_traits(t.dtype);
    if (row % tr.block_elems != 0)
      return make_error(path_, ": tensor ", t.stored_name, " rows of ", row, " values are not whole ", tr.name, " blocks");
    const uint64_t row_bytes = row / tr.block_elems * tr.block_bytes;
    if (t.data.size() != n / row * row_bytes)
      return make_error(path_, ": tensor ", t.stored_name, " holds ", t.data.size(), " bytes, expected ", n / row * row_bytes);
    for (uint64_t r = 0; r < n / row; ++r)
      quant::dequantize_row(t.dtype, t.data.data() + r * row_bytes, out.data() + r * row, static_cast<int64_t>(row));
  } else {
    return make_error(path_, ": tensor ", t.stored_name, " has type ", dtype_name(t.dtype), ", which has no float values");
  }
  if (t.rope_interleaved) {
    const bool is_q = t.name.find("q_proj") != std::string::npos;
    const int heads = static_cast<int>(is_q ? config_.n_head : config_.n_head_kv);
    const uint64_t rows = t.shape.empty() ? 1 : t.shape.front();
    if (heads <= 0 || rows % static_cast<uint64_t>(heads) != 0)
      return make_error(path_, ": tensor ", t.stored_name, " has ", rows, " rows, not a multiple of ", heads, " heads");
    const uint64_t row_len = t.shape.size() > 1 ? n / rows : 1;
    permute_rope_rows(out.data(), row_len * sizeof(float), heads, static_cast<int>(rows / heads), false);
  }
  return out;
}

}  // namespace splash
