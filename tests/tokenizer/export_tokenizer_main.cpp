// Writes a tokenizer as Hugging Face files with tokenizer_hf_files, so the independent
// @huggingface/tokenizers can read exactly what Splash exports (make_llama2_expected.mjs).
// Usage: splash_export_tokenizer <tokenizer.bin | tokenizer.json | model dir | x.gguf> <out dir>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>

#include "core/mapped_file.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer_export.h"

namespace {

splash::Result<splash::Tokenizer> load_any(const std::string& path) {
  if (path.ends_with(".gguf")) {
    SPLASH_TRY(auto f, splash::gguf::GgufFile::open(path));
    return splash::load_tokenizer_gguf(f);
  }
  if (path.ends_with(".bin")) return splash::load_tokenizer_llama2c(path);
  return splash::load_tokenizer_json(path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <tokenizer.bin|tokenizer.json|dir|x.gguf> <out dir>\n", argv[0]);
    return 2;
  }
  auto tok = load_any(argv[1]);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.error_message().c_str());
    return 1;
  }
  auto files = splash::tokenizer_hf_files(*tok);
  if (!files.ok()) {
    std::fprintf(stderr, "%s\n", files.error_message().c_str());
    return 1;
  }
  std::error_code ec;
  std::filesystem::create_directories(argv[2], ec);
  const std::string dir = argv[2];
  for (auto [name, text] : {std::pair{"/tokenizer.json", &files->tokenizer_json},
                            std::pair{"/tokenizer_config.json", &files->tokenizer_config_json}}) {
    auto st = splash::write_file_atomic(
        dir + name, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text->data()), text->size()));
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.error_message().c_str());
      return 1;
    }
  }
  return 0;
}
