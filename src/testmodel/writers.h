// The two output formats of the test-model generator (internal to src/testmodel).
#pragma once

#include <string>

#include "core/result.h"
#include "testmodel/test_model.h"
#include "testmodel/tokenizer_gen.h"

namespace splash::testmodel {

// `tok` already holds exactly n_vocab tokens.
Status write_gguf_model(const TestModelSpec& spec, const TokenizerData& tok, uint32_t n_vocab,
                        const std::string& path);
Status write_safetensors_model(const TestModelSpec& spec, const TokenizerData& tok, uint32_t n_vocab,
                               const std::string& dir);

// Rows per generated chunk: about 1M values, whole heads for RoPE-permuted tensors.
uint64_t chunk_rows(uint64_t rows, uint64_t cols, uint32_t head_dim, bool whole_heads);

}  // namespace splash::testmodel
