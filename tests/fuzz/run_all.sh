#!/bin/bash
# Runs every fuzz target in <build-dir>/fuzz for <seconds> each, starting from its seed corpus in
# tests/fuzz/corpus/<name without fuzz_>/ (copied to a scratch dir so new inputs don't touch the repo).
# Exit status is non-zero if any target finds a crash.
set -u
build=${1:?usage: run_all.sh <build-dir> <seconds>}
secs=${2:?usage: run_all.sh <build-dir> <seconds>}
here=$(cd "$(dirname "$0")" && pwd)
status=0
for bin in "$build"/fuzz/fuzz_*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin")
  seeds="$here/corpus/${name#fuzz_}"
  work=$(mktemp -d)
  [ -d "$seeds" ] && cp -r "$seeds"/. "$work"/
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
done
exit $status
