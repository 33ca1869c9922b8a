#!/usr/bin/env bash
# Side by side, in one run: Switchyard's CEL and Google's C++ runtime (through its Python
# binding, PyPI cel-expr-python, in a throwaway venv) on the CEL benchmark object and
# expressions. Each runtime's cost of evaluating `true` with the same bindings (E0) is
# subtracted, so call overhead does not count. Not run by CI.
#
# Usage: scripts/cel-vs-cpp.sh [BENCH_DIR]   (default: ../shared/bench/cel)
set -euo pipefail
cd "$(dirname "$0")/.."
bench="${1:-../shared/bench/cel}"
object="$bench/object.json"
exprs="$bench/exprs.json"
[ -f "$object" ] && [ -f "$exprs" ] || { echo "benchmark files not found in $bench" >&2; exit 2; }

venv="$(mktemp -d)/venv"
trap 'rm -rf "$(dirname "$venv")"' EXIT
python3 -m venv "$venv"
"$venv/bin/pip" install -q cel-expr-python

cargo build -q --release -p switchyard-cel --example cel_timings
rust_json="$(target/release/examples/cel_timings "$object" "$exprs")"
cpp_json="$("$venv/bin/python" scripts/cel_cpp_timings.py "$object" "$exprs")"

python3 - "$rust_json" "$cpp_json" "$exprs" <<'PY'
import json, sys
rust, cpp, exprs = json.loads(sys.argv[1]), json.loads(sys.argv[2]), json.load(open(sys.argv[3]))
base_r, base_c = rust.get("E0_baseline_true", 0.0), cpp.get("E0_baseline_true", 0.0)
print(f"{'expression':<18}{'switchyard ns':>15}{'C++ ns':>10}{'ratio':>8}   (each minus its E0: {base_r:.0f} / {base_c:.0f} ns)")
worst = 0.0
for name, _ in exprs:
    if name == "E0_baseline_true":
        continue
    r, c = max(rust[name] - base_r, 1.0), max(cpp[name] - base_c, 1.0)
    worst = max(worst, r / c)
    print(f"{name:<18}{r:>15.0f}{c:>10.0f}{r / c:>8.2f}")
print(f"worst ratio switchyard/C++: {worst:.2f} ({'at or below' if worst <= 1.0 else 'above'} the C++ runtime)")
PY
