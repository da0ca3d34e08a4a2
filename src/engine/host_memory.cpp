#include "engine/host_memory.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

namespace splash {

namespace {

// /proc files report size 0, so they are read as streams rather than mapped (read_text_file maps).
std::optional<std::string> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

std::optional<uint64_t> parse_u64(std::string_view s) {
  s = trim(s);
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// "MemAvailable:   23121612 kB" -> bytes.
Result<uint64_t> meminfo_field(const std::string& text, std::string_view key, const std::string& path) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::string_view l = line;
    if (l.size() <= key.size() || l.substr(0, key.size()) != key || l[key.size()] != ':') continue;
    std::string_view rest = trim(l.substr(key.size() + 1));
    uint64_t mult = 1;
    if (rest.size() > 2 && rest.substr(rest.size() - 2) == "kB") {
      mult = 1024;
      rest = trim(rest.substr(0, rest.size() - 2));
    }
    auto v = parse_u64(rest);
    if (!v || *v > UINT64_MAX / mult) return make_error(path, ": field ", key, " is not a byte count: '", rest, "'");
    return *v * mult;
  }
  return make_error(path, ": no ", key, " field");
}

// A cgroup limit file: a number, or "max" (v2) / a value near 2^63 (v1) for no limit.
std::optional<uint64_t> read_limit(const std::string& path) {
  auto text = slurp(path);
  if (!text) return std::nullopt;
  if (trim(*text) == "max") return std::nullopt;
  auto v = parse_u64(*text);
  if (!v || *v >= (uint64_t{1} << 62)) return std::nullopt;
  return v;
}

struct CgroupPaths {
  std::string v2;  // "0::/a/b" -> "/a/b"
  std::string v1;  // "N:memory:/a/b" (or a controller list containing memory)
};

CgroupPaths own_cgroups(const std::string& root) {
  CgroupPaths out;
  auto text = slurp(root + "/proc/self/cgroup");
  if (!text) return out;
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    size_t a = line.find(':');
    size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (line.substr(0, a) == "0" && controllers.empty()) {
      out.v2 = path;
    } else {
      std::istringstream cs(controllers);
      std::string c;
      while (std::getline(cs, c, ','))
        if (c == "memory") out.v1 = path;
    }
  }
  return out;
}

// Our cgroup directory and each ancestor under `mount` (deepest first). Inside a container the
// namespace root is mounted at `mount` while /proc/self/cgroup may show the host path; directories
// that do not exist are skipped, so the mount root is always tried last.
std::vector<std::string> cgroup_dirs(const std::string& mount, std::string path) {
  std::vector<std::string> dirs;
  while (!path.empty() && path != "/") {
    dirs.push_back(mount + path);
    size_t slash = path.rfind('/');
    path = slash == std::string::npos ? std::string() : path.substr(0, slash);
  }
  dirs.push_back(mount);
  return dirs;
}

struct Limit {
  uint64_t limit = 0, usage = 0;
  std::string source;
};

// The level with the least headroom (limit - usage) wins: a parent's limit binds its children.
void consider(std::optional<Limit>& best, const std::string& limit_file, const std::string& usage_file) {
  auto limit = read_limit(limit_file);
  if (!limit) return;
  auto usage_text = slurp(usage_file);
  uint64_t usage = usage_text ? parse_u64(*usage_text).value_or(0) : 0;
  uint64_t headroom = *limit > usage ? *limit - usage : 0;
  if (!best || headroom < (best->limit > best->usage ? best->limit - best->usage : 0))
    best = Limit{*limit, usage, limit_file};
}

}  // namespace

uint64_t HostMemory::available() const {
  uint64_t avail = mem_available;
  if (cgroup_limit) avail = std::min(avail, *cgroup_limit > cgroup_usage ? *cgroup_limit - cgroup_usage : 0);
  return avail;
}

Result<HostMemory> probe_host_memory(const std::string& root_in) {
  const std::string root = root_in == "/" ? std::string() : root_in;
  HostMemory h;
  const std::string meminfo_path = root + "/proc/meminfo";
  auto meminfo = slurp(meminfo_path);
  if (!meminfo) return make_error(meminfo_path, ": cannot read");
  SPLASH_TRY(h.mem_total, meminfo_field(*meminfo, "MemTotal", meminfo_path));
  SPLASH_TRY(h.mem_available, meminfo_field(*meminfo, "MemAvailable", meminfo_path));

  const CgroupPaths own = own_cgroups(root);
  const std::string cg = root + "/sys/fs/cgroup";
  std::optional<Limit> best;
  for (const std::string& dir : cgroup_dirs(cg, own.v2)) consider(best, dir + "/memory.max", dir + "/memory.current");
  if (!best) {
    // cgroup v1 (or a hybrid host whose memory controller is still v1).
    for (const std::string& dir : cgroup_dirs(cg + "/memory", own.v1))
      consider(best, dir + "/memory.limit_in_bytes", dir + "/memory.usage_in_bytes");
  }
  if (best) {
    h.cgroup_limit = best->limit;
    h.cgroup_usage = best->usage;
    h.cgroup_source = best->source.substr(root.size());
  }
  return h;
}

}  // namespace splash
