#include "spec/make_source.h"

#include <filesystem>

#include "core/mapped_file.h"
#include "spec/dflash/dflash_config.h"
#include "spec/dflash/dflash_drafter.h"
#include "spec/draft_model.h"
#include "spec/mtp/mtp_drafter.h"
#include "spec/prompt_lookup.h"

namespace splash {
namespace {

// A directory whose config.json parses as a DFlash drafter config.
bool is_dflash_dir(const std::string& path) {
  std::error_code ec;
  const std::string config = (std::filesystem::path(path) / "config.json").string();
  if (!std::filesystem::is_directory(path, ec) || !std::filesystem::exists(config, ec)) return false;
  auto text = read_text_file(config);
  return text.ok() && parse_dflash_config(*text, config).ok();
}

}  // namespace

Result<std::unique_ptr<DrafterSource>> make_drafter_source(const SpecOptions& options, const std::string& target_path,
                                                           const ModelFiles& target_files, const Model& target,
                                                           int lanes, int threads) {
  SPLASH_TRY_STATUS(options.validate());
  if (options.method == SpecMethod::kOff || options.block < 2) return std::unique_ptr<DrafterSource>();
  auto dflash = [&](const std::string& dir) -> Result<std::unique_ptr<DrafterSource>> {
    auto src = make_dflash_source(dir, target, threads);
    if (!src.ok()) return make_error("--spec dflash: ", dir, ": ", src.error_message());
    return std::move(*src);
  };
  auto draft = [&](const std::string& path) -> Result<std::unique_ptr<DrafterSource>> {
    auto src = DraftModelSource::load(path, target, lanes, threads);
    if (!src.ok()) return make_error("--draft-model ", path, ": ", src.error_message());
    return std::unique_ptr<DrafterSource>(std::move(*src));
  };
  switch (options.method) {
    case SpecMethod::kLookup: return std::unique_ptr<DrafterSource>(std::make_unique<PromptLookupSource>(options));
    case SpecMethod::kDraft: return draft(options.draft_model);
    case SpecMethod::kMtp: {
      if (!options.draft_model.empty())
        return make_error("--spec mtp uses the model's own MTP head: --draft-model ", options.draft_model,
                          " does not apply (use --spec draft or dflash for a separate drafter)");
      auto src = make_mtp_source(target_files, target, threads);
      if (!src.ok()) return make_error("--spec mtp: ", src.error_message());
      return std::move(*src);
    }
    case SpecMethod::kDflash: {
      if (!options.draft_model.empty()) return dflash(options.draft_model);
      const auto paired = find_dflash_drafter(target_path);
      if (!paired)
        return make_error("--spec dflash: no DFlash drafter for ", target_path,
                          " (pass --draft-model DIR, or put one in a '<model name>-dflash' folder beside it)");
      return dflash(*paired);
    }
    case SpecMethod::kAuto: {
      if (!options.draft_model.empty())
        return is_dflash_dir(options.draft_model) ? dflash(options.draft_model) : draft(options.draft_model);
      if (const auto paired = find_dflash_drafter(target_path)) return dflash(*paired);
      if (has_mtp_head(target_files, target)) {
        auto src = make_mtp_source(target_files, target, threads);
        if (!src.ok()) return make_error("--spec auto: the model's MTP head: ", src.error_message());
        return std::move(*src);
      }
      return std::unique_ptr<DrafterSource>(std::make_unique<PromptLookupSource>(options));
    }
    case SpecMethod::kOff: break;
  }
  return std::unique_ptr<DrafterSource>();
}

}  // namespace splash
