// The configuration of a DFlash block drafter, read from a published checkpoint's `config.json`
// (architectures: ["DFlashDraftModel"]): Qwen3-style decoder-layer hyper-parameters plus
//   block_size                    rows per drafting step (anchor + block_size - 1 proposals)
//   num_target_layers             layers of the target it was trained against
//   dflash_config.mask_token_id   the token every proposal row starts from
//   dflash_config.target_layer_ids   target layers whose outputs are concatenated as its context
// block_size / mask_token_id / target_layer_ids may sit at the top level or inside dflash_config
// (dflash_config wins), as the published loader reads them. Optional scalars inside dflash_config:
// input_embedding_scale, output_multiplier, final_logit_softcapping.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "formats/model_config.h"

namespace splash {

struct DFlashConfig {
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int n_ff = 0;
  int n_vocab = 0;              // the target's vocabulary, as the config records it
  float rms_eps = 1e-6f;
  double rope_theta = 1000000.0;
  int64_t max_position = 0;     // max_position_embeddings (0 = not given)

  int block_size = 16;
  int num_target_layers = 0;
  int32_t mask_token_id = -1;
  std::vector<int> target_layer_ids;
  // Context rows a block row sees: keys with query_pos - key_pos < sliding_window (sliding layers);
  // 0 = no window in the checkpoint.
  int64_t sliding_window = 0;

  float input_embedding_scale = 1.0f;
  float output_multiplier = 1.0f;
  float final_logit_softcapping = 0.0f;  // 0 = none

  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_head_kv * head_dim; }
  int context_width() const { return static_cast<int>(target_layer_ids.size()) * n_embd; }
};

// Parses config.json text; `source` names the file in errors. Refuses what this drafter does not
// implement (DFlash2's candidate selector and convolutions, causal draft attention, attention biases,
// RoPE scaling) with a message naming the field.
Result<DFlashConfig> parse_dflash_config(std::string_view json_text, const std::string& source);

// Whether the drafter fits the target: same hidden size, the target's layer count, tapped layers
// inside it, the mask token inside its vocabulary. Errors name both sides.
Status check_dflash_target(const DFlashConfig& draft, const ModelConfig& target, const std::string& draft_source);

}  // namespace splash
