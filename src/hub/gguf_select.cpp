#include "hub/gguf_select.h"

#include <algorithm>
#include <cctype>

namespace splash::hub {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string stem(const std::string& file) { return file.substr(0, file.size() - 5); }  // minus ".gguf"

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> words;
  size_t start = 0;
  for (;;) {
    size_t dash = s.find('-', start);
    words.push_back(s.substr(start, dash == std::string::npos ? std::string::npos : dash - start));
    if (dash == std::string::npos) return words;
    start = dash + 1;
  }
}

std::string listed(const std::vector<std::string>& candidates) {
  if (candidates.empty()) return "none";
  std::string out;
  for (const std::string& c : candidates) out += (out.empty() ? "" : ", ") + c;
  return out;
}

}  // namespace

std::vector<std::string> gguf_candidates(const std::vector<std::string>& files) {
  std::vector<std::string> out;
  for (const std::string& f : files) {
    if (f.find('/') != std::string::npos || f.size() <= 5 || f.compare(f.size() - 5, 5, ".gguf") != 0) continue;
    if (lower(stem(f)).find("mmproj") != std::string::npos) continue;
    out.push_back(f);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Result<GgufChoice> select_gguf(const std::vector<std::string>& files, const std::string& variant) {
  const std::vector<std::string> candidates = gguf_candidates(files);
  if (variant.empty()) {
    if (candidates.size() == 1) return GgufChoice{candidates[0], false};
    return make_error("select a GGUF with OWNER/REPO:VARIANT (files in the repository root: ", listed(candidates), ")");
  }
  const std::string want = lower(variant);
  // Words shared by every candidate's name (the model name), then what is left of each name.
  std::vector<std::vector<std::string>> words;
  for (const std::string& c : candidates) words.push_back(split_words(stem(c)));
  size_t shared = words.empty() ? 0 : words[0].size();
  for (const auto& w : words) {
    size_t k = 0;
    while (k < shared && k < w.size() && w[k] == words[0][k]) ++k;
    shared = k;
  }
  std::vector<std::string> exact, ending;
  for (size_t i = 0; i < candidates.size(); ++i) {
    std::string rest;
    for (size_t k = shared; k < words[i].size(); ++k) rest += (k > shared ? "-" : "") + words[i][k];
    if (lower(rest) == want) exact.push_back(candidates[i]);
    const std::string s = lower(stem(candidates[i]));
    const std::string suffix = "-" + want;
    if (s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0)
      ending.push_back(candidates[i]);
  }
  if (exact.size() == 1) return GgufChoice{exact[0], false};
  if (ending.size() == 1) return GgufChoice{ending[0], candidates.size() > 1};
  return make_error("no single GGUF matches :", variant, " (files in the repository root: ", listed(candidates), ")");
}

}  // namespace splash::hub
