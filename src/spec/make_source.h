// Picks and loads the drafter behind `--spec METHOD` / `--draft-model PATH` (spec 6: speculation is
// always on, so `auto` always finds something unless the block is 1):
//   off     no drafter;
//   lookup  prompt lookup (no weights);
//   draft   --draft-model PATH: a smaller model with the target's tokenizer (any format Splash loads);
//   dflash  --draft-model DIR of a DFlashDraftModel checkpoint, else the `<name>-dflash` folder beside
//           the target (find_dflash_drafter);
//   mtp     the target's own MTP head (qwen3_next / qwen3_5 safetensors with mtp.* tensors);
//   auto    --draft-model: DFlash when its config.json says DFlashDraftModel, else a draft model;
//           without it the paired DFlash folder when there is one, else the model's MTP head when
//           it has one, else prompt lookup.
#pragma once

#include <memory>
#include <string>

#include "core/result.h"
#include "spec/drafter.h"

namespace splash {

class Model;
class ModelFiles;

// `target_path`: the path the target was opened from (for the paired DFlash folder). `lanes` sizes a
// draft model's KV pool. Returns nullptr for `off` (or block < 2). Errors name the flag and path.
Result<std::unique_ptr<DrafterSource>> make_drafter_source(const SpecOptions& options, const std::string& target_path,
                                                           const ModelFiles& target_files, const Model& target,
                                                           int lanes, int threads);

}  // namespace splash
