#include "ple/placement.h"

#include <algorithm>
#include <cstdio>

namespace splash::ple {

namespace {

// One decimal, binary units, as the start-up line shows them ("47.7 GiB", "64.0 MiB").
std::string one_decimal(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

uint64_t ssd_cache(const PlacementInputs& in) {
  if (in.ssd_cache_bytes) return std::min(*in.ssd_cache_bytes, in.table_bytes);
  const uint64_t left = in.budget_bytes > in.rest_bytes ? in.budget_bytes - in.rest_bytes : 0;
  return std::min({left, kMaxAutoCacheBytes, in.table_bytes});
}

}  // namespace

PlacementChoice choose_placement(const PlacementInputs& in) {
  PlacementChoice c;
  const bool rest_fits = in.rest_bytes <= in.budget_bytes;
  if (in.requested) {
    c.placement = *in.requested;
    c.reason = "requested";
  } else if (!in.ssd_offload && rest_fits && in.table_bytes <= in.budget_bytes - in.rest_bytes) {
    c.placement = Placement::kResident;
    c.reason = "the whole model fits the budget";
  } else if (rest_fits &&
             static_cast<double>(in.page_cache_bytes) >= kMmapCachedFraction * static_cast<double>(in.table_bytes)) {
    c.placement = Placement::kMmap;
    c.reason = in.ssd_offload ? "qwen4_ple_ssd_offload, and the page cache holds the table"
                              : "the rest fits the budget and the page cache holds the table";
  } else {
    c.placement = Placement::kSsd;
    c.reason = rest_fits ? "the page cache cannot hold the table" : "the rest of the model alone exceeds the budget";
  }
  if (c.placement == Placement::kSsd) c.cache_bytes = ssd_cache(in);
  return c;
}

std::string placement_log_line(const PlacementChoice& choice, uint64_t table_bytes, std::string_view format) {
  std::string line =
      str_cat("PLE · ", placement_name(choice.placement), " · table ", one_decimal(table_bytes), " ", format);
  if (choice.placement == Placement::kSsd) line += str_cat(" · row cache ", one_decimal(choice.cache_bytes));
  return line;
}

Result<std::optional<Placement>> parse_placement(std::string_view text) {
  if (text == "auto") return std::optional<Placement>();
  for (Placement p : {Placement::kResident, Placement::kMmap, Placement::kSsd})
    if (text == placement_name(p)) return std::optional<Placement>(p);
  return make_error("--ple-placement: '", text, "' is not one of auto, resident, mmap, ssd");
}

}  // namespace splash::ple
