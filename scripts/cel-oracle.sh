#!/usr/bin/env bash
# Builds tools/cel-oracle, Kubernetes' own CEL environment (cel-go and k8s.io/apiserver at the
# versions Kubernetes v1.34 uses) behind a JSON-lines interface, once per machine for each
# version of its sources. Prints the binary's path on its last line; the differential test
# (engine/cel/tests/differential.rs) reads it from SWITCHYARD_CEL_ORACLE, or calls this script.
#
#   scripts/cel-oracle.sh            build it if missing, print its path
#   scripts/cel-oracle.sh --print    print its path without building
#
# The cache lives outside the work tree: $SWITCHYARD_TEST_CACHE, default ~/.cache/switchyard.
set -euo pipefail

src="$(cd "$(dirname "$0")/../tools/cel-oracle" && pwd)"
cache="${SWITCHYARD_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/switchyard}"
hash="$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-16)"
dir="$cache/cel-oracle/$hash"
bin="$dir/cel-oracle"

if [[ "${1:-}" == "--print" ]]; then
  echo "$bin"
  exit 0
fi

if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || { echo "cel-oracle.sh: go is required to build the CEL oracle (tools/cel-oracle)" >&2; exit 1; }
mkdir -p "$dir"
# One build at a time per machine: concurrent test binaries may all ask for it.
exec 9>"$dir.lock"
flock 9
if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi

echo "building the CEL oracle (tools/cel-oracle, once per machine)" >&2
# -mod=readonly: the checked-in go.mod and go.sum decide every version.
(
  cd "$src"
  CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=local \
    go build -trimpath -ldflags "-s -w" -o "$bin.tmp" .
)
mv "$bin.tmp" "$bin"
echo "$bin"
