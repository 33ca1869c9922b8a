#!/usr/bin/env bash
# The render figure: `switchyard render` (release build) of N generated FleetWorkloads
# (default 10000; FleetWorkload app-<i> in namespace ns<i % 100> of workspace ws<i % 100>, one
# Fleet `f` per namespace), printing wall time and peak RSS (/usr/bin/time -v) and the
# output's SHA-256. RUNS runs (default 3).
#
#   scripts/render-bench.sh [N] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo run --release --quiet -p switchyard-bench --example render -- "${1:-10000}" "${2:-3}"
