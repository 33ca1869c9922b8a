#!/usr/bin/env bash
# Builds the tools the deployment tests use: helm (helm.sh/helm/v3) and kustomize
# (sigs.k8s.io/kustomize/kustomize/v5) from their Go modules, at pinned releases, once per
# machine. Prints the folder holding both binaries (the tests read it from
# SWITCHYARD_DEPLOY_TOOLS, or call this script themselves).
#
#   scripts/deploy-tools.sh            build what is missing, print the folder
#   scripts/deploy-tools.sh --print    print the folder without building
#
# The cache lives outside the work tree: $SWITCHYARD_TEST_CACHE, default ~/.cache/switchyard.
# Go's module and build caches of the builds go to a scratch folder removed afterwards: only
# the two binaries are kept.
set -euo pipefail

HELM_VERSION="3.22.0"
KUSTOMIZE_VERSION="5.8.1"

cache="${SWITCHYARD_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/switchyard}"
bin="$cache/deploy-tools/helm-v${HELM_VERSION}-kustomize-v${KUSTOMIZE_VERSION}"

if [[ "${1:-}" == "--print" ]]; then
  echo "$bin"
  exit 0
fi

if [[ -x "$bin/helm" && -x "$bin/kustomize" ]]; then
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || { echo "deploy-tools.sh: go is required to build helm and kustomize" >&2; exit 1; }
mkdir -p "$bin"
# One build at a time per machine: concurrent test binaries may all ask for the tools.
exec 9>"$bin.lock"
flock 9
if [[ -x "$bin/helm" && -x "$bin/kustomize" ]]; then
  echo "$bin"
  exit 0
fi

work="$(mktemp -d)"
# The module cache is written read-only; -modcacherw lets it be removed.
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
export CGO_ENABLED=0 GOFLAGS="-mod=mod -modcacherw" GOTOOLCHAIN=local
export GOMODCACHE="$work/gomod" GOCACHE="$work/gocache"

build() {
  local name="$1" module="$2" version="$3" package="$4" ldflags="$5"
  echo "building $name v${version} (once per machine)" >&2
  mkdir -p "$work/$name"
  (
    cd "$work/$name"
    go mod init "switchyard.dev/deploy-$name" >/dev/null 2>&1
    go get "${module}@v${version}" >&2
    if [[ "$name" == helm ]]; then
      # The Kubernetes version helm assumes without a cluster (`helm template`, `helm lint`,
      # a chart's kubeVersion) is its client-go's (v0.N.M -> 1.N), as helm's Makefile sets it.
      local client_go minor
      client_go="$(go list -m -f '{{.Version}}' k8s.io/client-go)"
      minor="$(echo "$client_go" | cut -d. -f2)"
      for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
        ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$minor"
      done
    fi
    go build -trimpath -ldflags "$ldflags" -o "$bin/$name.tmp" "$package"
  )
  mv "$bin/$name.tmp" "$bin/$name"
}

if [[ ! -x "$bin/helm" ]]; then
  # helm prints its version from these variables.
  build helm helm.sh/helm/v3 "$HELM_VERSION" helm.sh/helm/v3/cmd/helm \
    "-s -w -X helm.sh/helm/v3/internal/version.version=v${HELM_VERSION} -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
fi

if [[ ! -x "$bin/kustomize" ]]; then
  build kustomize sigs.k8s.io/kustomize/kustomize/v5 "$KUSTOMIZE_VERSION" sigs.k8s.io/kustomize/kustomize/v5 \
    "-s -w -X sigs.k8s.io/kustomize/api/provenance.version=v${KUSTOMIZE_VERSION}"
fi

echo "$bin"
