// The tokenizer a model ships with, whatever its format: tokenizer.json beside safetensors, GGUF
// tokenizer.ggml.* metadata, or a llama2.c tokenizer.bin.
#pragma once

#include <memory>
#include <string>

#include "core/result.h"
#include "formats/model_files.h"
#include "tokenizer/tokenizer.h"

namespace splash {

// The model's own tokenizer (tokenizer.json, GGUF metadata or llama2.c tokenizer.bin); nullptr when
// the model ships none. Errors when one is present but does not load.
Result<std::unique_ptr<Tokenizer>> load_model_tokenizer(const ModelFiles& model);

}  // namespace splash
