// Where the PLE n-gram table lies in a checkpoint, without reading it: the files, the byte offset of
// each run of rows, the stored row format. Every placement (row_source.h) reads rows through this.
//
// Hugging Face: `<prefix>ngram_embedding.shard_{0..n-1}.weight` [rows_s, width] in BF16 / F16 / F32,
// or F8_E4M3 with one shared `<prefix>ngram_embedding.weight_scale` (one value, any float dtype);
// the shards concatenate in index order and may sit in different safetensors files. The headers are
// read here directly: the general reader (formats/safetensors.h) does not take F8_E4M3 and the
// locator needs only offsets, not a mapping of the whole model.
// GGUF (llama.cpp's qwen4exp): `per_layer_token_embd.weight`, ggml shape {width, rows}, in any type
// formats/quant can dequantize row by row (F32, F16, BF16, Q8_0, ...).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"

namespace splash::ple {

// The stored element type of the table. kGgml covers every GGML dtype (TableLayout::ggml_type).
enum class RowFormat : uint8_t { kBF16, kF16, kF32, kF8E4M3, kGgml };

// A run of consecutive table rows stored contiguously in one file.
struct TableSegment {
  std::string path;
  uint64_t file_offset = 0;  // byte offset of the segment's first row in the file
  uint64_t first_row = 0;    // global row id of that row
  uint64_t n_rows = 0;
};

struct TableLayout {
  RowFormat format = RowFormat::kBF16;
  DType ggml_type = DType::kF32;       // kGgml only
  uint64_t width = 0;                  // values per row (head_dim: 160 for the shipped model)
  uint64_t row_bytes = 0;              // stored bytes per row
  uint64_t n_rows = 0;                 // sum of the segments' rows (the padded table)
  float scale = 1.0f;                  // multiplies every decoded value (F8_E4M3 weight_scale; 1 otherwise)
  std::vector<TableSegment> segments;  // ordered by first_row, contiguous from row 0

  uint64_t table_bytes() const { return n_rows * row_bytes; }
  // The segment holding `row` (row < n_rows).
  const TableSegment& segment_of(uint64_t row) const;
};

// "bf16", "f16", "f32", "fp8", or the lowercase GGML name ("q8_0").
std::string row_format_name(const TableLayout& layout);

// A Hugging Face checkpoint directory (model.safetensors.index.json or a single model.safetensors)
// or one .safetensors file. `tensor_prefix` is the PLE module's prefix up to `ngram_embedding.`,
// e.g. "model.language_model.layers.1.ple.ple_embedding.".
Result<TableLayout> locate_hf_table(const std::string& path, const std::string& tensor_prefix);

// A GGUF file's `per_layer_token_embd.weight`.
Result<TableLayout> locate_gguf_table(const std::string& path);

// Decodes one stored row into `width` floats (times the layout's scale).
void decode_row(const TableLayout& layout, const uint8_t* src, float* dst);

}  // namespace splash::ple
