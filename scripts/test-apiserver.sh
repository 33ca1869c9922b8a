#!/usr/bin/env bash
# Builds the real Kubernetes control plane the broker's tests run against: kube-apiserver from
# the Go module k8s.io/kubernetes and etcd from go.etcd.io/etcd/server/v3, at pinned releases,
# once per machine. Prints the folder holding both binaries (the test harness reads it from
# SWITCHYARD_TEST_BIN, or calls this script itself).
#
#   scripts/test-apiserver.sh            build what is missing, print the folder
#   scripts/test-apiserver.sh --print    print the folder without building
#
# The cache lives outside the work tree: $SWITCHYARD_TEST_CACHE, default ~/.cache/switchyard.
set -euo pipefail

KUBERNETES_VERSION="1.34.4"
ETCD_VERSION="3.6.16"

cache="${SWITCHYARD_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/switchyard}"
bin="$cache/control-plane/kubernetes-v${KUBERNETES_VERSION}-etcd-v${ETCD_VERSION}"

if [[ "${1:-}" == "--print" ]]; then
  echo "$bin"
  exit 0
fi

if [[ -x "$bin/kube-apiserver" && -x "$bin/etcd" ]]; then
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || { echo "test-apiserver.sh: go is required to build kube-apiserver and etcd" >&2; exit 1; }
mkdir -p "$bin"
# One build at a time per machine: concurrent test binaries may all ask for the binaries.
exec 9>"$bin.lock"
flock 9
if [[ -x "$bin/kube-apiserver" && -x "$bin/etcd" ]]; then
  echo "$bin"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local

if [[ ! -x "$bin/etcd" ]]; then
  echo "building etcd v${ETCD_VERSION} (once per machine)" >&2
  mkdir -p "$work/etcd"
  (
    cd "$work/etcd"
    go mod init switchyard.dev/test-etcd >/dev/null 2>&1
    go get "go.etcd.io/etcd/server/v3@v${ETCD_VERSION}" >&2
    go build -trimpath -ldflags "-s -w" -o "$bin/etcd.tmp" go.etcd.io/etcd/server/v3
  )
  mv "$bin/etcd.tmp" "$bin/etcd"
fi

if [[ ! -x "$bin/kube-apiserver" ]]; then
  echo "building kube-apiserver v${KUBERNETES_VERSION} (once per machine; several minutes)" >&2
  mkdir -p "$work/k8s"
  cd "$work/k8s"
  go mod init switchyard.dev/test-apiserver >/dev/null 2>&1
  go mod download -json "k8s.io/kubernetes@v${KUBERNETES_VERSION}" >"$work/k8s.json"
  gomod="$(sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p' "$work/k8s.json")"
  # k8s.io/kubernetes points each staging module at ./staging/...; a module requiring it must
  # name the published release of each instead (v1.N.M -> v0.N.M).
  staging="0.${KUBERNETES_VERSION#1.}"
  {
    echo "require k8s.io/kubernetes v${KUBERNETES_VERSION}"
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => \./staging/.*#replace \1 => \1 v'"$staging"'#p' "$gomod"
  } >>go.mod
  # A tools file keeps the command's packages in the module graph for tidy.
  cat >tools.go <<'GO'
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
GO
  go mod tidy >&2
  major="${KUBERNETES_VERSION%%.*}"
  minor="${KUBERNETES_VERSION#*.}"
  minor="${minor%%.*}"
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=v${KUBERNETES_VERSION} -X $pkg.gitMajor=${major} -X $pkg.gitMinor=${minor}"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  go build -trimpath -ldflags "$ldflags" -o "$bin/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
  mv "$bin/kube-apiserver.tmp" "$bin/kube-apiserver"
fi

echo "$bin"
