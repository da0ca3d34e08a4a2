#include "formats/norm_gains.h"

#include "formats/architecture_facts.h"

namespace splash {

bool zero_centred_gains_stored_shifted(std::string_view architecture, const NormGainLayout& l) {
  if (l.gguf) return true;
  // mlx-lm moves conv1d to [C, K, 1] in the same sanitize() pass that adds the 1, and transformers
  // never stores that shape, so the axis settles it whenever a linear-attention layer is present
  // (whatever else the folder holds: mlx-lm versions that keep the MTP head shift its norms too).
  if (l.conv_axis_raw) return false;
  if (l.conv_axis_moved) return true;
  // No conv1d to go by: mlx-lm's own markers of the raw layout.
  switch (architecture_facts(architecture).raw_gain_marker) {
    case RawGainMarker::kPerExpertTensors: return !l.per_expert_tensors;
    case RawGainMarker::kMtpTensors: return !l.mtp_tensors;
    case RawGainMarker::kNone: return false;  // not a zero-centred architecture: nothing to decide
  }
  return false;
}

bool is_zero_centred_norm_name(std::string_view n) {
  for (std::string_view s : {".input_layernorm.weight", ".post_attention_layernorm.weight", ".q_norm.weight",
                             ".k_norm.weight"})
    if (n.ends_with(s)) return true;
  return n == "model.norm.weight" || n == "mtp.norm.weight" || n == "mtp.pre_fc_norm_embedding.weight" ||
         n == "mtp.pre_fc_norm_hidden.weight";
}

}  // namespace splash
