#include <filesystem>
#include <memory>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "formats/mlx_quant.h"
#include "formats/norm_gains.h"
#include "formats/safetensors_writer.h"
#include "testmodel/encode.h"
#include "testmodel/weights.h"
#include "testmodel/writers.h"

namespace splash::testmodel {
namespace {

using nlohmann::ordered_json;

// The text model's class, in a flat config (the reader takes the text model's and the wrapper's alike).
std::string hf_class(const TestModelSpec& s) { return std::string(hf_class_of(s.facts(), s.moe())); }

// The wrapper's model_type for families shipped as a multimodal class (qwen3_5 / qwen3_5_moe).
std::string model_type(const TestModelSpec& s) {
  const ArchitectureFacts& a = s.facts();
  if (!a.hf_wrapper_model_type.empty()) return std::string(s.moe() ? a.hf_moe_wrapper_model_type : a.hf_wrapper_model_type);
  return std::string(a.hf_model_type);
}

// mlx-lm saves Qwen3.5 (a multimodal model class) with its text model under language_model.*, and
// keys its per-module quantization by those paths.
std::string stored_name(const TestModelSpec& s, const std::string& name) {
  if (s.mlx_bits != 0 && !s.facts().hf_wrapper_class.empty() && (name.starts_with("model.") || name.starts_with("lm_head.")))
    return "language_model." + name;
  return name;
}

const char* torch_dtype(DType t) {
  return t == DType::kF16 ? "float16" : t == DType::kBF16 ? "bfloat16" : "float32";
}

std::string config_json(const TestModelSpec& s, const TokenizerData& tok, uint32_t n_vocab,
                        const std::vector<TensorPlan>& plan) {
  ordered_json c;
  c["architectures"] = {hf_class(s)};
  c["model_type"] = model_type(s);
  c["hidden_size"] = s.n_embd;
  c["intermediate_size"] = s.n_ff;
  c["num_hidden_layers"] = s.n_layer;
  c["num_attention_heads"] = s.n_head;
  c["num_key_value_heads"] = s.n_head_kv;
  c["head_dim"] = s.head_dim;
  c["hidden_act"] = "silu";
  c["max_position_embeddings"] = s.context_length;
  c["rms_norm_eps"] = s.rms_eps;
  c["rope_theta"] = s.rope_theta;
  c["vocab_size"] = n_vocab;
  c["tie_word_embeddings"] = s.tie_embeddings;
  c["attention_bias"] = s.facts().attention_bias;
  c["bos_token_id"] = tok.bos >= 0 ? ordered_json(tok.bos) : ordered_json(nullptr);
  c["eos_token_id"] = tok.eos >= 0 ? ordered_json(tok.eos) : ordered_json(nullptr);
  c["torch_dtype"] = torch_dtype(s.safetensors_dtype);
  if (s.moe()) {
    c["num_experts"] = s.n_expert;
    c["num_experts_per_tok"] = s.n_expert_used;
    c["moe_intermediate_size"] = s.n_ff_expert;
    c["norm_topk_prob"] = s.norm_topk_prob;
    c["decoder_sparse_step"] = 1;
    c["mlp_only_layers"] = s.mlp_only_layers;
    if (s.n_ff_shared_expert > 0) c["shared_expert_intermediate_size"] = s.n_ff_shared_expert;
  }
  if (s.hybrid()) {
    if (s.use_layer_types) {
      ordered_json lt = ordered_json::array();
      for (uint32_t il = 0; il < s.n_layer; ++il)
        lt.push_back((il + 1) % s.full_attention_interval == 0 ? "full_attention" : "linear_attention");
      c["layer_types"] = lt;
    } else {
      c["full_attention_interval"] = s.full_attention_interval;
    }
    c["linear_num_key_heads"] = s.linear_n_key_heads;
    c["linear_key_head_dim"] = s.linear_key_head_dim;
    c["linear_num_value_heads"] = s.linear_n_value_heads;
    c["linear_value_head_dim"] = s.linear_value_head_dim;
    c["linear_conv_kernel_dim"] = s.linear_conv_kernel;
    c["partial_rotary_factor"] = s.partial_rotary_factor;
    c["attn_output_gate"] = true;
    if (s.n_mtp_layers > 0) c["mtp_num_hidden_layers"] = s.n_mtp_layers;
  }
  if (s.mlx_bits != 0) {
    ordered_json q = {{"group_size", s.mlx_group_size}, {"bits", s.mlx_bits}};
    // Mixed bits: mlx-lm lists each module whose bits differ from the default.
    for (const TensorPlan& t : plan)
      if (t.kind == TensorKind::kMatrix && t.mlx_bits != 0 && t.mlx_bits != s.mlx_bits)
        q[stored_name(s, t.hf_name.substr(0, t.hf_name.size() - 7))] = {{"group_size", s.mlx_group_size},
                                                                          {"bits", t.mlx_bits}};
    c["quantization"] = q;
    c["quantization_config"] = q;  // mlx-lm writes both
  }
  return c.dump(2);
}

std::string generation_config_json(const TokenizerData& tok) {
  ordered_json g;
  if (tok.bos >= 0) g["bos_token_id"] = tok.bos;
  if (tok.eos >= 0) g["eos_token_id"] = tok.eos;
  if (tok.pad >= 0) g["pad_token_id"] = tok.pad;
  g["do_sample"] = false;
  return g.dump(2);
}

// An MLX tensor's shape: the plan's leading dimensions (experts of a stacked tensor), then `last`.
std::vector<uint64_t> mlx_shape(const TensorPlan& t, uint64_t last) {
  std::vector<uint64_t> shape = t.shape;
  shape.back() = last;
  return shape;
}

Status write_text(const std::filesystem::path& p, const std::string& text) {
  return write_file_atomic(p.string(), std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

// Shares one MLX quantization between the producers of <m>.weight, <m>.scales and <m>.biases,
// which the writer calls in that order: one tensor in memory at a time.
struct MlxSlot {
  std::unique_ptr<MlxQuantized> q;
};

}  // namespace

Status write_safetensors_model(const TestModelSpec& spec, const TokenizerData& tok, uint32_t n_vocab,
                               const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(dir, ": cannot create the output directory: ", ec.message());

  const uint64_t seed = spec.seed;
  const DType dt = spec.safetensors_dtype;
  const DType scale_dt = dt == DType::kF32 ? DType::kF16 : dt;
  std::vector<SafeTensorWrite> writes;
  const std::vector<TensorPlan> plan = plan_tensors(spec, n_vocab);
  // An MLX folder is what mlx-lm's sanitize() leaves: conv1d moved to [C, K, 1], experts stacked
  // (switch_mlp, below) and the zero-centred norm gains stored as the loader's rule says that
  // layout stores them (1 + w).
  const bool mlx = spec.mlx_bits != 0;
  const bool shift_gains =
      mlx && spec.hybrid() && zero_centred_gains_stored_shifted(spec.arch, {.conv_axis_moved = true});
  for (const TensorPlan& t0 : plan) {
    TensorPlan shifted = t0;
    if (mlx && t0.kind == TensorKind::kConv && t0.shape.size() == 3) shifted.shape = {t0.shape[0], t0.shape[2], 1};
    const TensorPlan& t = shifted;
    if (spec.mlx_bits != 0 && t.kind == TensorKind::kMatrix) {
      const uint32_t bits = t.mlx_bits != 0 ? t.mlx_bits : spec.mlx_bits;
      const MlxQuantParams mp{spec.mlx_group_size, bits};
      const std::string name = stored_name(spec, t.hf_name);
      const std::string base = name.substr(0, name.size() - std::string(".weight").size());
      auto slot = std::make_shared<MlxSlot>();
      const uint64_t rows = t.rows(), cols = t.cols();
      SafeTensorWrite w;
      w.name = name;
      w.dtype = DType::kU32;
      w.shape = mlx_shape(t, cols * bits / 32);
      w.produce = [t, seed, mp, scale_dt, slot, rows, cols](ByteSink& sink) -> Status {
        std::vector<float> vals(rows * cols);
        generate_values(t, seed, 0, vals);
        SPLASH_TRY(MlxQuantized q, mlx_quantize(vals, rows, cols, mp, scale_dt));
        slot->q = std::make_unique<MlxQuantized>(std::move(q));
        const auto& wq = slot->q->weight;
        return sink.write(std::span(reinterpret_cast<const uint8_t*>(wq.data()), wq.size() * 4));
      };
      writes.push_back(std::move(w));
      for (const bool is_scale : {true, false}) {
        SafeTensorWrite s;
        s.name = base + (is_scale ? ".scales" : ".biases");
        s.dtype = scale_dt;
        s.shape = mlx_shape(t, cols / spec.mlx_group_size);
        s.produce = [slot, is_scale](ByteSink& sink) -> Status {
          SPLASH_CHECK(slot->q != nullptr);  // the writer keeps tensor order
          Status st = sink.write(is_scale ? slot->q->scales : slot->q->biases);
          if (!is_scale) slot->q.reset();
          return st;
        };
        writes.push_back(std::move(s));
      }
      continue;
    }
    if (t.stacked_experts && spec.hf_fused_experts) {
      // transformers 5 layout: mlp.experts.gate_up_proj [E, 2f, d] (each expert's gate rows, then
      // its up rows) and mlp.experts.down_proj [E, d, f].
      const size_t at = t.hf_name.find("switch_mlp.");
      const std::string prefix = t.hf_name.substr(0, at) + "experts.";
      const std::string proj = t.hf_name.substr(at + 11);
      if (proj == "up_proj.weight") continue;  // written with gate_proj
      std::vector<TensorPlan> parts = {t};
      if (proj == "gate_proj.weight") {
        const std::string up_name = t.hf_name.substr(0, at) + "switch_mlp.up_proj.weight";
        for (const TensorPlan& u : plan)
          if (u.hf_name == up_name) parts.push_back(u);
        SPLASH_CHECK(parts.size() == 2);
      }
      SafeTensorWrite w;
      w.name = prefix + (parts.size() == 2 ? "gate_up_proj" : "down_proj");
      w.dtype = dt;
      w.shape = {t.shape[0], t.shape[1] * parts.size(), t.shape[2]};
      w.produce = [parts, seed, dt](ByteSink& sink) -> Status {
        const uint64_t n_exp = parts[0].shape[0], per = parts[0].n_elems() / n_exp;
        std::vector<float> vals(per);
        std::vector<uint8_t> bytes;
        for (uint64_t e = 0; e < n_exp; ++e)
          for (const TensorPlan& p : parts) {
            generate_values(p, seed, e * per, vals);
            bytes.clear();
            SPLASH_TRY_STATUS(encode_rows(dt, vals, p.cols(), bytes));
            SPLASH_TRY_STATUS(sink.write(bytes));
          }
        return {};
      };
      writes.push_back(std::move(w));
      continue;
    }
    if (t.stacked_experts) {  // Hugging Face layout: one [rows, cols] tensor per expert
      const uint64_t n_exp = t.shape[0], per = t.n_elems() / n_exp;
      for (uint64_t e = 0; e < n_exp; ++e) {
        SafeTensorWrite w;
        w.name = expert_tensor_name(t.hf_name, e);
        w.dtype = dt;
        w.shape = {t.shape[1], t.shape[2]};
        w.produce = [t, seed, dt, e, per](ByteSink& sink) -> Status {
          std::vector<float> vals(per);
          generate_values(t, seed, e * per, vals);
          std::vector<uint8_t> bytes;
          SPLASH_TRY_STATUS(encode_rows(dt, vals, t.cols(), bytes));
          return sink.write(bytes);
        };
        writes.push_back(std::move(w));
      }
      continue;
    }
    SafeTensorWrite w;
    w.name = stored_name(spec, t.hf_name);
    w.dtype = dt;
    w.shape = t.shape;
    const bool plus_one = shift_gains && t.kind == TensorKind::kNormZero;
    w.produce = [t, seed, dt, plus_one](ByteSink& sink) -> Status {
      const uint64_t rows = t.rows(), cols = t.cols();
      const uint64_t step = chunk_rows(rows, cols, 1, false);
      std::vector<float> vals;
      std::vector<uint8_t> bytes;
      for (uint64_t r = 0; r < rows; r += step) {
        const uint64_t n = std::min(step, rows - r);
        vals.resize(n * cols);
        generate_values(t, seed, r * cols, vals);
        if (plus_one)
          for (float& v : vals) v += 1.0f;
        bytes.clear();
        SPLASH_TRY_STATUS(encode_rows(dt, vals, cols, bytes));
        SPLASH_TRY_STATUS(sink.write(bytes));
      }
      return {};
    };
    writes.push_back(std::move(w));
  }
  const std::map<std::string, std::string> meta = {{"format", spec.mlx_bits != 0 ? "mlx" : "pt"}};
  SPLASH_TRY(auto files, write_safetensors_checkpoint(dir, writes, meta));
  (void)files;
  const std::filesystem::path d(dir);
  SPLASH_TRY_STATUS(write_text(d / "config.json", config_json(spec, tok, n_vocab, plan)));
  SPLASH_TRY_STATUS(write_text(d / "generation_config.json", generation_config_json(tok)));
  SPLASH_TRY_STATUS(write_text(d / "tokenizer.json", tok.tokenizer_json));
  if (!tok.tokenizer_config_json.empty()) {
    SPLASH_TRY_STATUS(write_text(d / "tokenizer_config.json", tok.tokenizer_config_json));
  }
  return {};
}

}  // namespace splash::testmodel
