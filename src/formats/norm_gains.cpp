#include "formats/norm_gains.h"

namespace splash {

bool zero_centred_gains_stored_shifted(std::string_view architecture, const NormGainLayout& l) {
  if (l.gguf) return true;
  // A conv1d still [C, 1, K] is the raw layout for both: mlx-lm moves the axis whenever it shifts,
  // and its model would not load the unmoved tensor.
  if (l.conv_axis_raw) return false;
  // The rest mirrors the condition under which mlx-lm's sanitize() shifts (it then also rewrites
  // the layout, so a saved mlx-lm folder never meets the condition again).
  if (architecture == "qwen3_next") return !l.per_expert_tensors;
  if (architecture == "qwen3_5") return !l.mtp_tensors;
  // Not a zero-centred architecture: nothing to decide; answer as the raw layout would.
  return l.conv_axis_moved;
}

}  // namespace splash
