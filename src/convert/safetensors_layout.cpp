#include "convert/safetensors_layout.h"

#include <map>
#include <memory>
#include <string_view>

#include "formats/architecture_facts.h"
#include "formats/norm_gains.h"

namespace splash {

namespace {

bool is_hybrid(const ModelConfig& c) { return architecture_facts(c.architecture).hybrid; }

bool is_router(std::string_view n) { return n.ends_with(".mlp.gate.weight") || n.ends_with(".mlp.shared_expert_gate.weight"); }

// "<prefix>.mlp.experts.<e>.<proj>.weight" -> {"<prefix>.mlp.", e, "<proj>"}.
struct ExpertPart {
  std::string mlp;  // "model.layers.3.mlp."
  uint64_t e = 0;
  std::string proj;  // "gate_proj"
};
std::optional<ExpertPart> per_expert(const std::string& n) {
  const std::string_view key = ".mlp.experts.";
  const size_t at = n.find(key);
  if (at == std::string::npos || !n.ends_with(".weight")) return std::nullopt;
  const size_t i = at + key.size();
  size_t j = i;
  while (j < n.size() && n[j] >= '0' && n[j] <= '9') ++j;
  if (j == i || j >= n.size() || n[j] != '.') return std::nullopt;
  return ExpertPart{n.substr(0, at) + ".mlp.", std::stoull(n.substr(i, j - i)), n.substr(j + 1, n.size() - j - 8)};
}

using Values = std::function<Result<std::vector<float>>()>;

Values read(const ModelFiles& in, const ModelTensor* t, float add = 0.0f) {
  return [&in, t, add]() -> Result<std::vector<float>> {
    SPLASH_TRY(std::vector<float> v, in.read_f32(*t));
    if (add != 0.0f)
      for (float& x : v) x += add;
    return v;
  };
}

// Rows [first, first + n) of each expert of stacked tensors `parts` (each [E, rows, cols] or one
// [rows, cols] per expert), expert by expert: [E, n, cols] or, across parts, [E, sum n, cols].
struct Slice {
  const ModelTensor* t;
  uint64_t first, n;  // rows per expert
};
Values stack(const ModelFiles& in, std::vector<std::vector<Slice>> per_expert_slices) {
  return [&in, per_expert_slices]() -> Result<std::vector<float>> {
    std::vector<float> out;
    std::map<const ModelTensor*, std::vector<float>> cache;  // a fused tensor read once
    for (const auto& slices : per_expert_slices)
      for (const Slice& s : slices) {
        auto it = cache.find(s.t);
        if (it == cache.end()) {
          SPLASH_TRY(std::vector<float> v, in.read_f32(*s.t));
          it = cache.emplace(s.t, std::move(v)).first;
        }
        const uint64_t cols = s.t->shape.back();
        const auto* p = it->second.data() + s.first * cols;
        out.insert(out.end(), p, p + s.n * cols);
      }
    return out;
  };
}

}  // namespace

Result<std::vector<LayoutTensor>> safetensors_layout(const ModelFiles& in, bool mlx,
                                                     const std::function<void(const std::string&)>& note) {
  const ModelConfig& c = in.config();
  std::vector<LayoutTensor> out;
  if (!is_hybrid(c)) {
    for (const ModelTensor& t : in.tensors()) out.push_back({t.name, t.shape, {&t}, read(in, &t), std::nullopt});
    return out;
  }
  if (in.format() == ModelFormat::kGguf)
    return make_error(in.path(), ": converting a GGUF ", c.architecture,
                      " model to safetensors is not supported (convert the Hugging Face or MLX folder instead)");
  const ArchitectureFacts& arch = architecture_facts(c.architecture);
  // transformers: Qwen3-Next keeps one tensor per expert, Qwen3.5-MoE fuses gate and up.
  const bool per_expert_out = arch.hf_per_expert_tensors;
  // Both layouts' gain convention comes from the one rule the loader uses.
  const bool out_shifted = zero_centred_gains_stored_shifted(
      c.architecture, mlx ? NormGainLayout{.conv_axis_moved = true} : NormGainLayout{.conv_axis_raw = true});
  const float gain_delta = (out_shifted ? 1.0f : 0.0f) - (in.zero_centred_gains_shifted() ? 1.0f : 0.0f);
  // Qwen3.5's text model inside the multimodal class: transformers model.language_model.* (lm_head
  // at the top), mlx-lm language_model.model.* / language_model.lm_head.
  auto out_name = [&](const std::string& n) {
    if (arch.hf_wrapper_class.empty()) return n;
    if (mlx && (n.starts_with("model.") || n.starts_with("lm_head."))) return "language_model." + n;
    if (!mlx && n.starts_with("model.")) return "model.language_model." + n.substr(6);
    return n;
  };
  // Experts of each MoE block, whatever the input layout: name -> tensor per expert and projection.
  std::map<std::string, std::map<std::string, std::vector<const ModelTensor*>>> per_expert_in;
  bool dropped_mtp = false;
  std::map<std::string, bool> done;
  for (const ModelTensor& t : in.tensors())
    if (auto pe = per_expert(t.name)) {
      auto& v = per_expert_in[pe->mlp][pe->proj];
      if (v.size() <= pe->e) v.resize(pe->e + 1, nullptr);
      v[pe->e] = &t;
    }
  for (const ModelTensor& t : in.tensors()) {
    const std::string& n = t.name;
    if (mlx && n.starts_with("mtp.")) {  // mlx-lm drops the MTP head
      dropped_mtp = true;
      continue;
    }
    if (auto pe = per_expert(n)) {
      if (done[pe->mlp + pe->proj]) continue;
      done[pe->mlp + pe->proj] = true;
      const auto& parts = per_expert_in[pe->mlp][pe->proj];
      for (size_t e = 0; e < parts.size(); ++e)
        if (parts[e] == nullptr || parts[e]->shape != t.shape || t.shape.size() != 2)
          return make_error(in.path(), ": expert ", e, " of ", pe->mlp, "experts.*.", pe->proj, " is missing or has another shape");
      const uint64_t rows = t.shape[0], cols = t.shape[1];
      if (!mlx && per_expert_out) {  // transformers' Qwen3-Next layout already
        for (const ModelTensor* p : parts) out.push_back({out_name(p->name), p->shape, {p}, read(in, p), std::nullopt});
        continue;
      }
      std::vector<std::vector<Slice>> slices;
      for (const ModelTensor* p : parts) slices.push_back({{p, 0, rows}});
      if (mlx) {
        out.push_back({out_name(pe->mlp + "switch_mlp." + pe->proj + ".weight"), {parts.size(), rows, cols}, parts,
                       stack(in, slices), std::nullopt});
        continue;
      }
      // transformers' Qwen3.5-MoE: gate and up fused per expert, down stacked.
      if (pe->proj == "up_proj") continue;
      if (pe->proj == "down_proj") {
        out.push_back({out_name(pe->mlp + "experts.down_proj"), {parts.size(), rows, cols}, parts, stack(in, slices), std::nullopt});
        continue;
      }
      const auto& up = per_expert_in[pe->mlp]["up_proj"];
      if (up.size() != parts.size()) return make_error(in.path(), ": ", pe->mlp, "experts: gate and up counts differ");
      std::vector<const ModelTensor*> srcs = parts;
      for (size_t e = 0; e < parts.size(); ++e) {
        slices[e].push_back({up[e], 0, up[e]->shape[0]});
        srcs.push_back(up[e]);
      }
      out.push_back({out_name(pe->mlp + "experts.gate_up_proj"), {parts.size(), 2 * rows, cols}, srcs, stack(in, slices),
                     std::nullopt});
      continue;
    }
    const size_t sw = n.find(".mlp.switch_mlp.");
    const bool fused = n.ends_with(".mlp.experts.gate_up_proj") || n.ends_with(".mlp.experts.down_proj");
    if ((sw != std::string::npos || fused) && t.shape.size() == 3) {
      const std::string mlp = n.substr(0, n.find(".mlp.") + 5);
      const uint64_t n_exp = t.shape[0], rows = t.shape[1], cols = t.shape[2];
      const bool gate_up = n.ends_with("experts.gate_up_proj");
      if (mlx) {  // -> switch_mlp.{gate,up,down}_proj
        if (!gate_up) {
          const std::string proj = fused ? "down_proj" : n.substr(sw + 16, n.size() - sw - 16 - 7);
          out.push_back({out_name(mlp + "switch_mlp." + proj + ".weight"), t.shape, {&t}, read(in, &t), std::nullopt});
          continue;
        }
        for (uint64_t half = 0; half < 2; ++half) {
          std::vector<std::vector<Slice>> slices;
          for (uint64_t e = 0; e < n_exp; ++e) slices.push_back({{&t, e * rows + half * rows / 2, rows / 2}});
          out.push_back({out_name(mlp + (half == 0 ? "switch_mlp.gate_proj.weight" : "switch_mlp.up_proj.weight")),
                         {n_exp, rows / 2, cols}, {&t}, stack(in, slices), std::nullopt});
        }
        continue;
      }
      if (fused) {  // transformers' Qwen3.5-MoE layout already
        out.push_back({out_name(n), t.shape, {&t}, read(in, &t), std::nullopt});
        continue;
      }
      // switch_mlp -> transformers: Qwen3-Next one tensor per expert, Qwen3.5-MoE fused.
      const std::string proj = n.substr(sw + 16, n.size() - sw - 16 - 7);
      if (per_expert_out) {
        // The experts are written one after another: the stacked tensor is read once, for the
        // first, and dropped after the last.
        auto all = std::make_shared<std::vector<float>>();
        for (uint64_t e = 0; e < n_exp; ++e) {
          Values one = [&in, tp = &t, all, e, rows, cols, n_exp]() -> Result<std::vector<float>> {
            if (all->empty()) {
              SPLASH_TRY(*all, in.read_f32(*tp));
            }
            const float* p = all->data() + e * rows * cols;
            std::vector<float> v(p, p + rows * cols);
            if (e + 1 == n_exp) std::vector<float>().swap(*all);
            return v;
          };
          out.push_back({out_name(str_cat(mlp, "experts.", e, ".", proj, ".weight")), {rows, cols}, {&t}, one, std::nullopt});
        }
        continue;
      }
      if (proj == "up_proj") continue;
      if (proj == "down_proj") {
        out.push_back({out_name(mlp + "experts.down_proj"), t.shape, {&t}, read(in, &t), std::nullopt});
        continue;
      }
      const ModelTensor* up = in.find(mlp + "switch_mlp.up_proj.weight");
      if (up == nullptr || up->shape != t.shape) return make_error(in.path(), ": ", mlp, "switch_mlp.up_proj.weight is missing");
      std::vector<std::vector<Slice>> slices;
      for (uint64_t e = 0; e < n_exp; ++e) slices.push_back({{&t, e * rows, rows}, {up, e * rows, rows}});
      out.push_back({out_name(mlp + "experts.gate_up_proj"), {n_exp, 2 * rows, cols}, {&t, up}, stack(in, slices), std::nullopt});
      continue;
    }
    LayoutTensor o{out_name(n), t.shape, {&t}, read(in, &t), std::nullopt};
    if (n.ends_with("linear_attn.conv1d.weight") && !t.shape.empty()) {
      const uint64_t ch = t.shape[0], k = t.n_elems() / ch;  // same value order in every layout
      o.shape = mlx ? std::vector<uint64_t>{ch, k, 1} : std::vector<uint64_t>{ch, 1, k};
    }
    if (is_zero_centred_norm_name(n)) o.values = read(in, &t, gain_delta);
    if (mlx && is_router(n)) o.mlx_params = MlxQuantParams{64, 8};
    out.push_back(std::move(o));
  }
  if (dropped_mtp && note) note("the MTP head (mtp.*) is left out: mlx-lm's layout has none");
  return out;
}

nlohmann::json safetensors_layout_config(const ModelFiles& in, bool mlx) {
  nlohmann::json j = nlohmann::json::object();
  const ModelConfig& c = in.config();
  if (is_hybrid(c) && !mlx && c.n_mtp_layers > 0 && in.find("mtp.fc.weight") != nullptr)
    j["mtp_num_hidden_layers"] = c.n_mtp_layers;
  return j;
}

}  // namespace splash
