#include "server/web_assets.h"

namespace splash {

const Asset* find_web_asset(std::string_view url_path) {
  std::string_view name;
  constexpr std::string_view kAssets = "/assets/";
  if (url_path == "/" || url_path == "/index.html") {
    name = "index.html";
  } else if (url_path == "/favicon.ico") {
    name = "favicon.svg";  // browsers ask for /favicon.ico; the Content-Type says what it is
  } else if (url_path.starts_with(kAssets) && url_path.size() > kAssets.size()) {
    name = url_path.substr(kAssets.size());
  } else {
    return nullptr;
  }
  for (const Asset& a : web_assets()) {
    if (a.path == name) return &a;
  }
  return nullptr;
}

namespace {

// Weak comparison ignores the W/ prefix on either side.
std::string_view opaque_tag(std::string_view tag) {
  if (tag.starts_with("W/")) tag.remove_prefix(2);
  return tag;
}

}  // namespace

bool etag_matches(std::string_view if_none_match, std::string_view etag) {
  // A list of [W/]"..." separated by commas and spaces; a comma may sit inside the quotes.
  size_t i = 0;
  const size_t n = if_none_match.size();
  while (i < n) {
    const char c = if_none_match[i];
    if (c == ' ' || c == '\t' || c == ',') {
      ++i;
      continue;
    }
    if (c == '*') return true;
    const size_t begin = i;
    if (if_none_match.substr(i).starts_with("W/")) i += 2;
    if (i >= n || if_none_match[i] != '"') return false;  // malformed: match nothing
    const size_t close = if_none_match.find('"', i + 1);
    if (close == std::string_view::npos) return false;
    if (opaque_tag(if_none_match.substr(begin, close + 1 - begin)) == opaque_tag(etag)) return true;
    i = close + 1;
  }
  return false;
}

}  // namespace splash
