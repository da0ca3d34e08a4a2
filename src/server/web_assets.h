// The chat page (web/*) built into the binary. The table is generated at build time by
// cmake/embed_assets.cmake from every file under web/, so the page needs no files at run time.
// Everything here is immutable static data: safe to read from any thread.
#pragma once

#include <span>
#include <string_view>

namespace splash {

struct Asset {
  std::string_view path;          // relative to web/, '/'-separated: "index.html", "app.js"
  std::string_view content_type;  // from the extension: "text/html; charset=utf-8", ...
  std::string_view body;          // the file's bytes, exactly
  std::string_view etag;          // strong ETag of body, quoted: "\"sha256:<16 hex>\""
};

// Every file of web/, sorted by path.
std::span<const Asset> web_assets();

// The asset a GET path names: "/" and "/index.html" -> index.html, "/favicon.ico" -> favicon.svg,
// "/assets/<p>" -> <p>;
// nullptr for anything else (no directory listing, no ".." resolution: names must match exactly).
// The caller strips the query string first.
const Asset* find_web_asset(std::string_view url_path);

// True when an If-None-Match header value matches etag ("*", or a comma-separated list of
// entity tags, weak "W/" ones compared weakly as RFC 9110 says for If-None-Match), so the
// server can answer 304 Not Modified.
bool etag_matches(std::string_view if_none_match, std::string_view etag);

}  // namespace splash
