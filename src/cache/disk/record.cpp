#include "cache/disk/record.h"

#include <cstring>

#include <xxhash.h>

#include "core/le_bytes.h"

namespace splash::disk {

namespace {

uint64_t header_checksum(const uint8_t* rec, uint32_t n_block_tokens) {
  // The token ids hashed with the fixed fields' hash as the seed: one value covering both.
  return XXH3_64bits_withSeed(rec + kRecordHeaderBytes, size_t{n_block_tokens} * 4, XXH3_64bits(rec, 72));
}

bool valid_kind(uint8_t k) {
  return k == static_cast<uint8_t>(BlockKind::kKvPage) || k == static_cast<uint8_t>(BlockKind::kState);
}

}  // namespace

uint64_t record_bytes(size_t n_block_tokens, size_t payload_bytes) {
  const uint64_t raw = kRecordHeaderBytes + uint64_t{n_block_tokens} * 4 + payload_bytes + 8;
  return (raw + kRecordAlign - 1) / kRecordAlign * kRecordAlign;
}

void encode_record(const BlockInfo& info, uint64_t seq, std::span<const int32_t> tokens,
                   std::span<const uint8_t> payload, std::span<uint8_t> out) {
  SPLASH_CHECK(tokens.size() <= kMaxRecordTokens && payload.size() < kMaxRecordPayload);
  SPLASH_CHECK(out.size() == record_bytes(tokens.size(), payload.size()));
  uint8_t* p = out.data();
  std::memset(p, 0, kRecordHeaderBytes);
  put_le<uint32_t>(p + 0, kRecordMagic);
  put_le<uint16_t>(p + 4, kRecordFormat);
  p[6] = static_cast<uint8_t>(info.kind);
  put_le<uint32_t>(p + 8, static_cast<uint32_t>(tokens.size()));
  put_le<uint64_t>(p + 16, seq);
  put_le<uint64_t>(p + 24, info.key.hi);
  put_le<uint64_t>(p + 32, info.key.lo);
  put_le<uint64_t>(p + 40, info.parent.hi);
  put_le<uint64_t>(p + 48, info.parent.lo);
  put_le<int64_t>(p + 56, info.n_tokens);
  put_le<uint64_t>(p + 64, payload.size());
  if (!tokens.empty()) std::memcpy(p + kRecordHeaderBytes, tokens.data(), tokens.size_bytes());
  put_le<uint64_t>(p + 72, header_checksum(p, static_cast<uint32_t>(tokens.size())));
  const size_t body = kRecordHeaderBytes + tokens.size_bytes();
  if (!payload.empty()) std::memcpy(p + body, payload.data(), payload.size());
  const size_t end = body + payload.size();
  put_le<uint64_t>(p + end, XXH3_64bits(p, end));
  std::memset(p + end + 8, 0, out.size() - end - 8);
}

std::optional<RecordHeader> parse_record_header(std::span<const uint8_t> block) {
  if (block.size() < kRecordHeaderBytes) return std::nullopt;
  const uint8_t* p = block.data();
  if (get_le<uint32_t>(p) != kRecordMagic || get_le<uint16_t>(p + 4) != kRecordFormat) return std::nullopt;
  if (!valid_kind(p[6]) || p[7] != 0 || get_le<uint32_t>(p + 12) != 0) return std::nullopt;
  const uint32_t nt = get_le<uint32_t>(p + 8);
  if (nt > kMaxRecordTokens || kRecordHeaderBytes + uint64_t{nt} * 4 > block.size()) return std::nullopt;
  const uint64_t payload = get_le<uint64_t>(p + 64);
  if (payload >= kMaxRecordPayload) return std::nullopt;
  if (get_le<uint64_t>(p + 72) != header_checksum(p, nt)) return std::nullopt;
  RecordHeader h;
  h.info.kind = static_cast<BlockKind>(p[6]);
  h.n_block_tokens = nt;
  h.seq = get_le<uint64_t>(p + 16);
  h.info.key = BlockKey{get_le<uint64_t>(p + 24), get_le<uint64_t>(p + 32)};
  h.info.parent = BlockKey{get_le<uint64_t>(p + 40), get_le<uint64_t>(p + 48)};
  h.info.n_tokens = get_le<int64_t>(p + 56);
  h.payload_bytes = payload;
  h.record_bytes = record_bytes(nt, payload);
  return h;
}

bool looks_like_record_header(std::span<const uint8_t> block) {
  if (block.size() < kRecordHeaderBytes) return false;
  const uint8_t* p = block.data();
  if (get_le<uint32_t>(p) == kRecordMagic) return true;
  return get_le<uint16_t>(p + 4) == kRecordFormat && valid_kind(p[6]) && p[7] == 0 && get_le<uint32_t>(p + 12) == 0;
}

Result<RecordHeader> verify_record_self(std::span<const uint8_t> record) {
  auto h = parse_record_header(record.first(std::min<size_t>(record.size(), kRecordAlign)));
  if (!h) return make_error("bad record header (magic, format or header checksum)");
  if (record.size() < h->record_bytes) return make_error("truncated record (", record.size(), " of ", h->record_bytes, " bytes)");
  const size_t end = kRecordHeaderBytes + size_t{h->n_block_tokens} * 4 + h->payload_bytes;
  if (get_le<uint64_t>(record.data() + end) != XXH3_64bits(record.data(), end))
    return make_error("record checksum mismatch");
  return *h;
}

Result<std::vector<uint8_t>> verify_record(std::span<const uint8_t> record, const BlockKey& key, BlockKind kind,
                                           std::span<const int32_t> tokens) {
  SPLASH_TRY(RecordHeader h, verify_record_self(record));
  if (!(h.info.key == key)) return make_error("record holds another key");
  if (h.info.kind != kind) return make_error("record holds another kind of block");
  if (h.n_block_tokens != tokens.size() ||
      std::memcmp(record.data() + kRecordHeaderBytes, tokens.data(), tokens.size_bytes()) != 0)
    return make_error("record holds other token ids (hash collision)");
  const uint8_t* payload = record.data() + kRecordHeaderBytes + tokens.size_bytes();
  return std::vector<uint8_t>(payload, payload + h.payload_bytes);
}

}  // namespace splash::disk
