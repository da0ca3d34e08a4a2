#include "tokenizer/regex_split.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace splash {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  int n = pcre2_get_error_message(code, buf, sizeof(buf));
  if (n < 0) return str_cat("PCRE2 error ", code);
  return std::string(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

// Length of the UTF-8 sequence starting at text[i], or 1 for a byte that cannot start one; used to
// step past an empty match without landing inside a character.
size_t char_len(std::string_view text, size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
  return std::min(n, text.size() - i);
}

}  // namespace

Result<SplitRegex> SplitRegex::compile(const std::string& pattern) {
  int err = 0;
  PCRE2_SIZE err_off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_off, nullptr);
  if (code == nullptr)
    return make_error("split regex does not compile at offset ", err_off, ": ", pcre2_message(err), " (pattern ",
                      pattern, ")");
  SplitRegex r;
  r.code_ = std::shared_ptr<void>(code, [](void* p) { pcre2_code_free(static_cast<pcre2_code*>(p)); });
  // JIT is an optimisation only: if the platform lacks it, the interpreter gives the same matches.
  r.jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return r;
}

void SplitRegex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& matches) const {
  SPLASH_CHECK(code_ != nullptr);
  auto* code = static_cast<pcre2_code*>(code_.get());
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(code, nullptr);
  SPLASH_CHECK(md != nullptr);
  // The default 32 KiB JIT stack is too small for long runs of one character class in some patterns.
  pcre2_jit_stack* stack = jit_ ? pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr) : nullptr;
  pcre2_match_context* mctx = nullptr;
  if (stack != nullptr) {
    mctx = pcre2_match_context_create(nullptr);
    pcre2_jit_stack_assign(mctx, nullptr, stack);
  }
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    int rc = pcre2_match(code, subject, text.size(), pos, 0, md, mctx);
    if (rc < 0) break;  // no match (or a resource limit): the rest stays one gap
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t b = ov[0], e = ov[1];
    if (e > b) {
      matches.emplace_back(b, e);
      pos = e;
    } else {
      if (b >= text.size()) break;
      pos = b + char_len(text, b);
    }
  }
  if (mctx != nullptr) pcre2_match_context_free(mctx);
  if (stack != nullptr) pcre2_jit_stack_free(stack);
  pcre2_match_data_free(md);
}

}  // namespace splash
