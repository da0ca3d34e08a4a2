// The KV page layout shared by the paged KV cache (src/cache/kv_pages.h, which owns the pages) and
// the attention kernels (which read them). One page holds kKvPageTokens consecutive positions of one
// sequence for every layer:
//
//   page   = for il in [0, n_layer): K block, V block
//   block  = data   [n_kv_head][kKvPageTokens][head_dim]   int8 / bf16 / f32
//            scales [n_kv_head][kKvPageTokens]             f32, int8 only (value = data * scale)
//            padded to 64 bytes
//
// so the keys of one KV head inside a page are one contiguous [32, head_dim] run: decode streams
// them, prefill dequantizes them as one tile. int8 is symmetric per (token, KV head): scale =
// max|x| / 127.
//
// Thread-safety: the geometry and views are plain values; kv_store_row writes one slot and must not
// race with readers of that slot (the engine thread writes before it runs attention).
#pragma once

#include <cstdint>

#include "core/check.h"

namespace splash {

constexpr int kKvPageTokens = 32;

enum class KvFormat : uint8_t { kInt8, kBF16, kF32 };
const char* kv_format_name(KvFormat f);  // "int8", "bf16", "f32"

struct KvPageGeometry {
  KvFormat format = KvFormat::kInt8;
  int n_layer = 0;
  int n_kv_head = 0;
  int head_dim = 0;

  int64_t elem_bytes() const { return format == KvFormat::kInt8 ? 1 : format == KvFormat::kBF16 ? 2 : 4; }
  int64_t head_bytes() const { return int64_t{kKvPageTokens} * head_dim * elem_bytes(); }  // one head's [32, hd]
  int64_t data_bytes() const { return n_kv_head * head_bytes(); }
  int64_t scales_bytes() const { return format == KvFormat::kInt8 ? int64_t{4} * n_kv_head * kKvPageTokens : 0; }
  int64_t block_bytes() const { return (data_bytes() + scales_bytes() + 63) / 64 * 64; }
  // int8: where head h's 32 per-token scales (f32) start in a block, after the codes of every head.
  int64_t scales_offset(int64_t h) const { return data_bytes() + 4 * h * kKvPageTokens; }
  int64_t page_bytes() const { return 2 * n_layer * block_bytes(); }
  int64_t k_offset(int il) const { return 2 * il * block_bytes(); }
  int64_t v_offset(int il) const { return (2 * il + 1) * block_bytes(); }
};

// What attention reads for one sequence and one layer: positions [0, n_tokens), position p in page
// pages[p / 32], slot p % 32. Non-owning: pool and pages belong to the cache.
struct PagedKvView {
  KvPageGeometry geo;
  int layer = 0;
  int64_t n_tokens = 0;
  const uint8_t* pool = nullptr;   // base of page 0; page i starts at pool + i * geo.page_bytes()
  const int32_t* pages = nullptr;  // [ceil(n_tokens / 32)] page ids

  const uint8_t* k_block(int64_t page_index) const {
    return pool + pages[page_index] * geo.page_bytes() + geo.k_offset(layer);
  }
  const uint8_t* v_block(int64_t page_index) const {
    return pool + pages[page_index] * geo.page_bytes() + geo.v_offset(layer);
  }
};

// Encodes x ([n_kv_head, head_dim] f32, one token) into slot `slot` of a K or V block.
void kv_store_row(const KvPageGeometry& geo, uint8_t* block, int slot, const float* x);

// Decodes slot `slot` of head `h` of a block into out[head_dim] (tests, debugging, the reference).
void kv_load_row(const KvPageGeometry& geo, const uint8_t* block, int h, int slot, float* out);

}  // namespace splash
