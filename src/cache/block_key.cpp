#include "cache/block_store.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

namespace splash {

namespace {
BlockKey from_xxh(XXH128_hash_t h) { return BlockKey{h.high64, h.low64}; }
}  // namespace

BlockKey namespace_key(std::string_view description) {
  return from_xxh(XXH3_128bits(description.data(), description.size()));
}

BlockKey chain_block_key(const BlockKey& parent, std::span<const int32_t> tokens) {
  // The parent key is mixed in as the seed of the first half and hashed with the tokens, so equal
  // blocks after different prefixes get different keys. Token ids are hashed as little-endian int32
  // (this code only builds for x86-64), which keeps keys stable across runs for the persistent tier.
  XXH3_state_t state;
  XXH3_128bits_reset_withSeed(&state, parent.hi ^ (parent.lo * 0x9e3779b97f4a7c15ull));
  const uint64_t p[2] = {parent.hi, parent.lo};
  XXH3_128bits_update(&state, p, sizeof p);
  XXH3_128bits_update(&state, tokens.data(), tokens.size_bytes());
  return from_xxh(XXH3_128bits_digest(&state));
}

}  // namespace splash
