// Which DFlash draft repository goes with a target model (spec 6), and `--draft-model` to replace
// it. Targets are matched by their own config (architecture, layers, hidden size), never by
// repository name, so a GGUF or MLX re-upload of a supported model finds the same draft. The draft
// is fetched like the target (resolve_model): Hub cache, progress, resume, lock.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "formats/model_config.h"
#include "hub/resolve.h"

namespace splash::hub {

struct DraftEntry {
  std::string_view family;        // "Qwen3-8B"
  std::string_view architecture;  // ModelConfig::architecture
  uint32_t n_layer;
  uint32_t n_embd;
  uint32_t n_expert;              // 0 for dense targets
  std::string_view draft_repo;    // "owner/name" of the DFlash draft (safetensors)
};

const std::vector<DraftEntry>& draft_registry();
// The entry whose shape matches `target`, or nullptr.
const DraftEntry* find_draft(const ModelConfig& target);

// The draft for `target`: `draft_model` (--draft-model: a local folder, made absolute, or a
// repository id) when given, else the registry's repository; nullopt when neither names one.
// Repositories are resolved with `settings` (same revision rules; the draft follows its default
// branch, "main", whatever --revision says for the target).
Result<std::optional<ResolvedModel>> resolve_draft(const ModelConfig& target, const std::string& draft_model,
                                                   const HubSettings& settings, const Console& console = {});

}  // namespace splash::hub
