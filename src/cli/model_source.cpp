#include "cli/model_source.h"

#include "hub/resolve.h"

namespace splash::cli {

void add_model_source_flags(CLI::App& app, ModelSourceArgs& args) {
  app.add_option("--revision", args.revision, "Branch, tag or commit of a --model repository (default: main)");
  app.add_flag("--offline", args.offline, "Use only the Hugging Face cache (default: off; HF_HUB_OFFLINE=1 too)");
}

Result<std::string> resolve_model_arg(const std::string& model, const ModelSourceArgs& args) {
  hub::HubSettings settings = hub::settings_from_environment(args.offline);
  settings.revision = args.revision;
  hub::Console console;
  console.out = stderr;
  auto r = hub::resolve_model(model, settings, console);
  if (!r.ok()) {
    if (r.error().code == ErrorCode::kUnavailable)
      return make_error(r.error_message(), "\nerror: model download or verification failed");
    return r.error();
  }
  return r->path;
}

}  // namespace splash::cli
