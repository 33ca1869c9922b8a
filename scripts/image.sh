#!/usr/bin/env bash
# Builds the broker's container image on this machine, without network: a static binary
# built here, put into the final (`FROM scratch`) stage of deploy/Dockerfile by podman or
# buildah, whose `--build-context build=DIR` stands in for the Dockerfile's Rust stage.
#
#   scripts/image.sh [TAG]        build switchyard:TAG (default the workspace's version)
#   scripts/image.sh --binary     build only the static binary, print its path
#
# The binary: for x86_64-unknown-linux-musl when that target is installed, otherwise glibc
# linked statically (`-C target-feature=+crt-static` for x86_64-unknown-linux-gnu): the
# dependencies are Rust, and the C in mimalloc and ring links statically as well.
# Needs podman or buildah (Debian: `apt-get install podman buildah`).
set -euo pipefail
cd "$(dirname "$0")/.."

version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)"
only_binary=false
tag="$version"
case "${1:-}" in
  --binary) only_binary=true ;;
  "") ;;
  *) tag="$1" ;;
esac

if rustup target list --installed 2>/dev/null | grep -qx x86_64-unknown-linux-musl; then
  target=x86_64-unknown-linux-musl
  flags=""
else
  target=x86_64-unknown-linux-gnu
  flags="-C target-feature=+crt-static"
fi
echo "building the static binary for $target" >&2
RUSTFLAGS="$flags" cargo build --locked --release --target "$target" -p switchyard-cli >&2
target_dir="${CARGO_TARGET_DIR:-target}"
binary="$target_dir/$target/release/switchyard"
# A dynamic binary would not start on `scratch`.
if ! file "$binary" 2>/dev/null | grep -q "statically linked\|static-pie linked"; then
  if ldd "$binary" >/dev/null 2>&1; then
    echo "image.sh: $binary is not statically linked" >&2
    exit 1
  fi
fi
if $only_binary; then
  echo "$binary"
  exit 0
fi

builder=""
for tool in podman buildah; do
  if command -v "$tool" >/dev/null; then
    builder="$tool"
    break
  fi
done
[[ -n "$builder" ]] || { echo "image.sh: podman or buildah is needed (apt-get install podman buildah)" >&2; exit 1; }

# What the Dockerfile's first stage leaves in /out.
context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
mkdir -p "$context/out"
cp "$binary" "$context/out/switchyard"
strip "$context/out/switchyard" 2>/dev/null || true
cp /etc/ssl/certs/ca-certificates.crt "$context/out/ca-certificates.crt"
echo 'nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin' >"$context/out/passwd"
echo 'nonroot:x:65532:' >"$context/out/group"

revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
created="$(git log -1 --format=%cI 2>/dev/null || echo 1970-01-01T00:00:00Z)"
"$builder" build \
  --file deploy/Dockerfile \
  --build-context "build=$context" \
  --build-arg TARGETARCH=amd64 \
  --build-arg "VERSION=$version" \
  --build-arg "REVISION=$revision" \
  --build-arg "CREATED=$created" \
  --tag "switchyard:$tag" \
  "$context" >&2
echo "switchyard:$tag"
