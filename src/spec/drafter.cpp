#include "spec/drafter.h"

#include <array>
#include <utility>

namespace splash {
namespace {

constexpr std::array<std::pair<SpecMethod, std::string_view>, 6> kMethods = {{
    {SpecMethod::kAuto, "auto"},
    {SpecMethod::kOff, "off"},
    {SpecMethod::kDflash, "dflash"},
    {SpecMethod::kDraft, "draft"},
    {SpecMethod::kLookup, "lookup"},
    {SpecMethod::kMtp, "mtp"},
}};

// Longest block a lane verifies in one pass (spec 6 uses 8; 16 rows is the spec's experimental RFC).
constexpr int kMaxBlock = 32;

}  // namespace

std::string_view spec_method_name(SpecMethod method) {
  for (const auto& [m, name] : kMethods) {
    if (m == method) return name;
  }
  return "?";
}

Result<SpecMethod> parse_spec_method(std::string_view name) {
  for (const auto& [m, n] : kMethods) {
    if (n == name) return m;
  }
  return make_error("--spec: unknown method '", name, "' (expected auto, off, dflash, draft, lookup or mtp)");
}

Status SpecOptions::validate() const {
  if (block < 1 || block > kMaxBlock) {
    return make_error("--spec-block: ", block, " must be in [1, ", kMaxBlock,
                      "] (query rows per step: the last token + block - 1 proposals; 1 = no proposals)");
  }
  if (lookup_ngram_min < 1 || lookup_ngram_max < lookup_ngram_min) {
    return make_error("prompt lookup: n-gram sizes [", lookup_ngram_min, ", ", lookup_ngram_max,
                      "] must satisfy 1 <= min <= max");
  }
  if (method == SpecMethod::kDraft && draft_model.empty()) {
    return make_error("--spec draft needs --draft-model PATH (a smaller model with the target's tokenizer)");
  }
  return {};
}

}  // namespace splash
