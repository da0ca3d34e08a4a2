// Renders every case of tests/template/cases.json (real Qwen chat templates and inline engine
// templates) and compares byte for byte with tests/template/expected.json, which
// tests/template/make_expected.mjs produced with the reference renderer @huggingface/jinja.
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "template/chat_template.h"

namespace splash {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string data_dir() { return std::string(SPLASH_SOURCE_DIR) + "/tests/template/"; }

TEST(TemplateReference, AllCasesMatchHuggingFaceJinja) {
  auto cases = nlohmann::ordered_json::parse(read_file(data_dir() + "cases.json"))["cases"];
  auto expected = nlohmann::ordered_json::parse(read_file(data_dir() + "expected.json"))["results"];
  ASSERT_EQ(cases.size(), expected.size());
  ASSERT_GE(cases.size(), 60u);
  int n_qwen3 = 0, n_matched = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const auto& want = expected[i];
    std::string name = c["name"].get<std::string>();
    ASSERT_EQ(name, want["name"].get<std::string>());
    std::string source;
    if (c["template"].is_string()) {
      std::string tpl = c["template"].get<std::string>();
      if (tpl == "qwen3") ++n_qwen3;
      source = read_file(data_dir() + "templates/" + tpl + ".jinja");
    } else {
      source = c["template"]["inline"].get<std::string>();
    }
    auto parsed = ChatTemplate::parse(source);
    if (!parsed.ok()) {
      ADD_FAILURE() << name << ": parse failed: " << parsed.error_message();
      continue;
    }
    auto out = parsed->render(c["context"]);
    if (want.contains("error")) {
      // The reference fails here (e.g. `raise_exception`, a method on a list): so must we.
      EXPECT_FALSE(out.ok()) << name << " rendered, but the reference failed with: "
                             << want["error"].get<std::string>();
      if (!out.ok()) ++n_matched;
      continue;
    }
    if (!out.ok()) {
      ADD_FAILURE() << name << ": render failed: " << out.error_message();
      continue;
    }
    std::string want_text = want["output"].get<std::string>();
    EXPECT_EQ(*out, want_text) << name;
    if (*out == want_text) ++n_matched;
  }
  EXPECT_GE(n_qwen3, 20);
  EXPECT_EQ(n_matched, static_cast<int>(cases.size()));
}

}  // namespace
}  // namespace splash
