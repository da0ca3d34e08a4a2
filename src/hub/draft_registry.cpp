#include "hub/draft_registry.h"

#include <filesystem>

namespace splash::hub {

namespace fs = std::filesystem;

const std::vector<DraftEntry>& draft_registry() {
  // The spec's two families (spec 6) and the DFlash drafts published for Qwen3 targets.
  static const std::vector<DraftEntry> kEntries = {
      {"Qwen3.8-27B", "qwen3_5", 64, 5120, 0, "incoai/Qwen3.8-27B-DFlash2"},
      {"Qwen3.6-35B-A3B", "qwen3_5", 40, 2048, 256, "incoai/Qwen3.6-35B-A3B-DFlash2"},
      {"Qwen3-4B", "qwen3", 36, 2560, 0, "z-lab/Qwen3-4B-DFlash-b16"},
      {"Qwen3-8B", "qwen3", 36, 4096, 0, "z-lab/Qwen3-8B-DFlash-b16"},
      {"Qwen3-Coder-30B-A3B", "qwen3_moe", 48, 2048, 128, "z-lab/Qwen3-Coder-30B-A3B-DFlash"},
  };
  return kEntries;
}

const DraftEntry* find_draft(const ModelConfig& t) {
  for (const DraftEntry& e : draft_registry())
    if (e.architecture == t.architecture && e.n_layer == t.n_layer && e.n_embd == t.n_embd && e.n_expert == t.n_expert)
      return &e;
  return nullptr;
}

Result<std::optional<ResolvedModel>> resolve_draft(const ModelConfig& target, const std::string& draft_model,
                                                   const HubSettings& settings, const Console& console) {
  HubSettings s = settings;
  s.revision = "main";
  s.check_model = false;
  if (!draft_model.empty()) {
    std::error_code ec;
    if (fs::is_directory(draft_model, ec)) {
      ResolvedModel r;
      r.path = fs::absolute(draft_model, ec).lexically_normal().string();
      r.model_id = draft_model;
      return std::optional<ResolvedModel>(std::move(r));
    }
    auto ref = parse_model_ref(draft_model, [](const std::string&) { return false; });
    if (!ref.ok() || !ref->variant.empty())
      return make_error("--draft-model: '", draft_model, "' is neither an existing folder nor OWNER/REPO");
    SPLASH_TRY(ResolvedModel r, resolve_model(*ref, s, console));
    return std::optional<ResolvedModel>(std::move(r));
  }
  const DraftEntry* e = find_draft(target);
  if (e == nullptr) return std::optional<ResolvedModel>();
  ModelRef ref;
  ref.kind = ModelRef::Kind::kHub;
  ref.repo = std::string(e->draft_repo);
  SPLASH_TRY(ResolvedModel r, resolve_model(ref, s, console));
  return std::optional<ResolvedModel>(std::move(r));
}

}  // namespace splash::hub
