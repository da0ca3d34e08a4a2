#!/usr/bin/env bash
# Decode as a share of this machine's memory bandwidth (issue 3: decode at >= 90% of the measured
# read bandwidth divided by the bytes read per token). The bandwidth of these shared hosts moves by
# up to 2x within a minute, so the two are measured interleaved: per round, bench_matmul membw (2
# threads, on huge pages like the weights, the best of: 1/2/4 plain streams per thread, and two
# streams of 32-byte loads with software prefetch 256-1024 B ahead, which reads 0-4% more than the
# plain ones on the Intel host: the bar is the most this machine was seen to read), one `splash bench`
# tg run, membw again; the round's share = decode GB/s (weights + KV read per token x tok/s) / the
# mean of the two membw figures around it. Prints every round and the median share. A benchmark,
# not a test: record the load average it prints with the figures.
#
#   bench/decode_bandwidth.sh --build build-perf --model /tmp/q06-q4_0.gguf [--tg 128] [--rounds 5] [--threads 2]
#                             [--depth D]     # decode after D cached tokens (their KV counts as read)
#   bench/decode_bandwidth.sh --build build-perf --membw-only     # prints only the GB/s figure (scripts/bench-cpu)
#
# The build needs -DSPLASH_BUILD_BENCH=ON for bench_matmul.
set -euo pipefail
build=build; model=; tg=128; rounds=5; threads=2; depth=0; membw_only=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --tg) tg=$2; shift 2 ;;
    --rounds|--reps) rounds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --depth) depth=$2; shift 2 ;;
    --membw-only) membw_only=1; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[[ -n "$model" || $membw_only == 1 ]] || { echo "--model is required" >&2; exit 2; }
[[ -x "$build/bench/bench_matmul" ]] || { echo "$build/bench/bench_matmul is missing (configure with -DSPLASH_BUILD_BENCH=ON)" >&2; exit 2; }
[[ $membw_only == 1 || -x "$build/splash" ]] || { echo "$build/splash is missing" >&2; exit 2; }

membw() {
  SPLASH_BENCH_THREADS=$threads "$build/bench/bench_matmul" --benchmark_filter='^membw' \
      --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_format=json |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.2f" % max(b["GB/s"] for b in d["benchmarks"] if b.get("aggregate_name")=="median"))'
}
if [[ $membw_only == 1 ]]; then membw; exit 0; fi

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
before=$(membw)
for r in $(seq "$rounds"); do
  "$build/splash" bench --model "$model" -p 0 -n "$tg" -d "$depth" -r 1 --threads "$threads" --json > "$work/bench.json"
  after=$(membw)
  python3 - "$before" "$after" "$work/bench.json" "$r" <<'PY' | tee -a "$work/rounds.txt"
import json, sys
before, after, path, r = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
for b in json.load(open(path)):
    if "decode_gb_s" not in b:
        continue
    bw = (before + after) / 2
    print(f"round {r}: {b['model']} {b['test']}: {b['tok_s_median']:.2f} tok/s x "
          f"{b['decode_bytes_per_token'] / 2**20:.1f} MiB/token = {b['decode_gb_s']:.2f} GB/s; "
          f"membw {before:.1f} / {after:.1f} GB/s; share {100 * b['decode_gb_s'] / bw:.1f}%")
PY
  before=$after
done
python3 - "$work/rounds.txt" <<'PY'
import re, statistics, sys
shares = [float(m.group(1)) for m in re.finditer(r"share ([0-9.]+)%", open(sys.argv[1]).read())]
tok = [float(m.group(1)) for m in re.finditer(r": ([0-9.]+) tok/s", open(sys.argv[1]).read())]
print(f"median over {len(shares)} rounds: {statistics.median(tok):.2f} tok/s, share {statistics.median(shares):.1f}%"
      f" (range {min(shares):.1f}-{max(shares):.1f}%)")
PY
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
