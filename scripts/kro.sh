#!/usr/bin/env bash
# Builds kro (kubernetes-sigs/kro) from its Go module at a pinned release, once per machine, for
# the side-by-side benchmark (engine/bench, `--bin versus-kro`). Prints the folder holding the
# controller binary `kro` and kro's CRDs (`crds/`).
#
#   scripts/kro.sh            build what is missing, print the folder
#   scripts/kro.sh --print    print the folder without building
#
# The cache lives outside the work tree: $SWITCHYARD_TEST_CACHE, default ~/.cache/switchyard.
# Go's module and build caches go to a scratch folder removed afterwards.
set -euo pipefail

KRO_VERSION="0.9.4"
# The module path kro's go.mod declares (the vanity path sigs.k8s.io/kro is not served here).
KRO_MODULE="github.com/kubernetes-sigs/kro"

cache="${SWITCHYARD_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/switchyard}"
dir="$cache/kro/v${KRO_VERSION}"

if [[ "${1:-}" == "--print" ]]; then
  echo "$dir"
  exit 0
fi
if [[ -x "$dir/kro" && -d "$dir/crds" ]]; then
  echo "$dir"
  exit 0
fi

command -v go >/dev/null || { echo "kro.sh: go is required to build kro" >&2; exit 1; }
mkdir -p "$dir"
exec 9>"$dir.lock"
flock 9
if [[ -x "$dir/kro" && -d "$dir/crds" ]]; then
  echo "$dir"
  exit 0
fi

work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
export CGO_ENABLED=0 GOFLAGS="-mod=mod -modcacherw" GOTOOLCHAIN=local
export GOMODCACHE="$work/gomod" GOCACHE="$work/gocache"

echo "building kro v${KRO_VERSION} (once per machine)" >&2
(
  cd "$work"
  go mod init switchyard.dev/kro-build >/dev/null 2>&1
  go get "${KRO_MODULE}@v${KRO_VERSION}" >&2
  go build -trimpath -ldflags "-s -w" -o "$dir/kro.tmp" "${KRO_MODULE}/cmd/controller"
)
rm -rf "$dir/crds"
cp -r "$GOMODCACHE/${KRO_MODULE}@v${KRO_VERSION}/helm/crds" "$dir/crds"
chmod -R u+w "$dir/crds"
mv "$dir/kro.tmp" "$dir/kro"
echo "$dir"
