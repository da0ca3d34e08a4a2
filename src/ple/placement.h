// Where the PLE table goes when the user says `--ple-placement auto` (the default), decided from
// the memory plan's numbers alone so the rule is a pure function with a unit-tested table:
//   1. an explicit placement (--ple-placement resident|mmap|ssd, or --ple-ssd-streaming = ssd) wins;
//   2. resident when the whole model (rest + table) fits the RAM budget and config.json does not say
//      `qwen4_ple_ssd_offload: true`;
//   3. mmap when the rest of the model fits the budget and the page cache left over would hold at
//      least 90% of the table (it then mostly stays cached, and the kernel manages it);
//   4. ssd otherwise, with a row cache of --ple-ssd-cache-mb, else the budget left after the rest
//      of the model, at most 1 GiB (never more than the table).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ple/row_source.h"

namespace splash::ple {

struct PlacementInputs {
  uint64_t table_bytes = 0;                 // stored size of the PLE table
  uint64_t rest_bytes = 0;                  // everything else the memory plan counts (weights, KV, buffers)
  uint64_t budget_bytes = 0;                // the RAM budget (--max-memory, or the plan's default)
  uint64_t page_cache_bytes = 0;            // the plan's estimate of page cache the table could keep
  bool ssd_offload = false;                 // config.json `qwen4_ple_ssd_offload: true`
  std::optional<Placement> requested;       // --ple-placement resident|mmap|ssd; nullopt = auto
  std::optional<uint64_t> ssd_cache_bytes;  // --ple-ssd-cache-mb
};

struct PlacementChoice {
  Placement placement = Placement::kResident;
  uint64_t cache_bytes = 0;  // the ssd row cache; 0 for the other placements
  std::string reason;        // one short phrase for the debug log
};

inline constexpr uint64_t kMaxAutoCacheBytes = 1ull << 30;
inline constexpr double kMmapCachedFraction = 0.9;

PlacementChoice choose_placement(const PlacementInputs& in);

// The start-up line: "PLE · ssd · table 47.7 GiB fp8 · row cache 1.0 GiB" (the cache part for ssd only).
std::string placement_log_line(const PlacementChoice& choice, uint64_t table_bytes, std::string_view format);

// "auto" -> nullopt, "resident" / "mmap" / "ssd"; an Error naming the flag otherwise.
Result<std::optional<Placement>> parse_placement(std::string_view text);

}  // namespace splash::ple
