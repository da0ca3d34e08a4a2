#include "tokenizer/model_tokenizer.h"

#include "formats/gguf.h"

namespace splash {

Result<std::unique_ptr<Tokenizer>> load_model_tokenizer(const ModelFiles& model) {
  const TokenizerInfo& info = model.tokenizer();
  if (info.kind.empty()) return std::unique_ptr<Tokenizer>();
  auto wrap = [](Result<Tokenizer> r) -> Result<std::unique_ptr<Tokenizer>> {
    if (!r.ok()) return r.error();
    return std::make_unique<Tokenizer>(std::move(r).value());
  };
  if (info.kind == "tokenizer.json") return wrap(load_tokenizer_json(info.path));
  if (info.kind == "llama2.c") return wrap(load_tokenizer_llama2c(info.path));
  if (model.gguf() != nullptr) return wrap(load_tokenizer_gguf(*model.gguf()));
  return make_error(model.path(), ": unknown tokenizer kind '", info.kind, "'");
}

}  // namespace splash
