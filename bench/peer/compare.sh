#!/bin/sh
# Side-by-side benchmark against llama.cpp (see compare.mjs and docs/PERFORMANCE.md):
#   bench/peer/compare.sh [--splash build/splash] [--reps 3] [--rounds 1] [--depth D] MODEL.gguf...
# Installs node-llama-cpp (pinned by package-lock.json) into bench/peer/node_modules on first use,
# with NODE_LLAMA_CPP_SKIP_DOWNLOAD=true: its prebuilt CPU binaries are used, nothing is compiled or
# downloaded from GitHub. Never run by CI or scripts/setup.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -d "$here/node_modules/node-llama-cpp" ]; then
  echo "installing node-llama-cpp into $here/node_modules (once)" >&2
  (cd "$here" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm ci --omit=optional --no-audit --no-fund >&2)
fi
exec node "$here/compare.mjs" "$@"
