#!/bin/bash
# Runs every fuzz target in <build-dir>/fuzz for <seconds> each, starting from its seed corpus in
# tests/fuzz/corpus/<name without fuzz_>/ (copied to a scratch dir so new inputs don't touch the repo).
# Targets run $SPLASH_FUZZ_JOBS at a time (default: the number of CPUs; each target is one process,
# so every one still gets its <seconds> of a core). Exit status is non-zero if any target finds a crash.
set -u
build=${1:?usage: run_all.sh <build-dir> <seconds>}
secs=${2:?usage: run_all.sh <build-dir> <seconds>}
jobs=${SPLASH_FUZZ_JOBS:-$(nproc)}
here=$(cd "$(dirname "$0")" && pwd)
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT

# One target; its report goes to $results/<name>.out and its status to $results/<name>.rc.
run_one() {
  local bin=$1 name work seeds rc status=0
  name=$(basename "$bin")
  seeds="$here/corpus/${name#fuzz_}"
  work=$(mktemp -d)
  [ -d "$seeds" ] && cp -r "$seeds"/. "$work"/
  {
    echo "== $name: ${secs}s"
    "$bin" -max_total_time="$secs" -rss_limit_mb=2048 -artifact_prefix="$work/" "$work" >"$work.log" 2>&1
    rc=$?
    tail -3 "$work.log"
    [ $rc -eq 0 ] || status=1
    if ls "$work"/crash-* "$work"/leak-* "$work"/oom-* "$work"/timeout-* >/dev/null 2>&1; then
      echo "$name: findings kept in $work"
      status=1
    else
      rm -rf "$work" "$work.log"
    fi
  } >"$results/$name.out"
  echo $status >"$results/$name.rc"
}

running=0
for bin in "$build"/fuzz/fuzz_*; do
  [ -x "$bin" ] || continue
  run_one "$bin" &
  running=$((running + 1))
  if [ $running -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait

status=0
for out in "$results"/*.out; do
  [ -e "$out" ] || continue
  cat "$out"
  [ "$(cat "${out%.out}.rc")" = 0 ] || status=1
done
exit $status
