// How much memory this process may use: /proc/meminfo (MemTotal, MemAvailable) and the memory
// cgroup it runs in (v2 memory.max / memory.current, v1 memory.limit_in_bytes / usage_in_bytes as
// the fallback). The memory plan (memory_plan.h) turns this into its budget.
//
//   HostMemory host = *probe_host_memory();          // the real machine
//   HostMemory fake = *probe_host_memory("/tmp/x");  // tests: /tmp/x/proc/meminfo, /tmp/x/sys/fs/cgroup/...
//
// Pure reads of a handful of small files; no global state. Thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/result.h"

namespace splash {

struct HostMemory {
  uint64_t mem_total = 0;      // MemTotal, bytes
  uint64_t mem_available = 0;  // MemAvailable, bytes
  // The tightest cgroup limit on the way from our cgroup to the root (nullopt: unlimited) and that
  // cgroup's current usage. Usage counts page cache, which the kernel reclaims under the limit;
  // counting it anyway errs on the side of a smaller plan.
  std::optional<uint64_t> cgroup_limit;
  uint64_t cgroup_usage = 0;
  std::string cgroup_source;  // the limit file read, e.g. "/sys/fs/cgroup/memory.max"; "" when none

  // min(MemAvailable, cgroup limit - usage): what may still be allocated.
  uint64_t available() const;
};

// Reads <root>/proc/meminfo, <root>/proc/self/cgroup and the cgroup files under <root>/sys/fs/cgroup.
// Errors: meminfo missing or without MemTotal / MemAvailable, or a number that does not parse (the
// message names the file and field). Missing cgroup files mean "no limit".
Result<HostMemory> probe_host_memory(const std::string& root = "/");

}  // namespace splash
