#!/usr/bin/env bash
# Builds a static, reproducible seqd binary: the same flags the Dockerfile
# uses. Usage: scripts/build.sh [OUT]   (default ./bin/seqd)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bin/seqd}
CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w -buildid=" -o "$out" ./cmd/seqd
sha256sum "$out"
