#include "hub/model_ref.h"

#include <cctype>

namespace splash::hub {

namespace {

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

Status check_repo_part(std::string_view part, std::string_view repo) {
  if (part.empty() || part.size() > 96)
    return make_error("'", repo, "' is not a repository id: each part of OWNER/REPO has 1 to 96 characters");
  for (char c : part)
    if (!is_word_char(c) && c != '-' && c != '.')
      return make_error("'", repo, "' is not a repository id: only letters, digits, '_', '-' and '.' are allowed");
  if (!is_word_char(part.front()) || !is_word_char(part.back()))
    return make_error("'", repo, "' is not a repository id: each part must start and end with a letter, digit or '_'");
  return {};
}

}  // namespace

std::string ModelRef::text() const {
  if (kind == Kind::kLocal) return path;
  return variant.empty() ? repo : repo + ":" + variant;
}

Status check_repo_id(std::string_view repo) {
  const size_t slash = repo.find('/');
  if (slash == std::string_view::npos || repo.find('/', slash + 1) != std::string_view::npos)
    return make_error("'", repo, "' is not a repository id: expected OWNER/REPO");
  SPLASH_TRY_STATUS(check_repo_part(repo.substr(0, slash), repo));
  SPLASH_TRY_STATUS(check_repo_part(repo.substr(slash + 1), repo));
  if (repo.find("--") != std::string_view::npos || repo.find("..") != std::string_view::npos)
    return make_error("'", repo, "' is not a repository id: '--' and '..' are not allowed");
  if (ends_with(repo, ".git")) return make_error("'", repo, "' is not a repository id: it must not end in .git");
  return {};
}

Status check_variant(std::string_view variant) {
  const bool ok = !variant.empty() && variant.size() <= 64 &&
                  std::isalnum(static_cast<unsigned char>(variant[0])) != 0 && [&] {
                    for (char c : variant)
                      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
                    return true;
                  }();
  if (!ok)
    return make_error("':", variant, "' is not a GGUF variant: expected 1 to 64 letters, digits, '.', '_' or '-', "
                      "starting with a letter or digit (e.g. :Q4_K_M)");
  return {};
}

Status check_revision(std::string_view revision) {
  if (revision.empty()) return make_error("--revision: the revision is empty");
  if (revision.size() > 256) return make_error("--revision: longer than 256 characters");
  for (char c : revision)
    if (std::iscntrl(static_cast<unsigned char>(c)) || std::isspace(static_cast<unsigned char>(c)) || c == '\\' ||
        c == '?' || c == '#' || c == '%')
      return make_error("--revision '", revision, "': whitespace, control characters and \\ ? # % are not allowed");
  if (revision.front() == '/' || revision.back() == '/')
    return make_error("--revision '", revision, "': must not start or end with '/'");
  size_t start = 0;
  while (start <= revision.size()) {
    size_t end = revision.find('/', start);
    if (end == std::string_view::npos) end = revision.size();
    std::string_view seg = revision.substr(start, end - start);
    if (seg.empty() || seg == "." || seg == "..")
      return make_error("--revision '", revision, "': empty, '.' or '..' path segments are not allowed");
    start = end + 1;
  }
  return {};
}

bool is_commit_hash(std::string_view revision) {
  if (revision.size() != 40) return false;
  for (char c : revision)
    if (!std::isxdigit(static_cast<unsigned char>(c)) || std::isupper(static_cast<unsigned char>(c))) return false;
  return true;
}

Result<ModelRef> parse_model_ref(const std::string& text, const std::function<bool(const std::string&)>& exists) {
  if (text.empty()) return make_error("--model: the value is empty");
  ModelRef ref;
  const bool looks_local = text[0] == '/' || text[0] == '.' || text[0] == '~' || ends_with(text, ".gguf") ||
                           ends_with(text, ".bin") || ends_with(text, ".safetensors");
  if (exists(text) || looks_local) {
    ref.kind = ModelRef::Kind::kLocal;
    ref.path = text;
    return ref;
  }
  ref.kind = ModelRef::Kind::kHub;
  std::string repo = text;
  const size_t colon = text.find(':');
  if (colon != std::string::npos) {
    repo = text.substr(0, colon);
    ref.variant = text.substr(colon + 1);
    if (Status st = check_variant(ref.variant); !st.ok()) return make_error("--model: ", st.error_message());
  }
  if (Status st = check_repo_id(repo); !st.ok())
    return make_error("--model: no file or directory '", text, "', and ", st.error_message());
  ref.repo = repo;
  return ref;
}

}  // namespace splash::hub
