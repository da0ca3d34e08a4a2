#include "cli/spec_flags.h"

namespace splash::cli {

void add_spec_flags(CLI::App& app, SpecArgs& args, bool with_draft_model) {
  app.add_option("--spec", args.method,
                 "Speculative decoding: auto (the paired DFlash drafter or --draft-model, else the model's MTP head, "
                 "else prompt lookup), "
                 "dflash, draft, lookup, mtp or off")
      ->capture_default_str();
  app.add_option("--spec-block", args.block,
                 "Query rows a lane verifies per step: the last token + N-1 proposals (1 = no proposals)")
      ->capture_default_str();
  if (with_draft_model)
    app.add_option("--draft-model", args.draft_model,
                   "Drafter: a smaller model with the same tokenizer (--spec draft) or a DFlash checkpoint directory");
  app.add_option("--lookup-ngram", args.lookup_ngram, "Prompt lookup: longest n-gram to match")->capture_default_str();
}

Result<SpecOptions> spec_options(const SpecArgs& args) {
  SpecOptions o;
  SPLASH_TRY(o.method, parse_spec_method(args.method));
  o.block = args.block;
  o.draft_model = args.draft_model;
  o.lookup_ngram_max = args.lookup_ngram;
  o.lookup_ngram_min = 1;
  SPLASH_TRY_STATUS(o.validate());
  return o;
}

}  // namespace splash::cli
