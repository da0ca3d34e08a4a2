#!/usr/bin/env bash
# Decode as a share of this machine's memory bandwidth (issue 3: decode at >= 90% of the measured
# read bandwidth divided by the bytes read per token). Prints bench_matmul's membw (2 threads, the
# best of 1/2/4 streams per thread) and `splash bench`'s decode GB/s (weights + KV read per token x
# tok/s), then the ratio. A benchmark, not a test: run it on an idle machine (load average well
# under 1) and record the load with the figures.
#
#   bench/decode_bandwidth.sh --build build-perf --model /tmp/q06-q4_0.gguf [--tg 128] [--reps 3] [--threads 2]
#   bench/decode_bandwidth.sh --build build-perf --membw-only     # prints only the GB/s figure (scripts/bench-cpu)
#
# The build needs -DSPLASH_BUILD_BENCH=ON for bench_matmul.
set -euo pipefail
build=build; model=; tg=128; reps=3; threads=2; membw_only=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --tg) tg=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --membw-only) membw_only=1; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
[[ -n "$model" || $membw_only == 1 ]] || { echo "--model is required" >&2; exit 2; }
[[ -x "$build/bench/bench_matmul" ]] || { echo "$build/bench/bench_matmul is missing (configure with -DSPLASH_BUILD_BENCH=ON)" >&2; exit 2; }
[[ $membw_only == 1 || -x "$build/splash" ]] || { echo "$build/splash is missing" >&2; exit 2; }
[[ $membw_only == 1 ]] || echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
membw=$(SPLASH_BENCH_THREADS=$threads "$build/bench/bench_matmul" --benchmark_filter='^membw' \
          --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_format=json |
        python3 -c 'import json,sys; d=json.load(sys.stdin); print("%.2f" % max(b["GB/s"] for b in d["benchmarks"] if b.get("aggregate_name")=="median"))')
if [[ $membw_only == 1 ]]; then echo "$membw"; exit 0; fi
echo "memory read bandwidth ($threads threads, bench_matmul membw, best median): $membw GB/s"
json=$("$build/splash" bench --model "$model" -p 0 -n "$tg" -r "$reps" --threads "$threads" --json)
python3 - "$membw" "$json" <<'PY'
import json, sys
membw = float(sys.argv[1])
for r in json.loads(sys.argv[2]):
    if "decode_gb_s" not in r:
        continue
    print(f"{r['model']} {r['test']}: {r['tok_s_median']:.2f} tok/s x {r['decode_bytes_per_token'] / 2**20:.1f} MiB/token"
          f" = {r['decode_gb_s']:.2f} GB/s = {100 * r['decode_gb_s'] / membw:.1f}% of {membw:.2f} GB/s")
PY
