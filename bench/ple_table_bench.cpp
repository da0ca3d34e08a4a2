// The PLE n-gram table's placements on a synthetic table file: rows/s and bytes read from the disk
// for decode (one token = 16 rows at a time) and prefill (chunks of 512 tokens = 8,192 rows), cold
// (the file's pages dropped from the page cache with POSIX_FADV_DONTNEED, a fresh row source) and
// warm (the same tokens again). Row ids come from the real hash (ple/ngram_hash.h) with the head
// primes scaled so the 16 heads span the synthetic table. Results go to docs/PERFORMANCE.md
// ("Flash-Next PLE table").
//
// Usage: bench_ple [--file PATH] [--gib N] [--row-bytes 160] [--cache-mb 256] [--tokens 2000]
//   [--io-depth 16]  (the ssd placement runs at queue depth 1 and at this depth) [--ssd-only 1]
//   The file is written once (random bytes) and kept for later runs; delete it yourself.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "ple/ngram_hash.h"
#include "ple/row_source.h"

using namespace splash;
using namespace splash::ple;

namespace {

uint64_t proc_read_bytes() {  // bytes this process caused to be read from storage
  std::ifstream f("/proc/self/io");
  std::string key;
  uint64_t v = 0;
  while (f >> key >> v)
    if (key == "read_bytes:") return v;
  return 0;
}

bool write_table(const std::string& path, uint64_t bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  std::vector<uint64_t> buf((64ull << 20) / 8);
  std::mt19937_64 rng(7);
  for (uint64_t done = 0; done < bytes;) {
    for (auto& x : buf) x = rng() & 0x7e7e7e7e7e7e7e7eull;  // no E4M3 NaN codes
    const uint64_t n = std::min<uint64_t>(buf.size() * 8, bytes - done);
    if (::write(fd, buf.data(), n) != static_cast<ssize_t>(n)) {
      ::close(fd);
      return false;
    }
    done += n;
  }
  ::fsync(fd);
  ::close(fd);
  return true;
}

void drop_file_cache(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

struct Run {
  double seconds = 0;
  uint64_t rows = 0, disk_bytes = 0;
};

// Gathers rows[tokens, 16] in steps of `step` tokens.
Run run(RowSource& src, const std::vector<uint64_t>& rows, uint64_t n_heads, uint64_t step) {
  std::vector<float> out(step * n_heads * src.layout().width);
  const uint64_t r0 = proc_read_bytes();
  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t at = 0; at < rows.size(); at += step * n_heads) {
    const uint64_t n = std::min<uint64_t>(step * n_heads, rows.size() - at);
    std::span<const uint64_t> ids(rows.data() + at, n);
    auto st = src.gather(ids, std::span<float>(out.data(), n * src.layout().width));
    if (!st.ok()) {
      std::fprintf(stderr, "gather: %s\n", st.error_message().c_str());
      std::exit(1);
    }
  }
  Run r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.rows = rows.size();
  r.disk_bytes = proc_read_bytes() - r0;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = "/var/tmp/splash-ple-bench.bin";
  uint64_t gib = 4, row_bytes = 160, cache_mb = 256, tokens = 2000;
  uint32_t io_depth = 16;
  bool ssd_only = false;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--file") path = v;
    else if (a == "--gib") gib = std::stoull(v);
    else if (a == "--row-bytes") row_bytes = std::stoull(v);
    else if (a == "--cache-mb") cache_mb = std::stoull(v);
    else if (a == "--tokens") tokens = std::stoull(v);
    else if (a == "--io-depth") io_depth = static_cast<uint32_t>(std::stoul(v));
    else if (a == "--ssd-only") ssd_only = v == "1";
    else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  const uint64_t n_rows = (gib << 30) / row_bytes;
  const uint64_t bytes = n_rows * row_bytes;
  std::ifstream probe(path, std::ios::binary | std::ios::ate);
  if (!probe || static_cast<uint64_t>(probe.tellg()) != bytes) {
    std::fprintf(stderr, "writing %s (%.1f GiB)...\n", path.c_str(), static_cast<double>(bytes) / (1ull << 30));
    if (!write_table(path, bytes)) {
      std::fprintf(stderr, "cannot write %s\n", path.c_str());
      return 1;
    }
  }
  TableLayout layout;
  layout.format = row_bytes == 160 ? RowFormat::kF8E4M3 : RowFormat::kBF16;
  layout.width = 160;
  layout.row_bytes = row_bytes;
  layout.n_rows = n_rows;
  layout.segments.push_back({path, 0, 0, n_rows});

  NgramHashConfig hc;
  hc.vocab = 248320;
  hc.eos = 248044;
  hc.vocab_base = n_rows / 16 - 1000;  // the shipped hash, its primes scaled to this table
  auto hash = NgramHash::make(hc);
  if (!hash.ok() || hash->padded_rows() > n_rows) {
    std::fprintf(stderr, "hash geometry does not fit the table\n");
    return 1;
  }
  // Decode: `tokens` random tokens; prefill: 8 chunks of 512 other tokens.
  std::mt19937 rng(11);
  auto make_rows = [&](uint64_t n) {
    std::vector<uint32_t> toks(n);
    for (auto& t : toks) t = rng() % 248320;
    std::vector<uint64_t> rows(n * hash->n_heads());
    hash->rows(hash->start_context(), toks, rows);
    return rows;
  };
  const std::vector<uint64_t> decode_rows = make_rows(tokens), prefill_rows = make_rows(8 * 512);

  std::printf(
      "table %.2f GiB, %llu rows of %llu B; ssd row cache %llu MiB; decode %llu tokens x 16 rows, prefill 8 x 512 "
      "tokens\n",
      static_cast<double>(bytes) / (1ull << 30), static_cast<unsigned long long>(n_rows),
      static_cast<unsigned long long>(row_bytes), static_cast<unsigned long long>(cache_mb),
      static_cast<unsigned long long>(tokens));
  std::printf("%-9s %-8s %-5s %12s %12s %12s %10s\n", "placement", "phase", "cache", "rows/s", "us/token", "disk MiB",
              "open s");
  struct Config {
    Placement placement;
    uint32_t io_depth;
  };
  for (const Config cfg : {Config{Placement::kResident, 1}, Config{Placement::kMmap, 1}, Config{Placement::kSsd, 1},
                           Config{Placement::kSsd, io_depth}}) {
    const Placement p = cfg.placement;
    if (ssd_only && p != Placement::kSsd) continue;
    for (const char* phase : {"decode", "prefill"}) {
      drop_file_cache(path);
      auto t0 = std::chrono::steady_clock::now();
      RowSourceOptions o;
      o.placement = p;
      o.cache_bytes = cache_mb << 20;
      o.io_depth = cfg.io_depth;
      auto src = open_row_source(layout, o);
      if (!src.ok()) {
        std::fprintf(stderr, "%s\n", src.error_message().c_str());
        return 1;
      }
      const double open_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const bool decode = std::string(phase) == "decode";
      const auto& rows = decode ? decode_rows : prefill_rows;
      const uint64_t step = decode ? 1 : 512;
      for (const char* temp : {"cold", "warm"}) {
        Run r = run(**src, rows, hash->n_heads(), step);
        const double per_token = r.seconds / static_cast<double>(rows.size() / hash->n_heads()) * 1e6;
        const std::string name =
            p == Placement::kSsd ? str_cat("ssd/qd", cfg.io_depth) : std::string(placement_name(p));
        std::printf("%-9s %-8s %-5s %12.0f %12.2f %12.1f %10.2f\n", name.c_str(), phase, temp,
                    static_cast<double>(r.rows) / r.seconds, per_token, static_cast<double>(r.disk_bytes) / (1 << 20),
                    open_s);
      }
      PleStats s = (*src)->stats();
      if (p == Placement::kSsd)
        std::printf("          ssd stats: hits %llu misses %llu reads %llu bytes %.1f MiB read time %.3f s direct %d\n",
                    static_cast<unsigned long long>(s.cache_hits), static_cast<unsigned long long>(s.cache_misses),
                    static_cast<unsigned long long>(s.reads), static_cast<double>(s.bytes_read) / (1 << 20),
                    s.read_seconds, s.direct_io ? 1 : 0);
    }
  }
  return 0;
}
