// PCRE2 wrapper for pre-tokenizer split patterns: compiled once (UTF + UCP, JIT when available),
// matched from many threads (each call makes its own match data). Invalid UTF-8 in the subject never
// fails a match: those bytes simply never match and end up in the gaps between matches.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace splash {

class SplitRegex {
 public:
  SplitRegex() = default;
  static Result<SplitRegex> compile(const std::string& pattern);

  // Appends the [begin, end) byte ranges of all non-overlapping, non-empty matches in `text`.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& matches) const;

  // The matches of find_all one at a time, so a long text is split without holding all of its
  // ranges: next() gives the same ranges in the same order. Owns its PCRE2 match data; one thread.
  class Matcher {
   public:
    Matcher(const SplitRegex& regex, std::string_view text);
    Matcher(const Matcher&) = delete;
    Matcher& operator=(const Matcher&) = delete;
    ~Matcher();
    // The next [begin, end) match, or false once there is none.
    bool next(size_t& begin, size_t& end);

   private:
    void* code_;        // pcre2_code_8*, owned by the SplitRegex
    void* md_;          // pcre2_match_data_8*
    void* stack_;       // pcre2_jit_stack_8*, or nullptr
    void* mctx_;        // pcre2_match_context_8*, or nullptr
    std::string_view text_;
    size_t pos_ = 0;
  };

  bool valid() const { return code_ != nullptr; }

 private:
  std::shared_ptr<void> code_;  // pcre2_code_8*, freed with pcre2_code_free_8
  bool jit_ = false;
};

}  // namespace splash
