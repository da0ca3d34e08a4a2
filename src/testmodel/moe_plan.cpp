// The mixture-of-experts tensors of a test model's layer (weights.h: plan_moe_mlp).
#include <cmath>

#include "core/result.h"
#include "testmodel/weights.h"

namespace splash::testmodel {

std::string expert_tensor_name(const std::string& stacked_name, uint64_t expert) {
  const std::string from = "mlp.switch_mlp.";
  const size_t at = stacked_name.find(from);
  SPLASH_CHECK_MSG(at != std::string::npos, stacked_name);
  return stacked_name.substr(0, at) + str_cat("mlp.experts.", expert, ".") + stacked_name.substr(at + from.size());
}

void plan_moe_mlp(const TestModelSpec& spec, uint32_t il, std::vector<TensorPlan>& out) {
  plan_moe_mlp(spec, str_cat("model.layers.", il, "."), out);
}

void plan_moe_mlp(const TestModelSpec& spec, const std::string& layer_prefix, std::vector<TensorPlan>& out) {
  const uint64_t d = spec.n_embd, e = spec.n_expert, f = spec.n_ff_expert, fs = spec.n_ff_shared_expert;
  const std::string p = layer_prefix + "mlp.";
  auto inv_sqrt = [](uint64_t n) { return 1.0f / std::sqrt(static_cast<float>(n)); };
  auto add = [&](std::string name, std::vector<uint64_t> shape, float scale) -> TensorPlan& {
    TensorPlan& t = out.emplace_back();
    t.hf_name = std::move(name);
    t.shape = std::move(shape);
    t.kind = TensorKind::kMatrix;
    t.scale = scale;
    return t;
  };
  // Router logits of unit scale: softmax over the experts is neither flat nor one-hot.
  add(p + "gate.weight", {e, d}, inv_sqrt(d)).gguf_f32 = true;
  add(p + "switch_mlp.gate_proj.weight", {e, f, d}, inv_sqrt(d)).stacked_experts = true;
  add(p + "switch_mlp.up_proj.weight", {e, f, d}, inv_sqrt(d)).stacked_experts = true;
  add(p + "switch_mlp.down_proj.weight", {e, d, f}, inv_sqrt(f)).stacked_experts = true;
  if (fs > 0) {
    add(p + "shared_expert.gate_proj.weight", {fs, d}, inv_sqrt(d));
    add(p + "shared_expert.up_proj.weight", {fs, d}, inv_sqrt(d));
    add(p + "shared_expert.down_proj.weight", {d, fs}, inv_sqrt(fs));
    TensorPlan& g = add(p + "shared_expert_gate.weight", {1, d}, inv_sqrt(d));
    g.gguf_f32 = true;
    g.gguf_flat = true;
  }
}

}  // namespace splash::testmodel
