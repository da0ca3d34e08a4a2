// One record of the SSD tier's ring file (cache/disk/disk_block_store.h): a block's identity, its
// token ids and its payload, with two XXH3-64 checksums. Pure encode / parse / verify functions,
// no I/O, so the format is tested on its own.
//
// Layout (little-endian; every record starts on a kRecordAlign boundary and is zero-padded to one):
//   offset  size  field
//        0     4  magic "SPKB"
//        4     2  format version (kRecordFormat; a new layout gets a new number, never a reused one)
//        6     1  kind (BlockKind)
//        7     1  0
//        8     4  n_block_tokens: token ids stored (the block's own, <= kMaxRecordTokens)
//       12     4  0
//       16     8  seq: write order within the file (the newest copy of a key wins on a rescan)
//       24    16  key (hi, lo)
//       40    16  parent key (hi, lo)
//       56     8  n_tokens: tokens from the start of the sequence to the end of the block
//       64     8  payload_bytes
//       72     8  header checksum: XXH3-64 of bytes [0, 72) and the token ids
//       80  4*nt  token ids (int32)
//        .     P  payload
//        .     8  record checksum: XXH3-64 of everything before it
// The header and token ids always fit in the first kRecordAlign bytes, so a rescan reads one
// aligned block per candidate position and trusts the length only once the header checksum holds.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "cache/block_store.h"
#include "core/result.h"

namespace splash::disk {

constexpr uint32_t kRecordMagic = 0x424b5053;  // "SPKB" read as little-endian bytes
constexpr uint16_t kRecordFormat = 1;
constexpr uint64_t kRecordAlign = 4096;
constexpr uint64_t kRecordHeaderBytes = 80;
constexpr uint32_t kMaxRecordTokens = (kRecordAlign - kRecordHeaderBytes) / 4;  // 1004
constexpr uint64_t kMaxRecordPayload = uint64_t{1} << 32;

struct RecordHeader {
  BlockInfo info;
  uint64_t seq = 0;
  uint32_t n_block_tokens = 0;
  uint64_t payload_bytes = 0;
  uint64_t record_bytes = 0;  // aligned size on disk
};

// Bytes a record occupies on disk (a multiple of kRecordAlign).
uint64_t record_bytes(size_t n_block_tokens, size_t payload_bytes);

// Writes the record into out (exactly record_bytes(...) bytes, padding zeroed). The caller checks
// tokens.size() <= kMaxRecordTokens and payload.size() < kMaxRecordPayload.
void encode_record(const BlockInfo& info, uint64_t seq, std::span<const int32_t> tokens,
                   std::span<const uint8_t> payload, std::span<uint8_t> out);

// The header at the start of `block` (at least kRecordAlign bytes, or fewer at the end of a file):
// nullopt unless the magic, format, kind, sizes and header checksum all hold.
std::optional<RecordHeader> parse_record_header(std::span<const uint8_t> block);

// True when a block that parse_record_header() refuses was probably a record's header before it was
// damaged: its magic holds, or its format, kind and zero fields do. Then a record was lost there
// (a rescan counts it), rather than this being the middle of one.
bool looks_like_record_header(std::span<const uint8_t> block);

// Checks a whole record (header, record checksum) and that it is the record asked for (key, kind,
// token ids); returns its payload. The error says which check failed.
Result<std::vector<uint8_t>> verify_record(std::span<const uint8_t> record, const BlockKey& key, BlockKind kind,
                                           std::span<const int32_t> tokens);
// The same checks without a key to compare with (rescan at start): the parsed header on success.
Result<RecordHeader> verify_record_self(std::span<const uint8_t> record);

}  // namespace splash::disk
