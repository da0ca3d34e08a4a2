// Parsing of the sizes and token counts users type on the command line: "28G", "512M", "100K".
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"

namespace splash {

// Bytes: plain integer or a suffix K, M, G, T (powers of 1024; an optional trailing "B" or "iB" is
// accepted, e.g. "28GB", "28GiB"). Decimals allowed with a suffix: "1.5G".
Result<uint64_t> parse_size_bytes(const std::string& text);
// Token counts: plain integer or K (x1024, as in the spec: "100K" = 102400 tokens).
Result<uint64_t> parse_token_count(const std::string& text);
// "1.50 GiB", "312.0 MiB", "4.0 KiB", "17 B".
std::string format_bytes(uint64_t bytes);

}  // namespace splash
