// The tensors of a safetensors checkpoint as the defining tool lays them out: transformers for a
// plain folder, mlx-lm's sanitize() for an MLX one. For the dense and qwen3_moe architectures both
// keep the input's tensors; for the hybrid Gated-DeltaNet ones (qwen3_next, qwen3_5 and their MoE
// variants) they differ (docs/ADDING_A_MODEL.md, "Layout conventions"):
//   transformers: zero-centred norm gains w, conv1d [C, 1, K], Qwen3-Next experts one tensor each,
//                 Qwen3.5-MoE experts fused (experts.gate_up_proj [E, 2f, d], experts.down_proj),
//                 the MTP head kept;
//   mlx-lm:       gains 1 + w, conv1d [C, K, 1], experts stacked (switch_mlp.*_proj [E, rows, cols]),
//                 the MoE router and shared-expert gate at 8 bits (group 64), no MTP head, Qwen3.5's
//                 text model under language_model.* (its quantization keys use those paths).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "formats/mlx_quant.h"
#include "formats/model_files.h"

namespace splash {

struct LayoutTensor {
  std::string name;             // in the output file
  std::vector<uint64_t> shape;  // logical row-major shape (MLX packs the last dimension)
  std::vector<const ModelTensor*> sources;  // the input tensors it is made of
  // Its values as f32 in `shape` order; called once, when the writer reaches the tensor.
  std::function<Result<std::vector<float>>()> values;
  // mlx-lm's per-module quantization, when it differs from the requested one (routers).
  std::optional<MlxQuantParams> mlx_params;
};

// The output tensors of `in` written as a plain (mlx = false) or MLX (mlx = true) folder. Fails for
// a hybrid model read from GGUF (its value heads, A and names would need undoing first). `note`
// gets one line per dropped tensor group; may be empty.
Result<std::vector<LayoutTensor>> safetensors_layout(const ModelFiles& in, bool mlx,
                                                     const std::function<void(const std::string&)>& note);

// Config keys the layout adds or overrides (mtp_num_hidden_layers); merged into config.json.
nlohmann::json safetensors_layout_config(const ModelFiles& in, bool mlx);

}  // namespace splash
