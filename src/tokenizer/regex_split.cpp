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

SplitRegex::Matcher::Matcher(const SplitRegex& regex, std::string_view text)
    : code_(regex.code_.get()), md_(nullptr), stack_(nullptr), mctx_(nullptr), text_(text) {
  SPLASH_CHECK(code_ != nullptr);
  auto* code = static_cast<pcre2_code*>(code_);
  md_ = pcre2_match_data_create_from_pattern(code, nullptr);
  SPLASH_CHECK(md_ != nullptr);
  // The default 32 KiB JIT stack is too small for long runs of one character class in some patterns.
  if (regex.jit_) stack_ = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  if (stack_ != nullptr) {
    mctx_ = pcre2_match_context_create(nullptr);
    pcre2_jit_stack_assign(static_cast<pcre2_match_context*>(mctx_), nullptr, static_cast<pcre2_jit_stack*>(stack_));
  }
}

SplitRegex::Matcher::~Matcher() {
  if (mctx_ != nullptr) pcre2_match_context_free(static_cast<pcre2_match_context*>(mctx_));
  if (stack_ != nullptr) pcre2_jit_stack_free(static_cast<pcre2_jit_stack*>(stack_));
  pcre2_match_data_free(static_cast<pcre2_match_data*>(md_));
}

bool SplitRegex::Matcher::next(size_t& begin, size_t& end) {
  auto* code = static_cast<pcre2_code*>(code_);
  auto* md = static_cast<pcre2_match_data*>(md_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text_.data());
  while (pos_ < text_.size()) {
    int rc = pcre2_match(code, subject, text_.size(), pos_, 0, md, static_cast<pcre2_match_context*>(mctx_));
    if (rc < 0) {  // no match (or a resource limit): the rest stays one gap
      pos_ = text_.size();
      return false;
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t b = ov[0], e = ov[1];
    if (e > b) {
      pos_ = e;
      begin = b;
      end = e;
      return true;
    }
    if (b >= text_.size()) break;
    pos_ = b + char_len(text_, b);
  }
  pos_ = text_.size();
  return false;
}

void SplitRegex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& matches) const {
  Matcher m(*this, text);
  size_t b = 0, e = 0;
  while (m.next(b, e)) matches.emplace_back(b, e);
}

}  // namespace splash
