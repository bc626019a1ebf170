#!/usr/bin/env bash
# Run every reference scenario once (2 workers) and print one JSON line per run.
# Usage: ./run_all.sh [extra bench.js args...]   e.g. ./run_all.sh --prewarm
set -euo pipefail
cd "$(dirname "$0")"
for s in trivial tools10 cpu toolrt timeout rss respawn; do
  node bench.js --scenario "$s" --workers 2 "$@"
done
# toolrt again with every process pinned to one core (thread wake-ups get cheaper)
taskset -c 0 node bench.js --scenario toolrt --workers 2 "$@"
