// The embedded chat page: the generated table must hold every file of web/ byte for byte (read
// here from the source tree, independently of the generator), with the right content types, and
// the page's own references (assets/..., ./module.js) must resolve to embedded files.
#include "server/web_assets.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace splash {
namespace {

namespace fs = std::filesystem;

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The files the page is made of, by path relative to web/ (dotfiles and backups are not served).
std::map<std::string, std::string> web_dir_files() {
  std::map<std::string, std::string> files;
  const fs::path root = fs::path(SPLASH_SOURCE_DIR) / "web";
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    const std::string rel = fs::relative(entry.path(), root).generic_string();
    bool hidden = rel.starts_with(".") || rel.find("/.") != std::string::npos || rel.ends_with("~");
    if (!hidden) files[rel] = read_bytes(entry.path());
  }
  return files;
}

// Every quoted string that follows `prefix` in text, up to `end`: `src="assets/` -> the file names.
std::vector<std::string> values_after(std::string_view text, std::string_view prefix, char end) {
  std::vector<std::string> out;
  for (size_t at = text.find(prefix); at != std::string_view::npos; at = text.find(prefix, at + 1)) {
    const size_t begin = at + prefix.size();
    const size_t stop = text.find(end, begin);
    if (stop == std::string_view::npos) break;
    out.emplace_back(text.substr(begin, stop - begin));
  }
  return out;
}

bool is_strong_sha_etag(std::string_view tag) {
  constexpr std::string_view kPrefix = "\"sha256:";
  if (tag.size() != kPrefix.size() + 16 + 1 || !tag.starts_with(kPrefix) || !tag.ends_with('"')) return false;
  for (char c : tag.substr(kPrefix.size(), 16)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

const Asset* asset(std::string_view path) {
  for (const Asset& a : web_assets()) {
    if (a.path == path) return &a;
  }
  return nullptr;
}

TEST(WebAssets, IndexHtmlIsServedAsHtml) {
  const Asset* index = asset("index.html");
  ASSERT_NE(index, nullptr);
  EXPECT_EQ(index->content_type, "text/html; charset=utf-8");
  EXPECT_TRUE(index->body.starts_with("<!doctype html>"));
  EXPECT_EQ(find_web_asset("/"), index);
  EXPECT_EQ(find_web_asset("/index.html"), index);
}

TEST(WebAssets, EveryFileOfWebIsEmbeddedByteForByte) {
  const auto files = web_dir_files();
  ASSERT_GE(files.size(), 4u);  // index.html, app.js, markdown.js, style.css at least
  std::set<std::string_view> seen;
  for (const Asset& a : web_assets()) {
    EXPECT_TRUE(seen.insert(a.path).second) << "duplicate " << a.path;
    const auto it = files.find(std::string(a.path));
    ASSERT_NE(it, files.end()) << "embedded " << a.path << " is not in web/ (stale build?)";
    EXPECT_EQ(a.body.size(), it->second.size()) << a.path;
    EXPECT_TRUE(a.body == it->second) << a.path << " differs from web/" << a.path;
  }
  for (const auto& [path, bytes] : files) {
    EXPECT_TRUE(seen.count(path)) << "web/" << path << " is not embedded";
  }
}

TEST(WebAssets, ContentTypesFollowTheExtension) {
  for (const Asset& a : web_assets()) {
    const std::string_view p = a.path;
    if (p.ends_with(".js")) {
      EXPECT_EQ(a.content_type, "text/javascript; charset=utf-8") << p;
    } else if (p.ends_with(".css")) {
      EXPECT_EQ(a.content_type, "text/css; charset=utf-8") << p;
    } else if (p.ends_with(".svg")) {
      EXPECT_EQ(a.content_type, "image/svg+xml") << p;
    }
    EXPECT_FALSE(a.content_type.empty()) << p;
  }
  ASSERT_NE(asset("app.js"), nullptr);
  ASSERT_NE(asset("style.css"), nullptr);
}

TEST(WebAssets, EtagsAreStrongQuotedAndDifferForDifferentBodies) {
  std::map<std::string_view, std::string_view> body_of_etag;
  for (const Asset& a : web_assets()) {
    EXPECT_TRUE(is_strong_sha_etag(a.etag)) << a.path << ": " << a.etag;
    const auto [it, inserted] = body_of_etag.emplace(a.etag, a.body);
    if (!inserted) {
      EXPECT_EQ(it->second, a.body) << "two different bodies share " << a.etag;
    }
  }
}

TEST(WebAssets, FindMapsOnlyTheRootAndTheAssetsFolder) {
  ASSERT_NE(find_web_asset("/assets/app.js"), nullptr);
  EXPECT_EQ(find_web_asset("/assets/app.js")->path, "app.js");
  EXPECT_EQ(find_web_asset("/assets/markdown.js")->path, "markdown.js");
  EXPECT_EQ(find_web_asset("/app.js"), nullptr);  // only under /assets/
  EXPECT_EQ(find_web_asset("/assets/"), nullptr);
  EXPECT_EQ(find_web_asset("/assets"), nullptr);
  EXPECT_EQ(find_web_asset("/assets/../index.html"), nullptr);
  EXPECT_EQ(find_web_asset("/assets//app.js"), nullptr);
  EXPECT_EQ(find_web_asset("/assets/APP.JS"), nullptr);
  EXPECT_EQ(find_web_asset("/assets/nope.js"), nullptr);
  EXPECT_EQ(find_web_asset(""), nullptr);
  EXPECT_EQ(find_web_asset("//"), nullptr);
  EXPECT_EQ(find_web_asset("/v1/models"), nullptr);
}

// A renamed file would otherwise only show up as a blank page in the browser.
TEST(WebAssets, ReferencesInThePageResolve) {
  const Asset* index = asset("index.html");
  ASSERT_NE(index, nullptr);
  int n = 0;
  for (std::string_view attr : {"src=\"assets/", "href=\"assets/"}) {
    for (const std::string& file : values_after(index->body, attr, '"')) {
      EXPECT_NE(find_web_asset("/assets/" + file), nullptr) << "index.html refers to assets/" << file;
      ++n;
    }
  }
  EXPECT_GE(n, 3);  // stylesheet, script, icon
  for (const Asset& a : web_assets()) {
    if (!a.path.ends_with(".js")) continue;
    for (const std::string& file : values_after(a.body, "from './", '\'')) {
      EXPECT_NE(asset(file), nullptr) << a.path << " imports ./" << file;
    }
  }
}

TEST(WebAssets, EtagMatchesFollowsIfNoneMatch) {
  const std::string_view tag = "\"sha256:0123456789abcdef\"";
  EXPECT_TRUE(etag_matches("\"sha256:0123456789abcdef\"", tag));
  EXPECT_TRUE(etag_matches("*", tag));
  EXPECT_TRUE(etag_matches(" \"x\", W/\"sha256:0123456789abcdef\"", tag));  // weak comparison
  EXPECT_TRUE(etag_matches("\"a,b\",\"sha256:0123456789abcdef\"", tag));    // comma inside a tag
  EXPECT_FALSE(etag_matches("", tag));
  EXPECT_FALSE(etag_matches("\"sha256:0123456789abcdee\"", tag));
  EXPECT_FALSE(etag_matches("sha256:0123456789abcdef", tag));  // unquoted: malformed
  EXPECT_FALSE(etag_matches("\"sha256:0123456789abcdef", tag));  // unterminated
  EXPECT_FALSE(etag_matches("\"a,\"sha256:0123456789abcdef\"\"", tag));
}

}  // namespace
}  // namespace splash
